/*
 * The vmem C suite: the library exactly as IREE uses it, through the
 * generated iree/hal/drivers/amdgpu/util/vmem.h and an IREE-layout HSA table
 * filled by dlsym (libhsa_standin.c), on the software HSA runtime
 * (VMEM_TEST_SIM) or a real ROCr.
 *
 * Built once per IREE table layout (IREE_TEST_LIBHSA_LAYOUT), with the
 * stand-in IREE status allocator (VMEM_TEST_MESSAGES: messages are checked)
 * or without it (statuses must be code-only).
 *
 * Usage: vmem_test [case-name]   (no argument: every case)
 * Exit status: 0 pass, 1 failure, 77 skipped (no GPU on a real ROCr).
 */
#define _GNU_SOURCE
#include "dropin_check.h"
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iree/hal/drivers/amdgpu/util/libhsa.h"
#include "iree/hal/drivers/amdgpu/util/topology.h"
#include "vmem_test.h"
#if !VMEM_TEST_SIM
#include "system_hsa.h"
#endif
#if VMEM_TEST_SIM
#include "hsa_sim.h"
#endif

#if !defined(VMEM_TEST_MESSAGES)
#define VMEM_TEST_MESSAGES 0
#endif

//===----------------------------------------------------------------------===//
// Layouts shared with the library (docs/iree.md#layouts-shared-with-iree)
//===----------------------------------------------------------------------===//

_Static_assert(sizeof(iree_hal_amdgpu_topology_t) == 2144, "topology size");
_Static_assert(offsetof(iree_hal_amdgpu_topology_t, cpu_agent_count) == 1032, "");
_Static_assert(offsetof(iree_hal_amdgpu_topology_t, cpu_agents) == 1040, "");
_Static_assert(offsetof(iree_hal_amdgpu_topology_t, gpu_agent_count) == 1552, "");
_Static_assert(offsetof(iree_hal_amdgpu_topology_t, gpu_agents) == 1560, "");
_Static_assert(offsetof(iree_hal_amdgpu_topology_t, gpu_agent_queue_count) == 2072, "");
_Static_assert(offsetof(iree_hal_amdgpu_topology_t, gpu_cpu_map) == 2080, "");
_Static_assert(sizeof(iree_hal_amdgpu_vmem_ringbuffer_t) == 32, "ringbuffer size");
_Static_assert(offsetof(iree_hal_amdgpu_vmem_ringbuffer_t, capacity) == 0, "");
_Static_assert(offsetof(iree_hal_amdgpu_vmem_ringbuffer_t, alloc_handle) == 8, "");
_Static_assert(offsetof(iree_hal_amdgpu_vmem_ringbuffer_t, va_base_ptr) == 16, "");
_Static_assert(offsetof(iree_hal_amdgpu_vmem_ringbuffer_t, ring_base_ptr) == 24, "");
_Static_assert(sizeof(hsa_amd_memory_access_desc_t) == 16, "access desc size");
_Static_assert(IREE_HAL_AMDGPU_ACCESS_MODE_SHARED == 0 &&
                   IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE == 1 &&
                   IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER == 2 &&
                   IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER == 3,
               "access mode values");
_Static_assert(IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT == 0 &&
                   IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST == 1,
               "memory type values");
_Static_assert(sizeof(iree_hal_amdgpu_vmem_access_mode_t) == 4, "");
_Static_assert(sizeof(iree_hal_amdgpu_vmem_memory_type_t) == 4, "");

//===----------------------------------------------------------------------===//
// Harness
//===----------------------------------------------------------------------===//

DROPIN_CHECK_DEFINE_FAILURES;


// Checks a status's code and (when the allocator is linked in) that its
// message contains `substring` (NULL: any), then frees it. Without the
// allocator the status must be code-only: the code itself.
static int check_status(iree_status_t status, iree_status_code_t code,
                        const char* substring, const char* file, int line) {
  int ok = 1;
  if (iree_status_code(status) != code) {
    fprintf(stderr, "%s:%d: status code %d, expected %d (%s)\n", file, line,
            (int)iree_status_code(status), (int)code,
            vmem_test_status_message(status) ? vmem_test_status_message(status)
                                             : "no message");
    ok = 0;
  } else if (code == IREE_STATUS_OK) {
    ok = status == NULL;
  } else if (VMEM_TEST_MESSAGES) {
    const char* message = vmem_test_status_message(status);
    if (!message) {
      fprintf(stderr, "%s:%d: status has no message\n", file, line);
      ok = 0;
    } else if (substring && !strstr(message, substring)) {
      fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", file, line,
              message, substring);
      ok = 0;
    }
  } else if ((uintptr_t)status != (uintptr_t)code) {
    fprintf(stderr, "%s:%d: status %p is not code-only\n", file, line,
            (void*)status);
    ok = 0;
  }
  vmem_test_status_free(status);
  return ok;
}

#define CHECK_STATUS(expr, code, substring) \
  DROPIN_REQUIRE_MSG(check_status((expr), (code), (substring), __FILE__, __LINE__), "%s", #expr)
#define CHECK_OK(expr) CHECK_STATUS(expr, IREE_STATUS_OK, NULL)

static bool is_zero(const void* p, size_t n) {
  const unsigned char* b = (const unsigned char*)p;
  for (size_t i = 0; i < n; ++i) {
    if (b[i]) return false;
  }
  return true;
}

enum {
  NEEDS_SIM = 1 << 0,      // uses the software runtime's control API
  ALLOW_LEFTOVERS = 1 << 1 // leaves HSA objects behind on purpose
};

typedef struct test_case_t {
  const char* name;
  void (*fn)(void);
  int flags;
} test_case_t;

//===----------------------------------------------------------------------===//
// Fixture: HSA up, IREE-style table filled, agents and topology
//===----------------------------------------------------------------------===//

static iree_hal_amdgpu_libhsa_t g_libhsa;
static hsa_agent_t g_cpu_agent;
static hsa_agent_t g_gpu_agents[64];
static size_t g_gpu_count;
static iree_hal_amdgpu_topology_t g_topology;

#if VMEM_TEST_SIM
static hsa_sim_config_t g_config;
static bool g_custom_config = false;
// Applied by the next setup() (the runtime is rebuilt on the next hsa_init).
static void use_config(const hsa_sim_config_t* config) {
  g_config = *config;
  g_custom_config = true;
}
#endif

static hsa_status_t collect_agent(hsa_agent_t agent, void* user_data) {
  (void)user_data;
  hsa_device_type_t type;
  if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) !=
      HSA_STATUS_SUCCESS) {
    return HSA_STATUS_ERROR;
  }
  if (type == HSA_DEVICE_TYPE_CPU && g_topology.cpu_agent_count == 0) {
    g_cpu_agent = agent;
    g_topology.cpu_agents[g_topology.cpu_agent_count++] = agent;
  } else if (type == HSA_DEVICE_TYPE_GPU && g_gpu_count < 64) {
    g_gpu_agents[g_gpu_count++] = agent;
    g_topology.gpu_agents[g_topology.gpu_agent_count++] = agent;
  }
  return HSA_STATUS_SUCCESS;
}

static bool setup(void) {
#if VMEM_TEST_SIM
  hsa_sim_config_t config;
  if (g_custom_config) {
    config = g_config;
  } else {
    hsa_sim_config_default(&config);
  }
  if (hsa_sim_configure(&config) != HSA_STATUS_SUCCESS) return false;
#endif
  if (hsa_init() != HSA_STATUS_SUCCESS) return false;
#if VMEM_TEST_SIM
  hsa_sim_clear_faults();
  hsa_sim_trace_clear();
  hsa_sim_trace_enable(true);
#endif
  const char* missing = NULL;
  if (!iree_test_libhsa_initialize(&g_libhsa, &missing)) {
    fprintf(stderr, "HSA table entry %s not found in the process\n", missing);
    return false;
  }
  memset(&g_topology, 0, sizeof(g_topology));
  g_gpu_count = 0;
  if (hsa_iterate_agents(collect_agent, NULL) != HSA_STATUS_SUCCESS) {
    return false;
  }
  // IREE lists the CPU agents first, then the GPU agents.
  for (size_t i = 0; i < g_topology.cpu_agent_count; ++i) {
    g_topology.all_agents[g_topology.all_agent_count++] =
        g_topology.cpu_agents[i];
  }
  for (size_t i = 0; i < g_topology.gpu_agent_count; ++i) {
    g_topology.all_agents[g_topology.all_agent_count++] =
        g_topology.gpu_agents[i];
  }
  return true;
}

static bool teardown(int flags) {
  bool ok = true;
#if VMEM_TEST_SIM
  hsa_sim_clear_faults();
  hsa_sim_trace_enable(false);
  hsa_sim_live_t live;
  hsa_sim_get_live(&live);
  if (!(flags & ALLOW_LEFTOVERS) &&
      (live.reservations || live.handles || live.mappings)) {
    fprintf(stderr,
            "live HSA objects after the test: %llu reservations, %llu "
            "handles, %llu mappings\n",
            (unsigned long long)live.reservations,
            (unsigned long long)live.handles,
            (unsigned long long)live.mappings);
    ok = false;
  }
  g_custom_config = false;
#else
  (void)flags;
#endif
  if (vmem_test_live_statuses() != 0) {
    fprintf(stderr, "%d statuses leaked\n", vmem_test_live_statuses());
    ok = false;
  }
  hsa_shut_down();
  return ok;
}

// The first pool of `agent` that upstream's rules accept for `flags`,
// found with direct HSA calls (the expected answer).
typedef struct expected_pool_t {
  uint32_t flags;
  hsa_amd_memory_pool_t pool;
} expected_pool_t;

static hsa_status_t expected_pool_visit(hsa_amd_memory_pool_t pool,
                                        void* user_data) {
  expected_pool_t* state = (expected_pool_t*)user_data;
  uint32_t segment = 0, global_flags = 0;
  bool alloc_allowed = false;
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
                               &segment);
  hsa_amd_memory_pool_get_info(
      pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &alloc_allowed);
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                               &global_flags);
  if (segment == HSA_AMD_SEGMENT_GLOBAL && alloc_allowed &&
      (global_flags & state->flags)) {
    state->pool = pool;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

static hsa_amd_memory_pool_t expected_pool(hsa_agent_t agent, uint32_t flags) {
  expected_pool_t state = {flags, {0}};
  hsa_amd_agent_iterate_memory_pools(agent, expected_pool_visit, &state);
  return state.pool;
}

static inline hsa_amd_memory_pool_t pool_at(hsa_agent_t agent, int index);

#define COARSE HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED
#define FINE                                    \
  (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | \
   HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED)

#if VMEM_TEST_SIM
static size_t trace_count_of(const char* function) {
  size_t n = 0;
  for (size_t i = 0; i < hsa_sim_trace_count(); ++i) {
    if (strcmp(hsa_sim_trace_get(i)->function, function) == 0) ++n;
  }
  return n;
}

// Index of the nth (1-based) traced call of `function`, or SIZE_MAX.
static size_t trace_find(const char* function, size_t nth) {
  for (size_t i = 0; i < hsa_sim_trace_count(); ++i) {
    if (strcmp(hsa_sim_trace_get(i)->function, function) == 0 && --nth == 0) {
      return i;
    }
  }
  return SIZE_MAX;
}

static hsa_sim_pool_desc_t sim_pool(uint32_t segment, uint32_t flags,
                                    bool alloc_allowed, uint64_t rec_granule) {
  hsa_sim_pool_desc_t pool = {
      .segment = segment,
      .global_flags = flags,
      .alloc_allowed = alloc_allowed,
      .size = 1ull << 30,
      .alloc_granule = 4096,
      .rec_granule = rec_granule,
      .alignment = 4096,
  };
  return pool;
}
#endif

static hsa_status_t pool_at_visit(hsa_amd_memory_pool_t pool, void* data) {
  struct {
    int index;
    hsa_amd_memory_pool_t pool;
  }* state = data;
  if (state->index-- == 0) {
    state->pool = pool;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

static inline hsa_amd_memory_pool_t pool_at(hsa_agent_t agent, int index) {
  struct {
    int index;
    hsa_amd_memory_pool_t pool;
  } state = {index, {0}};
  hsa_amd_agent_iterate_memory_pools(agent, pool_at_visit, &state);
  return state.pool;
}

//===----------------------------------------------------------------------===//
// Virtual Memory Utilities: pool lookup
//===----------------------------------------------------------------------===//

// IREE's vmem_test: coarse and fine pools on every agent.
static void test_find_pools(void) {
  hsa_agent_t agents[65];
  size_t count = 0;
  agents[count++] = g_cpu_agent;
  for (size_t i = 0; i < g_gpu_count; ++i) agents[count++] = g_gpu_agents[i];
  for (size_t i = 0; i < count; ++i) {
    hsa_amd_memory_pool_t pool = {0xDEAD};
    hsa_amd_memory_pool_t expect = expected_pool(agents[i], COARSE);
    if (expect.handle) {
      CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(
          &g_libhsa, agents[i], &pool));
      DROPIN_REQUIRE(pool.handle == expect.handle);
      pool.handle = 0xDEAD;
      DROPIN_REQUIRE(iree_hal_amdgpu_try_find_coarse_global_memory_pool(
          &g_libhsa, agents[i], &pool));
      DROPIN_REQUIRE(pool.handle == expect.handle);
    }
    expect = expected_pool(agents[i], FINE);
    DROPIN_REQUIRE(expect.handle != 0);  // every agent has a fine-grained pool
    pool.handle = 0xDEAD;
    CHECK_OK(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, agents[i],
                                                          &pool));
    DROPIN_REQUIRE(pool.handle == expect.handle);
    pool.handle = 0xDEAD;
    DROPIN_REQUIRE(iree_hal_amdgpu_try_find_fine_global_memory_pool(&g_libhsa,
                                                           agents[i], &pool));
    DROPIN_REQUIRE(pool.handle == expect.handle);
  }
#if VMEM_TEST_SIM
  // Default simulated system: GPU [coarse, fine, ext-fine, group];
  // CPU [fine|kernarg, coarse].
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(
      &g_libhsa, g_gpu_agents[0], &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(g_gpu_agents[0], 0).handle);
  CHECK_OK(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa,
                                                        g_gpu_agents[0], &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(g_gpu_agents[0], 1).handle);
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa,
                                                          g_cpu_agent, &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(g_cpu_agent, 1).handle);
  CHECK_OK(iree_hal_amdgpu_find_global_memory_pool(
      &g_libhsa, g_cpu_agent, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
      &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(g_cpu_agent, 0).handle);
#endif
}

#if VMEM_TEST_SIM
// First match wins; non-GLOBAL and non-allocatable pools are skipped; flags
// need only intersect.
static void test_pool_selection_rules(void) {
  hsa_sim_config_t config;
  hsa_sim_config_default(&config);
  config.gpu_pool_count = 6;
  config.gpu_pools[0] = sim_pool(HSA_AMD_SEGMENT_GROUP, COARSE, true, 65536);
  config.gpu_pools[1] = sim_pool(HSA_AMD_SEGMENT_GLOBAL, COARSE, false, 65536);
  config.gpu_pools[2] = sim_pool(HSA_AMD_SEGMENT_GLOBAL,
                                 HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
                                 true, 65536);
  config.gpu_pools[3] = sim_pool(
      HSA_AMD_SEGMENT_GLOBAL,
      COARSE | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, true, 65536);
  config.gpu_pools[4] = sim_pool(HSA_AMD_SEGMENT_GLOBAL, COARSE, true, 65536);
  config.gpu_pools[5] = sim_pool(
      HSA_AMD_SEGMENT_GLOBAL,
      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED, true, 65536);
  // The harness already ran setup() with the defaults: rebuild.
  DROPIN_REQUIRE(teardown(0));
  use_config(&config);
  DROPIN_REQUIRE(setup());
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(gpu, 3).handle);
  CHECK_OK(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, gpu, &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(gpu, 5).handle);
  CHECK_OK(iree_hal_amdgpu_find_global_memory_pool(
      &g_libhsa, gpu, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(gpu, 2).handle);
  // Nothing matches FINE_GRAINED alone.
  pool.handle = 0xDEAD;
  CHECK_STATUS(iree_hal_amdgpu_find_global_memory_pool(
                   &g_libhsa, gpu, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
                   &pool),
               IREE_STATUS_NOT_FOUND,
               "no memory pool matching the required flags 2");
  DROPIN_REQUIRE(pool.handle == 0);
}

static void test_not_found(void) {
  hsa_sim_config_t config;
  hsa_sim_config_default(&config);
  config.gpu_pool_count = 2;
  config.gpu_pools[0] = sim_pool(HSA_AMD_SEGMENT_GROUP, 0, false, 0);
  config.gpu_pools[1] = sim_pool(
      HSA_AMD_SEGMENT_GLOBAL, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED,
      true, 65536);
  DROPIN_REQUIRE(teardown(0));
  use_config(&config);
  DROPIN_REQUIRE(setup());
  hsa_amd_memory_pool_t pool = {0xDEAD};
  CHECK_STATUS(iree_hal_amdgpu_find_coarse_global_memory_pool(
                   &g_libhsa, g_gpu_agents[0], &pool),
               IREE_STATUS_NOT_FOUND,
               "no memory pool matching the required flags 4");
  DROPIN_REQUIRE(pool.handle == 0);
  pool.handle = 0xDEAD;
  DROPIN_REQUIRE(!iree_hal_amdgpu_try_find_coarse_global_memory_pool(
      &g_libhsa, g_gpu_agents[0], &pool));
  DROPIN_REQUIRE(pool.handle == 0);
  DROPIN_REQUIRE(iree_hal_amdgpu_try_find_fine_global_memory_pool(
      &g_libhsa, g_gpu_agents[0], &pool));
  DROPIN_REQUIRE(pool.handle == pool_at(g_gpu_agents[0], 1).handle);
}

static void test_find_faults(void) {
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool = {0xDEAD};
  hsa_sim_fail_nth_call("hsa_amd_agent_iterate_memory_pools", 1,
                        HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(
      iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool),
      IREE_STATUS_INVALID_ARGUMENT,
      "[hsa_amd_agent_iterate_memory_pools] HSA_STATUS_ERROR_INVALID_AGENT");
  DROPIN_REQUIRE(pool.handle == 0);
  hsa_sim_fail_nth_call("hsa_amd_agent_iterate_memory_pools", 1,
                        HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  DROPIN_REQUIRE(!iree_hal_amdgpu_try_find_fine_global_memory_pool(&g_libhsa, gpu,
                                                          &pool));
  hsa_sim_clear_faults();
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
}

// A failing pool attribute query stops the search with its status, as IREE
// HEAD's iterator returns it: each of the three queries (SEGMENT,
// RUNTIME_ALLOC_ALLOWED, GLOBAL_FLAGS) of the first pool and of a later pool,
// through every entry point. The status is the query's HSA status mapped to
// IREE's code and reported as the iteration's; *out_pool is zero; no query
// follows the failed one; a later matching pool is not used.
static void test_find_query_faults(void) {
  hsa_agent_t gpu = g_gpu_agents[0];
  static const char* const kQueries[] = {"SEGMENT", "RUNTIME_ALLOC_ALLOWED",
                                         "GLOBAL_FLAGS"};
  const struct {
    hsa_status_t hsa;
    iree_status_code_t iree;
    const char* name;
  } statuses[] = {
      {HSA_STATUS_ERROR_NOT_INITIALIZED, IREE_STATUS_FAILED_PRECONDITION,
       "HSA_STATUS_ERROR_NOT_INITIALIZED"},
      {HSA_STATUS_ERROR_INVALID_ARGUMENT, IREE_STATUS_INVALID_ARGUMENT,
       "HSA_STATUS_ERROR_INVALID_ARGUMENT"},
      {HSA_STATUS_ERROR, IREE_STATUS_UNKNOWN, "HSA_STATUS_ERROR"},
  };
  // Default GPU pools: [0] coarse, [1] fine. The coarse search queries pool 0
  // (calls 1-3); the fine search rejects pool 0 on its flags (calls 1-3),
  // then queries pool 1 (calls 4-6).
  for (int fine = 0; fine < 2; ++fine) {
    for (uint32_t nth = 1; nth <= (fine ? 6u : 3u); ++nth) {
      const hsa_amd_memory_pool_t failed_pool = pool_at(gpu, nth <= 3 ? 0 : 1);
      for (size_t s = 0; s < sizeof(statuses) / sizeof(statuses[0]); ++s) {
        char expected[256];
        snprintf(expected, sizeof(expected),
                 "[hsa_amd_agent_iterate_memory_pools] %s: "
                 "hsa_amd_memory_pool_get_info(%s) of memory pool 0x%llx",
                 statuses[s].name, kQueries[(nth - 1) % 3],
                 (unsigned long long)failed_pool.handle);
        for (int entry = 0; entry < 3; ++entry) {
          hsa_sim_trace_clear();
          hsa_sim_fail_nth_call("hsa_amd_memory_pool_get_info", nth,
                                statuses[s].hsa);
          hsa_amd_memory_pool_t pool = {0xDEAD};
          iree_status_t status = NULL;
          if (entry == 0) {
            status = iree_hal_amdgpu_find_global_memory_pool(
                &g_libhsa, gpu, fine ? FINE : COARSE, &pool);
          } else if (entry == 1) {
            status = fine ? iree_hal_amdgpu_find_fine_global_memory_pool(
                                &g_libhsa, gpu, &pool)
                          : iree_hal_amdgpu_find_coarse_global_memory_pool(
                                &g_libhsa, gpu, &pool);
          } else {
            bool found =
                fine ? iree_hal_amdgpu_try_find_fine_global_memory_pool(
                           &g_libhsa, gpu, &pool)
                     : iree_hal_amdgpu_try_find_coarse_global_memory_pool(
                           &g_libhsa, gpu, &pool);
            DROPIN_REQUIRE(!found);
          }
          if (entry != 2) CHECK_STATUS(status, statuses[s].iree, expected);
          DROPIN_REQUIRE(pool.handle == 0);
          // The failed query was the last one.
          DROPIN_REQUIRE(trace_count_of("hsa_amd_memory_pool_get_info") == nth);
          size_t last = trace_find("hsa_amd_memory_pool_get_info", nth);
          DROPIN_REQUIRE(last != SIZE_MAX &&
                hsa_sim_trace_get(last)->result == statuses[s].hsa);
        }
      }
    }
  }
  hsa_sim_clear_faults();
}
#endif  // VMEM_TEST_SIM

//===----------------------------------------------------------------------===//
// iree_hal_amdgpu_vmem_ringbuffer_t
//===----------------------------------------------------------------------===//

// IREE's vmem_test: initialize and deinitialize.
static void test_lifetime(void) {
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  memset(&rb, 0xCD, sizeof(rb));
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, gpu, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1024,
      &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  DROPIN_REQUIRE(rb.capacity >= 1024);
  DROPIN_REQUIRE(rb.alloc_handle.handle != 0);
  DROPIN_REQUIRE(rb.va_base_ptr != NULL);
  DROPIN_REQUIRE((uint8_t*)rb.ring_base_ptr == (uint8_t*)rb.va_base_ptr + rb.capacity);
#if VMEM_TEST_SIM
  DROPIN_REQUIRE(rb.capacity == 65536);  // rounded to the recommended granule
  hsa_sim_live_t live;
  hsa_sim_get_live(&live);
  DROPIN_REQUIRE(live.reservations == 1 && live.handles == 1 && live.mappings == 3);
#endif
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  // A zeroed ringbuffer deinitializes to nothing, even without a table.
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(NULL, &rb);
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, NULL);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
}

// IREE's vmem_test wrap case, both directions, on host-visible memory.
static void test_wrap(void) {
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, g_cpu_agent,
                                                        &pool));
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, g_cpu_agent, pool,
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST, 4096, &g_topology,
      IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  volatile uint8_t* ring = (volatile uint8_t*)rb.ring_base_ptr;
  const size_t cap = rb.capacity;
  for (size_t i = 0; i < cap; ++i) ring[i] = (uint8_t)(i * 7 + 1);
  // Forward: before the base and past the end alias the buffer.
  DROPIN_REQUIRE(ring[-1] == (uint8_t)((cap - 1) * 7 + 1));
  DROPIN_REQUIRE(ring[cap] == ring[0]);
  DROPIN_REQUIRE(*((volatile uint8_t*)rb.va_base_ptr) == ring[0]);
  DROPIN_REQUIRE(ring[2 * cap - 1] == ring[cap - 1]);
  // Backward: writes through the outer views land in the buffer.
  ring[-1] = 0xAB;
  DROPIN_REQUIRE(ring[cap - 1] == 0xAB);
  ring[cap] = 0xCD;
  DROPIN_REQUIRE(ring[0] == 0xCD);
  ring[-(ptrdiff_t)cap] = 0x5A;
  DROPIN_REQUIRE(ring[0] == 0x5A && ring[cap] == 0x5A);
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
}

#if VMEM_TEST_SIM
static const char* const kInitSequence[] = {
    "hsa_amd_memory_pool_get_info",       "hsa_amd_vmem_address_reserve_align",
    "hsa_amd_vmem_handle_create",         "hsa_amd_vmem_map",
    "hsa_amd_vmem_map",                   "hsa_amd_vmem_map",
    "hsa_amd_vmem_set_access",            "hsa_amd_vmem_set_access",
    "hsa_amd_vmem_set_access",
};
#define INIT_CALLS (sizeof(kInitSequence) / sizeof(kInitSequence[0]))

// Upstream's call sequence and arguments, and the exact descriptors of each
// access mode.
static void test_access_descriptors(void) {
  hsa_agent_t local = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, local, &pool));
  const iree_hal_amdgpu_vmem_access_mode_t modes[] = {
      IREE_HAL_AMDGPU_ACCESS_MODE_SHARED,
      IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE,
      IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER,
      IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER,
  };
  DROPIN_REQUIRE(g_topology.all_agent_count == 3);  // CPU + 2 GPUs
  for (size_t m = 0; m < 4; ++m) {
    hsa_amd_memory_access_desc_t expect[3];
    size_t expect_count = 0;
    for (size_t a = 0; a < g_topology.all_agent_count; ++a) {
      hsa_agent_t agent = g_topology.all_agents[a];
      bool is_local = agent.handle == local.handle;
      hsa_access_permission_t perm = HSA_ACCESS_PERMISSION_RW;
      switch (modes[m]) {
        case IREE_HAL_AMDGPU_ACCESS_MODE_SHARED:
          perm = HSA_ACCESS_PERMISSION_RW;
          break;
        case IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE:
          if (!is_local) continue;
          perm = HSA_ACCESS_PERMISSION_RW;
          break;
        case IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER:
          perm = is_local ? HSA_ACCESS_PERMISSION_RO : HSA_ACCESS_PERMISSION_WO;
          break;
        case IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER:
          perm = is_local ? HSA_ACCESS_PERMISSION_WO : HSA_ACCESS_PERMISSION_RO;
          break;
      }
      expect[expect_count].permissions = perm;
      expect[expect_count].agent_handle = agent;
      ++expect_count;
    }
    hsa_sim_trace_clear();
    iree_hal_amdgpu_vmem_ringbuffer_t rb;
    CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
        &g_libhsa, local, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1,
        &g_topology, modes[m], &rb));
    DROPIN_REQUIRE(hsa_sim_trace_count() == INIT_CALLS);
    for (size_t i = 0; i < INIT_CALLS; ++i) {
      const hsa_sim_trace_entry_t* e = hsa_sim_trace_get(i);
      DROPIN_REQUIRE(strcmp(e->function, kInitSequence[i]) == 0);
      DROPIN_REQUIRE(e->result == HSA_STATUS_SUCCESS);
    }
    const uint64_t va = (uint64_t)(uintptr_t)rb.va_base_ptr;
    const uint64_t cap = rb.capacity;
    const hsa_sim_trace_entry_t* e = hsa_sim_trace_get(0);
    DROPIN_REQUIRE(e->args[0] == pool.handle &&
          e->args[1] == HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE);
    e = hsa_sim_trace_get(1);  // reserve(&va, 3*cap, address 0, align, 0)
    DROPIN_REQUIRE(e->args[1] == 3 * cap && e->args[2] == 0 && e->args[3] == 65536 &&
          e->args[4] == 0);
    e = hsa_sim_trace_get(2);  // handle_create(pool, cap, NONE, 0, &handle)
    DROPIN_REQUIRE(e->args[0] == pool.handle && e->args[1] == cap &&
          e->args[2] == MEMORY_TYPE_NONE && e->args[3] == 0);
    for (size_t v = 0; v < 3; ++v) {
      e = hsa_sim_trace_get(3 + v);  // map(va + v*cap, cap, 0, handle, 0)
      DROPIN_REQUIRE(e->args[0] == va + v * cap && e->args[1] == cap &&
            e->args[2] == 0 && e->args[3] == rb.alloc_handle.handle &&
            e->args[4] == 0);
      e = hsa_sim_trace_get(6 + v);  // set_access(va + v*cap, cap, descs, n)
      DROPIN_REQUIRE(e->args[0] == va + v * cap && e->args[1] == cap);
      DROPIN_REQUIRE(e->args[3] == expect_count && e->desc_count == expect_count);
      for (size_t d = 0; d < expect_count; ++d) {
        DROPIN_REQUIRE(e->descs[d].permissions == expect[d].permissions);
        DROPIN_REQUIRE(e->descs[d].agent_handle.handle == expect[d].agent_handle.handle);
      }
    }
    hsa_sim_trace_clear();
    iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
    // Release: the three views, the handle, the reservation.
    DROPIN_REQUIRE(hsa_sim_trace_count() == 5);
    for (size_t v = 0; v < 3; ++v) {
      e = hsa_sim_trace_get(v);
      DROPIN_REQUIRE(strcmp(e->function, "hsa_amd_vmem_unmap") == 0);
      DROPIN_REQUIRE(e->args[0] == va + v * cap && e->args[1] == cap);
    }
    DROPIN_REQUIRE(strcmp(hsa_sim_trace_get(3)->function,
                 "hsa_amd_vmem_handle_release") == 0);
    e = hsa_sim_trace_get(4);
    DROPIN_REQUIRE(strcmp(e->function, "hsa_amd_vmem_address_free") == 0);
    DROPIN_REQUIRE(e->args[0] == va && e->args[1] == 3 * cap);
  }
}

// Caller descriptors are passed through as given; the memory type maps onto
// HSA's.
static void test_explicit_descriptors_and_memory_type(void) {
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, g_cpu_agent,
                                                        &pool));
  hsa_amd_memory_access_desc_t descs[2] = {
      {HSA_ACCESS_PERMISSION_RW, g_cpu_agent},
      {HSA_ACCESS_PERMISSION_RO, g_gpu_agents[1]},
  };
  const iree_hal_amdgpu_vmem_memory_type_t types[2] = {
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST};
  const uint64_t hsa_types[2] = {MEMORY_TYPE_NONE, MEMORY_TYPE_PINNED};
  for (size_t t = 0; t < 2; ++t) {
    hsa_sim_trace_clear();
    iree_hal_amdgpu_vmem_ringbuffer_t rb;
    CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize(
        &g_libhsa, g_cpu_agent, pool, types[t], 100000, 2, descs, &rb));
    DROPIN_REQUIRE(rb.capacity == 131072);  // 100000 rounded up to 64 KiB
    size_t i = trace_find("hsa_amd_vmem_handle_create", 1);
    DROPIN_REQUIRE(i != SIZE_MAX && hsa_sim_trace_get(i)->args[2] == hsa_types[t]);
    for (size_t n = 1; n <= 3; ++n) {
      const hsa_sim_trace_entry_t* e =
          hsa_sim_trace_get(trace_find("hsa_amd_vmem_set_access", n));
      DROPIN_REQUIRE(e->desc_count == 2);
      DROPIN_REQUIRE(memcmp(e->descs, descs, sizeof(descs)) == 0);
    }
    iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  }
}

static const char* hsa_status_name(hsa_status_t status) {
  switch (status) {
    case HSA_STATUS_ERROR:
      return "HSA_STATUS_ERROR";
    case HSA_STATUS_ERROR_INVALID_ARGUMENT:
      return "HSA_STATUS_ERROR_INVALID_ARGUMENT";
    case HSA_STATUS_ERROR_OUT_OF_RESOURCES:
      return "HSA_STATUS_ERROR_OUT_OF_RESOURCES";
    case HSA_STATUS_ERROR_INVALID_ALLOCATION:
      return "HSA_STATUS_ERROR_INVALID_ALLOCATION";
    default:
      return "?";
  }
}

// Every HSA call of initialize fails in turn: the status carries the HSA
// code (and names the call), *out_ringbuffer is zeroed, nothing is left live,
// and the undo touches exactly what was done (every undo call succeeds).
static void test_fault_injection_initialize(void) {
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
  const struct {
    hsa_status_t hsa;
    iree_status_code_t iree;
  } statuses[] = {
      {HSA_STATUS_ERROR_OUT_OF_RESOURCES, IREE_STATUS_RESOURCE_EXHAUSTED},
      {HSA_STATUS_ERROR_INVALID_ARGUMENT, IREE_STATUS_INVALID_ARGUMENT},
      {HSA_STATUS_ERROR, IREE_STATUS_UNKNOWN},
      {HSA_STATUS_ERROR_INVALID_ALLOCATION, IREE_STATUS_INVALID_ARGUMENT},
  };
  for (size_t k = 0; k < INIT_CALLS; ++k) {
    const char* function = kInitSequence[k];
    uint32_t nth = 0;
    for (size_t j = 0; j <= k; ++j) nth += strcmp(kInitSequence[j], function) == 0;
    for (size_t s = 0; s < sizeof(statuses) / sizeof(statuses[0]); ++s) {
      hsa_sim_trace_clear();
      hsa_sim_fail_nth_call(function, nth, statuses[s].hsa);
      iree_hal_amdgpu_vmem_ringbuffer_t rb;
      memset(&rb, 0xEE, sizeof(rb));
      char expected_prefix[160];
      snprintf(expected_prefix, sizeof(expected_prefix), "[%s] %s", function,
               hsa_status_name(statuses[s].hsa));
      iree_status_t status =
          iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
              &g_libhsa, gpu, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
              1, &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb);
      if (VMEM_TEST_MESSAGES) {
        const char* message = vmem_test_status_message(status);
        DROPIN_REQUIRE(message && strncmp(message, expected_prefix,
                                 strlen(expected_prefix)) == 0);
      }
      CHECK_STATUS(status, statuses[s].iree, NULL);
      DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
      hsa_sim_live_t live;
      hsa_sim_get_live(&live);
      DROPIN_REQUIRE(live.reservations == 0 && live.handles == 0 && live.mappings == 0);
      // The calls up to the injected failure are upstream's sequence...
      for (size_t i = 0; i <= k; ++i) {
        DROPIN_REQUIRE(strcmp(hsa_sim_trace_get(i)->function, kInitSequence[i]) == 0);
        DROPIN_REQUIRE(hsa_sim_trace_get(i)->result ==
              (i == k ? statuses[s].hsa : HSA_STATUS_SUCCESS));
      }
      // ...then exactly the undo of what succeeded, all successful.
      size_t maps_done = k <= 3 ? 0 : (k - 3 < 3 ? k - 3 : 3);
      size_t handle_done = k > 2, reserve_done = k > 1;
      DROPIN_REQUIRE(hsa_sim_trace_count() ==
            k + 1 + maps_done + handle_done + reserve_done);
      for (size_t i = k + 1; i < hsa_sim_trace_count(); ++i) {
        DROPIN_REQUIRE(hsa_sim_trace_get(i)->result == HSA_STATUS_SUCCESS);
      }
      DROPIN_REQUIRE(trace_count_of("hsa_amd_vmem_unmap") == maps_done);
      DROPIN_REQUIRE(trace_count_of("hsa_amd_vmem_handle_release") == handle_done);
      DROPIN_REQUIRE(trace_count_of("hsa_amd_vmem_address_free") == reserve_done);
      hsa_sim_clear_faults();
    }
  }
  // Still works after all that.
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, gpu, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1,
      &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
}

// Deinitialize keeps releasing after an HSA error (as upstream).
static void test_deinitialize_continues_after_errors(void) {
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(
      &g_libhsa, g_gpu_agents[0], &pool));
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, g_gpu_agents[0], pool,
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1, &g_topology,
      IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE, &rb));
  hsa_sim_trace_clear();
  hsa_sim_fail_nth_call("hsa_amd_vmem_unmap", 2, HSA_STATUS_ERROR);
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  DROPIN_REQUIRE(hsa_sim_trace_count() == 5);
  DROPIN_REQUIRE(trace_count_of("hsa_amd_vmem_unmap") == 3);
  DROPIN_REQUIRE(trace_count_of("hsa_amd_vmem_handle_release") == 1);
  DROPIN_REQUIRE(trace_count_of("hsa_amd_vmem_address_free") == 1);
  // One view stayed mapped (the runtime refused); it goes at hsa_shut_down.
}

static void test_bad_granule(void) {
  const uint64_t granules[] = {0, 3, 3000, 65535};
  for (size_t g = 0; g < sizeof(granules) / sizeof(granules[0]); ++g) {
    hsa_sim_config_t config;
    hsa_sim_config_default(&config);
    config.gpu_pools[0].rec_granule = granules[g];
    DROPIN_REQUIRE(teardown(0));
    use_config(&config);
    DROPIN_REQUIRE(setup());
    hsa_amd_memory_pool_t pool = pool_at(g_gpu_agents[0], 0);
    hsa_sim_trace_clear();
    iree_hal_amdgpu_vmem_ringbuffer_t rb;
    memset(&rb, 0xEE, sizeof(rb));
    CHECK_STATUS(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
                     &g_libhsa, g_gpu_agents[0], pool,
                     IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 4096,
                     &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
                 IREE_STATUS_INVALID_ARGUMENT, "RUNTIME_ALLOC_REC_GRANULE");
    DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
    DROPIN_REQUIRE(hsa_sim_trace_count() == 1);  // only the granule query
  }
  // A smaller power-of-two granule rounds to itself.
  hsa_sim_config_t config;
  hsa_sim_config_default(&config);
  config.gpu_pools[0].rec_granule = 4096;
  DROPIN_REQUIRE(teardown(0));
  use_config(&config);
  DROPIN_REQUIRE(setup());
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, g_gpu_agents[0], pool_at(g_gpu_agents[0], 0),
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 5000, &g_topology,
      IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  DROPIN_REQUIRE(rb.capacity == 8192);
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
}

// Upstream's messages.
static void test_messages(void) {
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(
      &g_libhsa, g_gpu_agents[0], &pool));
  hsa_sim_fail_nth_call("hsa_amd_vmem_address_reserve_align", 1,
                        HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_STATUS(
      iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
          &g_libhsa, g_gpu_agents[0], pool,
          IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 70000, &g_topology,
          IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
      IREE_STATUS_RESOURCE_EXHAUSTED,
      "[hsa_amd_vmem_address_reserve_align] HSA_STATUS_ERROR_OUT_OF_RESOURCES: "
      "reserving ringbuffer capacity*3 (131072*3=393216)");
  hsa_sim_fail_nth_call("hsa_amd_vmem_map", 3,
                        HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(
      iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
          &g_libhsa, g_gpu_agents[0], pool,
          IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1, &g_topology,
          IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
      IREE_STATUS_RESOURCE_EXHAUSTED,
      "[hsa_amd_vmem_map] HSA_STATUS_ERROR_OUT_OF_RESOURCES: ");
}
#endif  // VMEM_TEST_SIM

//===----------------------------------------------------------------------===//
// Bad input
//===----------------------------------------------------------------------===//

// The ringbuffer initializers as the bad-input cases call them, on the `gpu`
// and `pool` of the calling test (test_bad_input and
// test_statuses_outlive_the_call).
#define INIT(libhsa, type, cap, count, descs, out)                        \
  iree_hal_amdgpu_vmem_ringbuffer_initialize((libhsa), gpu, pool, (type), \
                                             (cap), (count), (descs), (out))
#define INIT_TOPO(libhsa, type, topo, mode, out)                        \
  iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(             \
      (libhsa), gpu, pool, (type), 4096, (topo), (mode), (out))
#define DEFAULT_TYPE IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT

// An out pointer 4 bytes into `storage` (3 words): misaligned for a pool
// handle, inside memory the test owns.
static hsa_amd_memory_pool_t* misaligned_pool_out(uint64_t storage[3]) {
  return (hsa_amd_memory_pool_t*)(void*)((char*)storage + 4);
}

static void test_bad_input(void) {
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool = {0xDEAD};
  // NULL table / out pointer.
  CHECK_STATUS(iree_hal_amdgpu_find_coarse_global_memory_pool(NULL, gpu, &pool),
               IREE_STATUS_INVALID_ARGUMENT, "libhsa");
  DROPIN_REQUIRE(pool.handle == 0);  // zeroed first
  CHECK_STATUS(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, gpu, NULL),
               IREE_STATUS_INVALID_ARGUMENT, "out_pool");
  DROPIN_REQUIRE(!iree_hal_amdgpu_try_find_fine_global_memory_pool(NULL, gpu, &pool));
  DROPIN_REQUIRE(!iree_hal_amdgpu_try_find_coarse_global_memory_pool(&g_libhsa, gpu, NULL));
  // Misaligned out pointer: rejected, nothing written.
  uint64_t storage[3] = {0, 0, 0};
  hsa_amd_memory_pool_t* misaligned = misaligned_pool_out(storage);
  CHECK_STATUS(
      iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, misaligned),
      IREE_STATUS_INVALID_ARGUMENT, "misaligned");

  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  const hsa_amd_memory_access_desc_t desc = {HSA_ACCESS_PERMISSION_RW, gpu};
  CHECK_STATUS(INIT(&g_libhsa, DEFAULT_TYPE, 1, 1, &desc, NULL),
               IREE_STATUS_INVALID_ARGUMENT, "out_ringbuffer");
  memset(&rb, 0xEE, sizeof(rb));
  CHECK_STATUS(INIT(NULL, DEFAULT_TYPE, 1, 1, &desc, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "libhsa");
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  memset(&rb, 0xEE, sizeof(rb));
  CHECK_STATUS(INIT(&g_libhsa, DEFAULT_TYPE, 0, 1, &desc, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "min_capacity");
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  // Capacities whose 3x reservation overflows.
  const size_t huge[] = {SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 3 + 1,
                         (SIZE_MAX / 2) / 3 + 65536};
  for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); ++i) {
    memset(&rb, 0xEE, sizeof(rb));
    CHECK_STATUS(INIT(&g_libhsa, DEFAULT_TYPE, huge[i], 1, &desc, &rb),
                 IREE_STATUS_INVALID_ARGUMENT, "overflow");
    DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  }
  // Descriptors: none, or a count with no array.
  CHECK_STATUS(INIT(&g_libhsa, DEFAULT_TYPE, 1, 0, NULL, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "access descriptor");
  CHECK_STATUS(INIT(&g_libhsa, DEFAULT_TYPE, 1, 0, &desc, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "access descriptor");
  CHECK_STATUS(INIT(&g_libhsa, DEFAULT_TYPE, 1, 3, NULL, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "access_descs");
  CHECK_STATUS(INIT(&g_libhsa, DEFAULT_TYPE, 1, SIZE_MAX, &desc, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "access_desc_count");
  // Unknown enum values (a C caller can pass any int).
  uint32_t raw = 2;
  iree_hal_amdgpu_vmem_memory_type_t bad_type;
  memcpy(&bad_type, &raw, sizeof(raw));
  memset(&rb, 0xEE, sizeof(rb));
  CHECK_STATUS(INIT(&g_libhsa, bad_type, 1, 1, &desc, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "unsupported vmem memory type: 2");
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  raw = 0xFFFFFFFFu;
  memcpy(&bad_type, &raw, sizeof(raw));
  CHECK_STATUS(INIT(&g_libhsa, bad_type, 1, 1, &desc, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "unsupported vmem memory type: -1");

  const uint32_t bad_modes[] = {4, 0x7FFFFFFFu, 0xFFFFFFFFu};
  for (size_t i = 0; i < 3; ++i) {
    iree_hal_amdgpu_vmem_access_mode_t mode;
    memcpy(&mode, &bad_modes[i], sizeof(mode));
    memset(&rb, 0xEE, sizeof(rb));
    CHECK_STATUS(INIT_TOPO(&g_libhsa, DEFAULT_TYPE, &g_topology, mode, &rb),
                 IREE_STATUS_INVALID_ARGUMENT, "access mode");
    DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  }
  memset(&rb, 0xEE, sizeof(rb));
  CHECK_STATUS(INIT_TOPO(&g_libhsa, DEFAULT_TYPE, NULL,
                         IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "topology");
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  CHECK_STATUS(INIT_TOPO(NULL, DEFAULT_TYPE, &g_topology,
                         IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "libhsa");
  CHECK_STATUS(INIT_TOPO(&g_libhsa, DEFAULT_TYPE, &g_topology,
                         IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, NULL),
               IREE_STATUS_INVALID_ARGUMENT, "out_ringbuffer");
  // Topologies with more agents than their arrays hold.
  static iree_hal_amdgpu_topology_t bad;
  bad = g_topology;
  bad.all_agent_count = 129;
  CHECK_STATUS(INIT_TOPO(&g_libhsa, DEFAULT_TYPE, &bad,
                         IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "all_agent_count");
  bad = g_topology;
  bad.cpu_agent_count = 65;
  CHECK_STATUS(INIT_TOPO(&g_libhsa, DEFAULT_TYPE, &bad,
                         IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "cpu_agent_count");
  bad = g_topology;
  bad.gpu_agent_count = SIZE_MAX;
  CHECK_STATUS(INIT_TOPO(&g_libhsa, DEFAULT_TYPE, &bad,
                         IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "gpu_agent_count");
  // An empty topology in SHARED mode has no agent to grant access to.
  bad = g_topology;
  bad.all_agent_count = 0;
  CHECK_STATUS(INIT_TOPO(&g_libhsa, DEFAULT_TYPE, &bad,
                         IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
               IREE_STATUS_INVALID_ARGUMENT, "access descriptor");
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  // Deinitialize: NULLs and a corrupt struct are refused without a crash.
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(NULL, NULL);
  iree_hal_amdgpu_vmem_ringbuffer_t corrupt = {
      .capacity = SIZE_MAX / 2,
      .alloc_handle = {1},
      .va_base_ptr = (void*)(uintptr_t)0x10000,
      .ring_base_ptr = NULL,
  };
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &corrupt);
  DROPIN_REQUIRE(corrupt.alloc_handle.handle == 1);  // left as is
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(NULL, &corrupt);
  DROPIN_REQUIRE(corrupt.alloc_handle.handle == 1);
}

// A table whose `initialized` flag is false (IREE zeroes the struct when it
// deinitializes it) is refused with FAILED_PRECONDITION, not searched and
// misreported as an unsupported layout (INCOMPATIBLE).
static void test_uninitialized_table(void) {
  static iree_hal_amdgpu_libhsa_t table;
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
  const hsa_amd_memory_access_desc_t desc = {HSA_ACCESS_PERMISSION_RW, gpu};
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 0) {
      memset(&table, 0, sizeof(table));  // as after IREE's deinitialize
    } else {
      table = g_libhsa;  // every entry filled, but the flag says otherwise
      table.initialized = false;
    }
    hsa_amd_memory_pool_t found = {0xDEAD};
    CHECK_STATUS(
        iree_hal_amdgpu_find_coarse_global_memory_pool(&table, gpu, &found),
        IREE_STATUS_FAILED_PRECONDITION, "not initialized");
    DROPIN_REQUIRE(found.handle == 0);
    DROPIN_REQUIRE(!iree_hal_amdgpu_try_find_fine_global_memory_pool(&table, gpu, &found));
    iree_hal_amdgpu_vmem_ringbuffer_t rb;
    memset(&rb, 0xEE, sizeof(rb));
    CHECK_STATUS(iree_hal_amdgpu_vmem_ringbuffer_initialize(
                     &table, gpu, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
                     4096, 1, &desc, &rb),
                 IREE_STATUS_FAILED_PRECONDITION, "not initialized");
    DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
    CHECK_STATUS(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
                     &table, gpu, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
                     4096, &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
                 IREE_STATUS_FAILED_PRECONDITION, "not initialized");
    // A live ringbuffer is not released through it (and stays intact).
    CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize(
        &g_libhsa, gpu, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 4096, 1,
        &desc, &rb));
    const iree_hal_amdgpu_vmem_ringbuffer_t saved = rb;
    iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&table, &rb);
    DROPIN_REQUIRE(memcmp(&rb, &saved, sizeof(rb)) == 0);
    iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
    DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
  }
}

// Deinitialize releases ranges computed from `capacity`: a capacity that does
// not match the struct's pointers would unmap and free ranges outside this
// ringbuffer (possibly another allocation's), so the struct is refused and
// nothing is called.
static void test_deinitialize_mismatched_capacity(void) {
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, gpu, pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 4096,
      &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  const iree_hal_amdgpu_vmem_ringbuffer_t saved = rb;
  const size_t capacities[] = {saved.capacity * 2, saved.capacity / 2, 0};
  for (size_t i = 0; i < 3; ++i) {
    rb = saved;
    rb.capacity = capacities[i];
    const iree_hal_amdgpu_vmem_ringbuffer_t tampered = rb;
#if VMEM_TEST_SIM
    hsa_sim_trace_clear();
#endif
    iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
    DROPIN_REQUIRE(memcmp(&rb, &tampered, sizeof(rb)) == 0);  // left as is
#if VMEM_TEST_SIM
    DROPIN_REQUIRE(hsa_sim_trace_count() == 0);  // no HSA call at all
#endif
  }
  rb = saved;
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
}

//===----------------------------------------------------------------------===//
// The caller's HSA table
//===----------------------------------------------------------------------===//

// The table really has this IREE version's layout (the reserve function sits
// in the slot docs/iree.md#layouts-shared-with-iree gives), and the library works with it (every other case).
static void test_table_layout(void) {
#if !IREE_HAL_AMDGPU_LIBHSA_STATIC
  static const size_t kReserveSlot[] = {0, 32, 33, 34};
  void (**slot)(void) =
      iree_test_libhsa_slot(&g_libhsa, "hsa_amd_vmem_address_reserve_align");
  DROPIN_REQUIRE(slot != NULL);
  size_t offset = (size_t)((char*)slot - (char*)&g_libhsa);
  DROPIN_REQUIRE(offset == 16 + 8 * kReserveSlot[IREE_TEST_LIBHSA_LAYOUT]);
  DROPIN_REQUIRE(offsetof(iree_hal_amdgpu_libhsa_t, amd_loader) ==
        16 + 8 * IREE_TEST_LIBHSA_ENTRY_COUNT);
  DROPIN_REQUIRE((char*)iree_test_libhsa_slot(&g_libhsa, "hsa_amd_memory_pool_get_info") -
            (char*)&g_libhsa ==
        16 + 8 * 12);
#endif
}

#if !IREE_HAL_AMDGPU_LIBHSA_STATIC
static void not_an_hsa_function(void) {}

static void check_missing(const char* function, void (*replacement)(void)) {
  void (**slot)(void) = iree_test_libhsa_slot(&g_libhsa, function);
  DROPIN_REQUIRE(slot != NULL);
  void (*saved)(void) = *slot;
  *slot = replacement;
  hsa_amd_memory_pool_t pool = pool_at(g_gpu_agents[0], 0);
#if VMEM_TEST_SIM
  hsa_sim_trace_clear();
#endif
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  memset(&rb, 0xEE, sizeof(rb));
  CHECK_STATUS(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
                   &g_libhsa, g_gpu_agents[0], pool,
                   IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1, &g_topology,
                   IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
               IREE_STATUS_INCOMPATIBLE, function);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
#if VMEM_TEST_SIM
  DROPIN_REQUIRE(hsa_sim_trace_count() == 0);  // nothing was called
#endif
  *slot = saved;
  // Restored: the cache notices the change.
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, g_gpu_agents[0], pool,
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1, &g_topology,
      IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
}

// A needed function the table does not hold (NULL, another HSA function, or a
// pointer that is no exported symbol) is INCOMPATIBLE, named, and nothing is
// called.
static void test_missing_function(void) {
  void (*hsa_init_ptr)(void) = *iree_test_libhsa_slot(&g_libhsa, "hsa_init");
  static const char* const needed[] = {
      "hsa_amd_memory_pool_get_info",       "hsa_amd_vmem_address_reserve_align",
      "hsa_amd_vmem_address_free",          "hsa_amd_vmem_set_access",
      "hsa_amd_vmem_handle_create",         "hsa_amd_vmem_handle_release",
      "hsa_amd_vmem_map",                   "hsa_amd_vmem_unmap",
  };
  // Every IREE layout starts with hsa_init: a struct whose slot 0 is anything
  // else is not a dynamic-mode table (e.g. IREE's static-HSA struct), so
  // nothing past slot 0 is read or called even though the rest is intact.
  check_missing("hsa_init", NULL);
  check_missing("hsa_init", not_an_hsa_function);
  if (dropin_failures) return;
  for (size_t i = 0; i < sizeof(needed) / sizeof(needed[0]); ++i) {
    check_missing(needed[i], NULL);
    check_missing(needed[i], hsa_init_ptr);
    check_missing(needed[i], not_an_hsa_function);
    if (dropin_failures) return;
  }
  // Finding pools needs only the pool functions.
  void (**map)(void) = iree_test_libhsa_slot(&g_libhsa, "hsa_amd_vmem_map");
  void (*saved)(void) = *map;
  *map = NULL;
  hsa_amd_memory_pool_t pool;
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(
      &g_libhsa, g_gpu_agents[0], &pool));
  *map = saved;
  void (**iterate)(void) =
      iree_test_libhsa_slot(&g_libhsa, "hsa_amd_agent_iterate_memory_pools");
  saved = *iterate;
  *iterate = not_an_hsa_function;
  pool.handle = 0xDEAD;
  CHECK_STATUS(iree_hal_amdgpu_find_coarse_global_memory_pool(
                   &g_libhsa, g_gpu_agents[0], &pool),
               IREE_STATUS_INCOMPATIBLE, "hsa_amd_agent_iterate_memory_pools");
  DROPIN_REQUIRE(pool.handle == 0);
  DROPIN_REQUIRE(!iree_hal_amdgpu_try_find_fine_global_memory_pool(
      &g_libhsa, g_gpu_agents[0], &pool));
  *iterate = saved;
  // Deinitialize with a table lacking unmap: refused, struct kept; then done
  // with the full table.
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, g_gpu_agents[0], pool_at(g_gpu_agents[0], 0),
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1, &g_topology,
      IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  void (**unmap)(void) = iree_test_libhsa_slot(&g_libhsa, "hsa_amd_vmem_unmap");
  saved = *unmap;
  *unmap = hsa_init_ptr;
  iree_hal_amdgpu_vmem_ringbuffer_t copy = rb;
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  DROPIN_REQUIRE(memcmp(&copy, &rb, sizeof(rb)) == 0);
  *unmap = saved;
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
}

// A table longer than any IREE version's, with a needed function past the
// scan bound (slot 115): it is not found, so INCOMPATIBLE — the library never
// reads past the smallest real table.
static void test_scan_bound(void) {
  typedef struct big_table_t {
    bool initialized;
    void* library;
    void (*slots[300])(void);
  } big_table_t;
  static big_table_t table;
  memset(&table, 0, sizeof(table));
  table.initialized = true;
  memcpy(table.slots, (char*)&g_libhsa + 16, 8 * IREE_TEST_LIBHSA_ENTRY_COUNT);
  void (**unmap)(void) = iree_test_libhsa_slot(&g_libhsa, "hsa_amd_vmem_unmap");
  size_t unmap_index = (size_t)((char*)unmap - (char*)&g_libhsa - 16) / 8;
  table.slots[200] = table.slots[unmap_index];
  table.slots[unmap_index] = NULL;
  const iree_hal_amdgpu_libhsa_t* libhsa =
      (const iree_hal_amdgpu_libhsa_t*)(const void*)&table;
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  CHECK_STATUS(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
                   libhsa, g_gpu_agents[0], pool_at(g_gpu_agents[0], 0),
                   IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1, &g_topology,
                   IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
               IREE_STATUS_INCOMPATIBLE, "hsa_amd_vmem_unmap");
  // At slot 115 (the last slot read) it is found.
  table.slots[115] = table.slots[200];
  table.slots[200] = NULL;
  CHECK_OK(iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      libhsa, g_gpu_agents[0], pool_at(g_gpu_agents[0], 0),
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 1, &g_topology,
      IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb));
  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(libhsa, &rb);
  DROPIN_REQUIRE(is_zero(&rb, sizeof(rb)));
}
#endif  // !IREE_HAL_AMDGPU_LIBHSA_STATIC

//===----------------------------------------------------------------------===//
// Concurrency: one table used from several threads (identification cache)
//===----------------------------------------------------------------------===//

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < 50; ++i) {
    hsa_amd_memory_pool_t pool;
    iree_status_t status = iree_hal_amdgpu_find_coarse_global_memory_pool(
        &g_libhsa, g_gpu_agents[i % g_gpu_count], &pool);
    if (status) return status;
    iree_hal_amdgpu_vmem_ringbuffer_t rb;
    status = iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
        &g_libhsa, g_gpu_agents[i % g_gpu_count], pool,
        IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 4096, &g_topology,
        IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE, &rb);
    if (status) return status;
    iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &rb);
  }
  return NULL;
}

static void test_threads(void) {
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    DROPIN_REQUIRE(pthread_create(&threads[i], NULL, worker, NULL) == 0);
  }
  for (int i = 0; i < 4; ++i) {
    void* result = NULL;
    pthread_join(threads[i], &result);
    CHECK_OK((iree_status_t)result);
  }
}

//===----------------------------------------------------------------------===//
// Statuses outlive the call that made them
//===----------------------------------------------------------------------===//

// Error statuses kept until every call has returned, then formatted.
typedef struct kept_status_t {
  iree_status_t status;
  iree_status_code_t code;
  const char* substring;
  int line;
} kept_status_t;

static kept_status_t g_kept[160];
static size_t g_kept_count;

static void keep_status(iree_status_t status, iree_status_code_t code,
                        const char* substring, int line) {
  if (g_kept_count < sizeof(g_kept) / sizeof(g_kept[0])) {
    g_kept[g_kept_count++] = (kept_status_t){status, code, substring, line};
  } else {
    vmem_test_status_free(status);
    fprintf(stderr, "%s:%d: too many kept statuses\n", __FILE__, line);
    ++dropin_failures;
  }
}
#define KEEP(expr, code, substring) keep_status((expr), (code), (substring), __LINE__)

// Formats every kept status, as IREE's iree_status_format would much later:
// the message and file must still be there (a borrowed pointer into memory
// the library freed is a heap-use-after-free under ASan, garbage without).
static void format_kept_statuses(void) {
  // Reuse freed heap memory so that stale pointers read garbage even
  // without ASan.
  for (int round = 0; round < 64; ++round) {
    size_t size = 16u << (round % 8);
    char* junk = malloc(size);
    if (junk) {
      memset(junk, '#', size);
      free(junk);
    }
  }
  for (size_t i = 0; i < g_kept_count; ++i) {
    const kept_status_t* k = &g_kept[i];
    char text[1024];
    const char* file = NULL;
    uint32_t line = 0;
    bool has_storage =
        vmem_test_status_format(k->status, text, sizeof(text), &file, &line);
    if (iree_status_code(k->status) != k->code) {
      fprintf(stderr, "%s:%d: status code %d, expected %d\n", __FILE__,
              k->line, (int)iree_status_code(k->status), (int)k->code);
      ++dropin_failures;
    } else if (!VMEM_TEST_MESSAGES) {
      if ((uintptr_t)k->status != (uintptr_t)k->code) {
        fprintf(stderr, "%s:%d: status is not code-only\n", __FILE__, k->line);
        ++dropin_failures;
      }
    } else if (!has_storage) {
      fprintf(stderr, "%s:%d: status has no message\n", __FILE__, k->line);
      ++dropin_failures;
    } else {
      // File: one of the library's Rust sources; line: a real line.
      size_t n = file ? strlen(file) : 0;
      const char* message = strstr(text, "; ");
      if (n < 4 || strcmp(file + n - 3, ".rs") != 0 ||
          strncmp(file, "src/", 4) != 0 || line == 0) {
        fprintf(stderr, "%s:%d: bad source location in \"%s\"\n", __FILE__,
                k->line, text);
        ++dropin_failures;
      } else if (!message || strchr(message, '#') ||
                 (k->substring && !strstr(message, k->substring))) {
        fprintf(stderr, "%s:%d: formatted status \"%s\" lacks \"%s\"\n",
                __FILE__, k->line, text, k->substring ? k->substring : "");
        ++dropin_failures;
      }
    }
    vmem_test_status_free(k->status);
  }
  g_kept_count = 0;
}

// Every error status of every vmem function that returns one, kept past the
// call and formatted only after all of them returned.
static void test_statuses_outlive_the_call(void) {
  hsa_agent_t gpu = g_gpu_agents[0];
  hsa_amd_memory_pool_t pool = {0};
  CHECK_OK(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu, &pool));
  const hsa_amd_memory_access_desc_t desc = {HSA_ACCESS_PERMISSION_RW, gpu};
  const iree_hal_amdgpu_vmem_memory_type_t type =
      IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT;
  static iree_hal_amdgpu_libhsa_t zero_table;
  memset(&zero_table, 0, sizeof(zero_table));
  uint64_t storage[3] = {0, 0, 0};
  hsa_amd_memory_pool_t* misaligned = misaligned_pool_out(storage);
  hsa_amd_memory_pool_t out_pool;
  iree_hal_amdgpu_vmem_ringbuffer_t rb;

  // Pool lookup, all three entry points.
  KEEP(iree_hal_amdgpu_find_global_memory_pool(NULL, gpu, COARSE, &out_pool),
       IREE_STATUS_INVALID_ARGUMENT, "libhsa must not be NULL");
  KEEP(iree_hal_amdgpu_find_global_memory_pool(&g_libhsa, gpu, COARSE, NULL),
       IREE_STATUS_INVALID_ARGUMENT, "out_pool must not be NULL");
  KEEP(iree_hal_amdgpu_find_global_memory_pool(&g_libhsa, gpu, COARSE,
                                               misaligned),
       IREE_STATUS_INVALID_ARGUMENT, "misaligned");
  KEEP(iree_hal_amdgpu_find_global_memory_pool(&zero_table, gpu, COARSE,
                                               &out_pool),
       IREE_STATUS_FAILED_PRECONDITION, "not initialized");
  KEEP(iree_hal_amdgpu_find_global_memory_pool(&g_libhsa, gpu, 0, &out_pool),
       IREE_STATUS_NOT_FOUND, "no memory pool matching the required flags 0");
  KEEP(iree_hal_amdgpu_find_coarse_global_memory_pool(NULL, gpu, &out_pool),
       IREE_STATUS_INVALID_ARGUMENT, "libhsa");
  KEEP(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, gpu, NULL),
       IREE_STATUS_INVALID_ARGUMENT, "out_pool");
  KEEP(iree_hal_amdgpu_find_fine_global_memory_pool(&zero_table, gpu,
                                                    &out_pool),
       IREE_STATUS_FAILED_PRECONDITION, "not initialized");

  // Explicit descriptors.
  KEEP(INIT(&g_libhsa, type, 1, 1, &desc, NULL), IREE_STATUS_INVALID_ARGUMENT,
       "out_ringbuffer");
  KEEP(INIT(NULL, type, 1, 1, &desc, &rb), IREE_STATUS_INVALID_ARGUMENT,
       "libhsa");
  KEEP(INIT(&zero_table, type, 1, 1, &desc, &rb),
       IREE_STATUS_FAILED_PRECONDITION, "not initialized");
  KEEP(INIT(&g_libhsa, type, 0, 1, &desc, &rb), IREE_STATUS_INVALID_ARGUMENT,
       "min_capacity");
  KEEP(INIT(&g_libhsa, type, SIZE_MAX, 1, &desc, &rb),
       IREE_STATUS_INVALID_ARGUMENT, "overflow");
  KEEP(INIT(&g_libhsa, type, 1, 0, NULL, &rb), IREE_STATUS_INVALID_ARGUMENT,
       "access descriptor");
  KEEP(INIT(&g_libhsa, type, 1, 3, NULL, &rb), IREE_STATUS_INVALID_ARGUMENT,
       "access_descs");
  KEEP(INIT(&g_libhsa, type, 1, SIZE_MAX, &desc, &rb),
       IREE_STATUS_INVALID_ARGUMENT, "access_desc_count");
  uint32_t raw = 7;
  iree_hal_amdgpu_vmem_memory_type_t bad_type;
  memcpy(&bad_type, &raw, sizeof(raw));
  KEEP(INIT(&g_libhsa, bad_type, 1, 1, &desc, &rb),
       IREE_STATUS_INVALID_ARGUMENT, "unsupported vmem memory type: 7");

  // Topology-derived descriptors.
  iree_hal_amdgpu_vmem_access_mode_t bad_mode;
  raw = 4;
  memcpy(&bad_mode, &raw, sizeof(raw));
  KEEP(INIT_TOPO(&g_libhsa, type, &g_topology, bad_mode, &rb),
       IREE_STATUS_INVALID_ARGUMENT, "unhandled access mode");
  KEEP(INIT_TOPO(&g_libhsa, bad_type, &g_topology,
                 IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
       IREE_STATUS_INVALID_ARGUMENT, "unsupported vmem memory type: 7");
  KEEP(INIT_TOPO(&g_libhsa, type, NULL, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED,
                 &rb),
       IREE_STATUS_INVALID_ARGUMENT, "topology");
  KEEP(INIT_TOPO(NULL, type, &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED,
                 &rb),
       IREE_STATUS_INVALID_ARGUMENT, "libhsa");
  KEEP(INIT_TOPO(&zero_table, type, &g_topology,
                 IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
       IREE_STATUS_FAILED_PRECONDITION, "not initialized");
  KEEP(INIT_TOPO(&g_libhsa, type, &g_topology,
                 IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, NULL),
       IREE_STATUS_INVALID_ARGUMENT, "out_ringbuffer");
  static iree_hal_amdgpu_topology_t bad;
  bad = g_topology;
  bad.all_agent_count = 129;
  KEEP(INIT_TOPO(&g_libhsa, type, &bad, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED,
                 &rb),
       IREE_STATUS_INVALID_ARGUMENT, "all_agent_count");
  bad = g_topology;
  bad.all_agent_count = 0;
  KEEP(INIT_TOPO(&g_libhsa, type, &bad, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED,
                 &rb),
       IREE_STATUS_INVALID_ARGUMENT, "access descriptor");

#if !IREE_HAL_AMDGPU_LIBHSA_STATIC
  // A table missing a needed function.
  void (**map)(void) = iree_test_libhsa_slot(&g_libhsa, "hsa_amd_vmem_map");
  void (*saved_map)(void) = *map;
  *map = NULL;
  KEEP(INIT_TOPO(&g_libhsa, type, &g_topology,
                 IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
       IREE_STATUS_INCOMPATIBLE, "hsa_amd_vmem_map");
  *map = saved_map;
  void (**iterate)(void) =
      iree_test_libhsa_slot(&g_libhsa, "hsa_amd_agent_iterate_memory_pools");
  void (*saved_iterate)(void) = *iterate;
  *iterate = NULL;
  KEEP(iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, gpu, &out_pool),
       IREE_STATUS_INCOMPATIBLE, "hsa_amd_agent_iterate_memory_pools");
  *iterate = saved_iterate;
#endif

#if VMEM_TEST_SIM
  // Every HSA call failing: the pool iteration and each pool query...
  hsa_sim_fail_nth_call("hsa_amd_agent_iterate_memory_pools", 1,
                        HSA_STATUS_ERROR_INVALID_AGENT);
  KEEP(iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, gpu,
                                                      &out_pool),
       IREE_STATUS_INVALID_ARGUMENT,
       "[hsa_amd_agent_iterate_memory_pools] HSA_STATUS_ERROR_INVALID_AGENT");
  for (uint32_t nth = 1; nth <= 3; ++nth) {
    hsa_sim_fail_nth_call("hsa_amd_memory_pool_get_info", nth,
                          HSA_STATUS_ERROR_NOT_INITIALIZED);
    KEEP(iree_hal_amdgpu_find_global_memory_pool(&g_libhsa, gpu, COARSE,
                                                 &out_pool),
         IREE_STATUS_FAILED_PRECONDITION,
         "[hsa_amd_agent_iterate_memory_pools] "
         "HSA_STATUS_ERROR_NOT_INITIALIZED");
  }
  // ...and each call of initialize.
  for (size_t k = 0; k < INIT_CALLS; ++k) {
    const char* function = kInitSequence[k];
    uint32_t nth = 0;
    for (size_t j = 0; j <= k; ++j) nth += strcmp(kInitSequence[j], function) == 0;
    hsa_sim_fail_nth_call(function, nth, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    KEEP(INIT_TOPO(&g_libhsa, type, &g_topology,
                   IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
         IREE_STATUS_RESOURCE_EXHAUSTED, function);
    hsa_sim_clear_faults();
  }
  static const uint64_t bad_granules[] = {0, 3000};
  for (size_t g = 0; g < 2; ++g) {
    hsa_sim_config_t config;
    hsa_sim_config_default(&config);
    config.gpu_pools[0].rec_granule = bad_granules[g];
    // Rebuild the runtime; the kept statuses stay alive across it.
    hsa_sim_clear_faults();
    hsa_shut_down();
    use_config(&config);
    DROPIN_REQUIRE(setup());
    pool = pool_at(g_gpu_agents[0], 0);
    gpu = g_gpu_agents[0];
    KEEP(INIT_TOPO(&g_libhsa, type, &g_topology,
                   IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb),
         IREE_STATUS_INVALID_ARGUMENT, "RUNTIME_ALLOC_REC_GRANULE");
  }
#endif
  format_kept_statuses();
}

//===----------------------------------------------------------------------===//
// Runner
//===----------------------------------------------------------------------===//

static const test_case_t kTests[] = {
    {"find_pools", test_find_pools, 0},
    {"lifetime", test_lifetime, 0},
    {"wrap", test_wrap, 0},
    {"bad_input", test_bad_input, 0},
    {"uninitialized_table", test_uninitialized_table, 0},
    {"deinitialize_mismatched_capacity", test_deinitialize_mismatched_capacity,
     0},
    {"table_layout", test_table_layout, 0},
#if !IREE_HAL_AMDGPU_LIBHSA_STATIC
    {"missing_function", test_missing_function, 0},
    {"scan_bound", test_scan_bound, 0},
#endif
    {"threads", test_threads, 0},
#if VMEM_TEST_SIM
    {"pool_selection_rules", test_pool_selection_rules, NEEDS_SIM},
    {"not_found", test_not_found, NEEDS_SIM},
    {"find_faults", test_find_faults, NEEDS_SIM},
    {"find_query_faults", test_find_query_faults, NEEDS_SIM},
    {"access_descriptors", test_access_descriptors, NEEDS_SIM},
    {"explicit_descriptors_and_memory_type",
     test_explicit_descriptors_and_memory_type, NEEDS_SIM},
    {"fault_injection_initialize", test_fault_injection_initialize, NEEDS_SIM},
    {"deinitialize_continues_after_errors",
     test_deinitialize_continues_after_errors, NEEDS_SIM | ALLOW_LEFTOVERS},
    {"bad_granule", test_bad_granule, NEEDS_SIM},
    {"messages", test_messages, NEEDS_SIM},
#endif
    {"statuses_outlive_the_call", test_statuses_outlive_the_call, 0},
};

int main(int argc, char** argv) {
  const char* only = argc > 1 ? argv[1] : NULL;
  int ran = 0;
#if !VMEM_TEST_SIM
  // The system ROCr may predate the vmem API or find no GPU: say which, skip.
  int skip = system_hsa_vmem_skip_code("vmem_test");
  if (skip != 0) return skip;
#endif
  for (size_t i = 0; i < sizeof(kTests) / sizeof(kTests[0]); ++i) {
    if (only && strcmp(only, kTests[i].name) != 0) continue;
    if (!setup()) {
      fprintf(stderr, "[ FAIL ] %s: HSA setup failed\n", kTests[i].name);
      return 1;
    }
    if (g_gpu_count == 0) {
      printf("[ SKIP ] no GPU agent in this system: vmem tests need one\n");
      hsa_shut_down();
      return 77;
    }
    int before = dropin_failures;
    kTests[i].fn();
    if (!teardown(kTests[i].flags)) ++dropin_failures;
    printf("[ %s ] %s\n", dropin_failures == before ? " OK " : "FAIL",
           kTests[i].name);
    ++ran;
  }
  if (only && ran == 0) {
    fprintf(stderr, "no test case named %s\n", only);
    return 1;
  }
  return dropin_check_exit_code();
}
