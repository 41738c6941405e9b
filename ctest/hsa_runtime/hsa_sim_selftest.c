/*
 * Self-test of the software HSA runtime. Usage: hsa_sim_selftest <group>
 * (each group is a separate ctest test and a separate process, so the
 * runtime starts fresh).
 */
#include "dropin_check.h"
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hsa_sim.h"
#include "hsa_sim_functions.inc"

/* The views of one vmem handle alias the same bytes, which the compiler cannot
 * know: with constant offsets it may reorder a read through one view before a
 * write through another. A compiler barrier between them keeps program order. */
static inline void alias_barrier(void) { atomic_signal_fence(memory_order_seq_cst); }

DROPIN_CHECK_DEFINE_FAILURES;


#define CHECK_STATUS(expr, expected)                                                  \
  do {                                                                                \
    hsa_status_t s_ = (expr);                                                         \
    DROPIN_CHECK_MSG(s_ == (hsa_status_t)(expected), "%s returned 0x%x, expected 0x%x", \
                     #expr, (unsigned)s_, (unsigned)(expected));                      \
  } while (0)

#define KIB(x) ((size_t)(x) << 10)

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void check_live_zero(void) {
  hsa_sim_live_t live;
  hsa_sim_get_live(&live);
  DROPIN_CHECK(live.reservations == 0);
  DROPIN_CHECK(live.handles == 0);
  DROPIN_CHECK(live.mappings == 0);
  DROPIN_CHECK(live.signals == 0);
}

/* ---- Agent/pool helpers ----------------------------------------------------- */

typedef struct {
  hsa_agent_t agents[1 + HSA_SIM_MAX_GPUS];
  uint32_t count;
  uint32_t stop_at;         /* 0: never */
  hsa_status_t stop_status; /* returned at stop_at */
} agent_list_t;

static hsa_status_t collect_agent(hsa_agent_t agent, void* data) {
  agent_list_t* list = data;
  list->agents[list->count++] = agent;
  if (list->stop_at != 0 && list->count == list->stop_at) return list->stop_status;
  return HSA_STATUS_SUCCESS;
}

static agent_list_t get_agents(void) {
  agent_list_t list;
  memset(&list, 0, sizeof(list));
  CHECK_STATUS(hsa_iterate_agents(collect_agent, &list), HSA_STATUS_SUCCESS);
  return list;
}

typedef struct {
  hsa_amd_memory_pool_t pools[HSA_SIM_MAX_POOLS_PER_AGENT];
  uint32_t count;
  uint32_t stop_at;
  hsa_status_t stop_status;
} pool_list_t;

static hsa_status_t collect_pool(hsa_amd_memory_pool_t pool, void* data) {
  pool_list_t* list = data;
  list->pools[list->count++] = pool;
  if (list->stop_at != 0 && list->count == list->stop_at) return list->stop_status;
  return HSA_STATUS_SUCCESS;
}

static pool_list_t get_pools(hsa_agent_t agent) {
  pool_list_t list;
  memset(&list, 0, sizeof(list));
  CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(agent, collect_pool, &list),
               HSA_STATUS_SUCCESS);
  return list;
}

/* ---- init ----------------------------------------------------------------------- */

static hsa_status_t count_only(hsa_agent_t agent, void* data) {
  (void)agent;
  ++*(int*)data;
  return HSA_STATUS_SUCCESS;
}

static void test_init(void) {
  int n = 0;
  void* va = NULL;
  hsa_signal_t sig;
  uint64_t freq = 0;
  hsa_amd_memory_pool_t bogus_pool = {1};
  hsa_amd_vmem_alloc_handle_t bogus_handle = {1};
  CHECK_STATUS(hsa_iterate_agents(count_only, &n), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &freq),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, KIB(64), 0, 0, 0),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_amd_vmem_handle_create(bogus_pool, KIB(64), MEMORY_TYPE_NONE, 0,
                                          &bogus_handle),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_signal_create(0, 0, NULL, &sig), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
  const char* text = NULL;
  CHECK_STATUS(hsa_status_string(HSA_STATUS_ERROR_OUT_OF_RESOURCES, &text),
               HSA_STATUS_SUCCESS);
  DROPIN_CHECK(text != NULL && strncmp(text, "HSA_STATUS_ERROR_OUT_OF_RESOURCES", 33) == 0);
  CHECK_STATUS(hsa_status_string((hsa_status_t)0x7777, &text),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_status_string(HSA_STATUS_SUCCESS, NULL),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);

  /* Configuration validation. */
  hsa_sim_config_t cfg;
  hsa_sim_config_default(&cfg);
  CHECK_STATUS(hsa_sim_configure(NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  cfg.gpu_count = HSA_SIM_MAX_GPUS + 1;
  CHECK_STATUS(hsa_sim_configure(&cfg), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_sim_config_default(&cfg);
  cfg.cpu_pool_count = HSA_SIM_MAX_POOLS_PER_AGENT + 1;
  CHECK_STATUS(hsa_sim_configure(&cfg), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_sim_config_default(&cfg);
  cfg.gpu_count = 1;
  CHECK_STATUS(hsa_sim_configure(&cfg), HSA_STATUS_SUCCESS);

  /* Reference counting. */
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_sim_configure(&cfg), HSA_STATUS_ERROR_INVALID_RUNTIME_STATE);
  n = 0;
  CHECK_STATUS(hsa_iterate_agents(count_only, &n), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(n == 2);
  CHECK_STATUS(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &freq),
               HSA_STATUS_SUCCESS);
  DROPIN_CHECK(freq == 1000000000ull);
  uint64_t t1 = 0, t2 = 0;
  CHECK_STATUS(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t1), HSA_STATUS_SUCCESS);
  sleep_ms(2);
  CHECK_STATUS(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, &t2), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(t2 >= t1 + 2000000ull);
  uint16_t major = 0;
  CHECK_STATUS(hsa_system_get_info(HSA_SYSTEM_INFO_VERSION_MAJOR, &major),
               HSA_STATUS_SUCCESS);
  DROPIN_CHECK(major == 1);
  CHECK_STATUS(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP, NULL),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_system_get_info((hsa_system_info_t)0x7777, &t1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
  /* Still initialized once. */
  n = 0;
  CHECK_STATUS(hsa_iterate_agents(count_only, &n), HSA_STATUS_SUCCESS);

  /* The last shutdown releases leftovers and reports them. */
  CHECK_STATUS(hsa_signal_create(5, 0, NULL, &sig), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, KIB(64), 0, 0, 0),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
  hsa_sim_live_t leaked;
  hsa_sim_get_leaked_at_shutdown(&leaked);
  DROPIN_CHECK(leaked.signals == 1 && leaked.reservations == 1 && leaked.handles == 0 &&
        leaked.mappings == 0);
  check_live_zero();
  DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 0); /* the handle died with the runtime */
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_iterate_agents(count_only, &n), HSA_STATUS_ERROR_NOT_INITIALIZED);

  /* Re-initialization works and builds the system from the configuration. */
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  n = 0;
  CHECK_STATUS(hsa_iterate_agents(count_only, &n), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(n == 2);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
  hsa_sim_get_leaked_at_shutdown(&leaked);
  DROPIN_CHECK(leaked.signals == 0 && leaked.reservations == 0);
}

/* ---- agents --------------------------------------------------------------------- */

static void test_agents(void) {
  /* The environment variable feeds the defaults. */
  setenv("HSA_SIM_GPU_COUNT", "5", 1);
  hsa_sim_config_t cfg;
  hsa_sim_config_default(&cfg);
  DROPIN_CHECK(cfg.gpu_count == 5);
  setenv("HSA_SIM_GPU_COUNT", "junk", 1);
  hsa_sim_config_default(&cfg);
  DROPIN_CHECK(cfg.gpu_count == 2);
  setenv("HSA_SIM_GPU_COUNT", "4", 1);

  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  agent_list_t list = get_agents();
  DROPIN_CHECK(list.count == 5);
  for (uint32_t i = 0; i < list.count; ++i) {
    hsa_device_type_t type = HSA_DEVICE_TYPE_DSP;
    CHECK_STATUS(hsa_agent_get_info(list.agents[i], HSA_AGENT_INFO_DEVICE, &type),
                 HSA_STATUS_SUCCESS);
    DROPIN_CHECK(type == (i == 0 ? HSA_DEVICE_TYPE_CPU : HSA_DEVICE_TYPE_GPU));
    char name[64];
    memset(name, 'x', sizeof(name));
    CHECK_STATUS(hsa_agent_get_info(list.agents[i], HSA_AGENT_INFO_NAME, name),
                 HSA_STATUS_SUCCESS);
    DROPIN_CHECK(memchr(name, '\0', sizeof(name)) != NULL && strlen(name) > 0);
    uint32_t node = 99;
    CHECK_STATUS(hsa_agent_get_info(list.agents[i], HSA_AGENT_INFO_NODE, &node),
                 HSA_STATUS_SUCCESS);
    DROPIN_CHECK(node == i);
    for (uint32_t j = 0; j < i; ++j) DROPIN_CHECK(list.agents[i].handle != list.agents[j].handle);
  }
  /* INFO_BREAK stops the iteration and is returned. */
  agent_list_t partial;
  memset(&partial, 0, sizeof(partial));
  partial.stop_at = 2;
  partial.stop_status = HSA_STATUS_INFO_BREAK;
  CHECK_STATUS(hsa_iterate_agents(collect_agent, &partial), HSA_STATUS_INFO_BREAK);
  DROPIN_CHECK(partial.count == 2);
  /* So does an error. */
  memset(&partial, 0, sizeof(partial));
  partial.stop_at = 3;
  partial.stop_status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  CHECK_STATUS(hsa_iterate_agents(collect_agent, &partial),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  DROPIN_CHECK(partial.count == 3);
  CHECK_STATUS(hsa_iterate_agents(NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  hsa_device_type_t type;
  hsa_agent_t bad = {0};
  CHECK_STATUS(hsa_agent_get_info(bad, HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  bad.handle = list.agents[4].handle + 1; /* one past the last agent */
  CHECK_STATUS(hsa_agent_get_info(bad, HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  bad.handle = 0x1234;
  CHECK_STATUS(hsa_agent_get_info(bad, HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(hsa_agent_get_info(list.agents[0], HSA_AGENT_INFO_DEVICE, NULL),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_agent_get_info(list.agents[0], (hsa_agent_info_t)0x7777, &type),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
  /* Handles are invalid once the runtime is down. */
  CHECK_STATUS(hsa_agent_get_info(list.agents[0], HSA_AGENT_INFO_DEVICE, &type),
               HSA_STATUS_ERROR_NOT_INITIALIZED);
}

/* ---- pools ---------------------------------------------------------------------- */

/* Reads an attribute into a 0xAA-filled buffer; returns how many leading bytes
 * were written (the rest must stay 0xAA). */
static size_t pool_info_width(hsa_amd_memory_pool_t pool,
                              hsa_amd_memory_pool_info_t attr, uint64_t* out) {
  unsigned char buf[16];
  memset(buf, 0xAA, sizeof(buf));
  CHECK_STATUS(hsa_amd_memory_pool_get_info(pool, attr, buf), HSA_STATUS_SUCCESS);
  size_t width = 0;
  for (size_t i = 0; i < sizeof(buf); ++i) {
    if (buf[i] != 0xAA) width = i + 1;
  }
  *out = 0;
  memcpy(out, buf, width <= 8 ? width : 8);
  return width;
}

static void test_pools(void) {
  hsa_sim_config_t cfg;
  hsa_sim_config_default(&cfg);
  cfg.gpu_count = 1;
  /* Bad-input values are reported verbatim. */
  cfg.gpu_pools[2].rec_granule = 3000;
  cfg.gpu_pools[1].alloc_granule = 0;
  CHECK_STATUS(hsa_sim_configure(&cfg), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  agent_list_t agents = get_agents();
  DROPIN_CHECK(agents.count == 2);
  for (uint32_t a = 0; a < agents.count; ++a) {
    pool_list_t pools = get_pools(agents.agents[a]);
    const hsa_sim_pool_desc_t* descs = a == 0 ? cfg.cpu_pools : cfg.gpu_pools;
    DROPIN_CHECK(pools.count == (a == 0 ? cfg.cpu_pool_count : cfg.gpu_pool_count));
    for (uint32_t p = 0; p < pools.count; ++p) {
      uint64_t v;
      /* Sizes as in ROCr: enums/flags 4 bytes, sizes 8, bool 1 (the value
       * may have leading zero bytes, so compare "at most"). */
      DROPIN_CHECK(pool_info_width(pools.pools[p], HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &v) <= 4);
      DROPIN_CHECK(v == descs[p].segment);
      DROPIN_CHECK(pool_info_width(pools.pools[p], HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &v) <= 4);
      DROPIN_CHECK(v == descs[p].global_flags);
      DROPIN_CHECK(pool_info_width(pools.pools[p], HSA_AMD_MEMORY_POOL_INFO_SIZE, &v) <= 8);
      DROPIN_CHECK(v == descs[p].size);
      DROPIN_CHECK(pool_info_width(pools.pools[p], HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &v) == 1);
      DROPIN_CHECK(v == (descs[p].alloc_allowed ? 1u : 0u));
      DROPIN_CHECK(pool_info_width(pools.pools[p], HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE, &v) <= 8);
      DROPIN_CHECK(v == descs[p].alloc_granule);
      DROPIN_CHECK(pool_info_width(pools.pools[p], HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT, &v) <= 8);
      DROPIN_CHECK(v == descs[p].alignment);
      DROPIN_CHECK(pool_info_width(pools.pools[p], HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE, &v) <= 8);
      DROPIN_CHECK(v == descs[p].rec_granule);
    }
    if (a == 1) {
      /* Exact full-width writes: SIZE writes all 8 bytes of a size_t. */
      size_t size = 0;
      CHECK_STATUS(hsa_amd_memory_pool_get_info(pools.pools[0], HSA_AMD_MEMORY_POOL_INFO_SIZE, &size),
                   HSA_STATUS_SUCCESS);
      DROPIN_CHECK(size == cfg.gpu_pools[0].size);
      uint32_t segment = 99;
      CHECK_STATUS(hsa_amd_memory_pool_get_info(pools.pools[3], HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment),
                   HSA_STATUS_SUCCESS);
      DROPIN_CHECK(segment == HSA_AMD_SEGMENT_GROUP);
      hsa_amd_memory_pool_access_t access = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
      CHECK_STATUS(hsa_amd_agent_memory_pool_get_info(agents.agents[1], pools.pools[0],
                                                      HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access),
                   HSA_STATUS_SUCCESS);
      DROPIN_CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT);
      CHECK_STATUS(hsa_amd_agent_memory_pool_get_info(agents.agents[0], pools.pools[0],
                                                      HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS, &access),
                   HSA_STATUS_SUCCESS);
      DROPIN_CHECK(access == HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED);

      /* Iteration: INFO_BREAK and errors stop it and are returned. */
      pool_list_t partial;
      memset(&partial, 0, sizeof(partial));
      partial.stop_at = 2;
      partial.stop_status = HSA_STATUS_INFO_BREAK;
      CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(agents.agents[1], collect_pool, &partial),
                   HSA_STATUS_INFO_BREAK);
      DROPIN_CHECK(partial.count == 2);
      memset(&partial, 0, sizeof(partial));
      partial.stop_at = 1;
      partial.stop_status = HSA_STATUS_ERROR_INVALID_ALLOCATION;
      CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(agents.agents[1], collect_pool, &partial),
                   HSA_STATUS_ERROR_INVALID_ALLOCATION);
      DROPIN_CHECK(partial.count == 1);

      /* Bad arguments. */
      CHECK_STATUS(hsa_amd_memory_pool_get_info(pools.pools[0], (hsa_amd_memory_pool_info_t)3, &size),
                   HSA_STATUS_ERROR_INVALID_ARGUMENT);
      CHECK_STATUS(hsa_amd_memory_pool_get_info(pools.pools[0], (hsa_amd_memory_pool_info_t)0x7777, &size),
                   HSA_STATUS_ERROR_INVALID_ARGUMENT);
      CHECK_STATUS(hsa_amd_memory_pool_get_info(pools.pools[0], HSA_AMD_MEMORY_POOL_INFO_SIZE, NULL),
                   HSA_STATUS_ERROR_INVALID_ARGUMENT);
      hsa_amd_memory_pool_t bad = pools.pools[3];
      bad.handle += 1; /* one past the last pool */
      CHECK_STATUS(hsa_amd_memory_pool_get_info(bad, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size),
                   HSA_STATUS_ERROR_INVALID_ARGUMENT);
      bad.handle = 0;
      CHECK_STATUS(hsa_amd_memory_pool_get_info(bad, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size),
                   HSA_STATUS_ERROR_INVALID_ARGUMENT);
      hsa_agent_t bad_agent = {42};
      CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(bad_agent, collect_pool, &partial),
                   HSA_STATUS_ERROR_INVALID_AGENT);
      CHECK_STATUS(hsa_amd_agent_iterate_memory_pools(agents.agents[1], NULL, NULL),
                   HSA_STATUS_ERROR_INVALID_ARGUMENT);
    }
  }
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- vmem ----------------------------------------------------------------------- */

typedef struct {
  hsa_agent_t cpu, gpu;
  hsa_amd_memory_pool_t cpu_fine, cpu_coarse, gpu_coarse, gpu_fine, gpu_group;
} sys_t;

static sys_t sys_get(void) {
  sys_t s;
  agent_list_t agents = get_agents();
  s.cpu = agents.agents[0];
  s.gpu = agents.agents[1];
  pool_list_t cp = get_pools(s.cpu);
  pool_list_t gp = get_pools(s.gpu);
  s.cpu_fine = cp.pools[0];
  s.cpu_coarse = cp.pools[1];
  s.gpu_coarse = gp.pools[0];
  s.gpu_fine = gp.pools[1];
  s.gpu_group = gp.pools[3];
  return s;
}

static void test_vmem(void) {
  hsa_sim_config_t cfg;
  hsa_sim_config_default(&cfg);
  cfg.gpu_count = 1;
  cfg.gpu_pools[1].alloc_granule = KIB(8); /* fine pool: 8 KiB granule */
  CHECK_STATUS(hsa_sim_configure(&cfg), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  sys_t s = sys_get();
  const size_t cap = KIB(64);

  /* Reservation arguments. */
  void* va = NULL;
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(NULL, cap, 0, 0, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, 0, 0, 0, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, 100, 0, 0, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, cap, 0, KIB(3), 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, cap, 0, 0, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(va == NULL);
  void* big = NULL;
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&big, cap, 0, (uint64_t)2 << 20, 0),
               HSA_STATUS_SUCCESS);
  DROPIN_CHECK(((uintptr_t)big & ((2u << 20) - 1)) == 0);
  CHECK_STATUS(hsa_amd_vmem_address_free(big, cap + KIB(4)), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_address_free((char*)big + KIB(4), cap - KIB(4)),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_address_free(big, cap), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_address_free(big, cap), HSA_STATUS_ERROR_INVALID_ARGUMENT);

  /* Handle arguments. */
  hsa_amd_vmem_alloc_handle_t h = {0};
  const hsa_amd_vmem_alloc_handle_t sentinel = {0x5e5e};
  h = sentinel;
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, 0, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_fine, KIB(4), MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT); /* not a multiple of 8 KiB */
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, KIB(4) + 1, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_PINNED, 0, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT); /* pinned needs a CPU pool */
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, (hsa_amd_memory_type_t)7, 0, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_NONE, 1, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_group, cap, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_amd_memory_pool_t bad_pool = {77};
  CHECK_STATUS(hsa_amd_vmem_handle_create(bad_pool, cap, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_NONE, 0, NULL),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, (size_t)1 << 62, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES); /* larger than the pool */
  DROPIN_CHECK(h.handle == sentinel.handle);
  hsa_amd_vmem_alloc_handle_t pinned;
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.cpu_fine, cap, MEMORY_TYPE_PINNED, 0, &pinned),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_handle_release(pinned), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_handle_release(pinned), HSA_STATUS_ERROR_INVALID_ALLOCATION);

  /* A ring: reserve 3 x cap, map one handle three times. */
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, 3 * cap, 0, cap, 0), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(((uintptr_t)va % cap) == 0);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_SUCCESS);
  char* base = va;
  for (int i = 0; i < 3; ++i) {
    CHECK_STATUS(hsa_amd_vmem_map(base + (size_t)i * cap, cap, 0, h, 0), HSA_STATUS_SUCCESS);
  }
  /* Map errors. */
  hsa_amd_vmem_alloc_handle_t h2;
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, 2 * cap, MEMORY_TYPE_NONE, 0, &h2),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_map(base, cap, 0, h2, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT); /* overlap */
  CHECK_STATUS(hsa_amd_vmem_map(base + KIB(4), KIB(4), 0, h2, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_map(base + 2 * cap, 2 * cap, 0, h2, 0),
               HSA_STATUS_ERROR_INVALID_ARGUMENT); /* runs past the reservation */
  int on_stack = 0;
  CHECK_STATUS(hsa_amd_vmem_map(&on_stack, KIB(4), 0, h2, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_amd_vmem_alloc_handle_t bogus = {h2.handle + 1000};
  void* va2 = NULL;
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va2, 2 * cap, 0, 0, 0), HSA_STATUS_SUCCESS);
  char* base2 = va2;
  CHECK_STATUS(hsa_amd_vmem_map(base2, cap, 0, bogus, 0), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  CHECK_STATUS(hsa_amd_vmem_map(base2, cap, 2 * cap, h2, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_map(base2, 2 * cap, cap, h2, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_map(base2, cap, 100, h2, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_map(base2, cap, 0, h2, 2), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_map(base2 + 1, cap, 0, h2, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  /* Offset mapping: the second half of h2 at base2. */
  CHECK_STATUS(hsa_amd_vmem_map(base2, cap, cap, h2, 0), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_map(base2 + cap, cap, 0, h2, 0), HSA_STATUS_SUCCESS);

  hsa_sim_live_t live;
  hsa_sim_get_live(&live);
  DROPIN_CHECK(live.reservations == 2 && live.handles == 2 && live.mappings == 5);

  /* Access for the CPU on every view, then check aliasing. */
  hsa_amd_memory_access_desc_t desc[2] = {{HSA_ACCESS_PERMISSION_RW, s.cpu},
                                          {HSA_ACCESS_PERMISSION_RW, s.gpu}};
  for (int i = 0; i < 3; ++i) {
    CHECK_STATUS(hsa_amd_vmem_set_access(base + (size_t)i * cap, cap, desc, 2), HSA_STATUS_SUCCESS);
  }
  CHECK_STATUS(hsa_amd_vmem_set_access(base2, cap, desc, 1), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_set_access(base2 + cap, cap, desc, 1), HSA_STATUS_SUCCESS);
  for (size_t i = 0; i < cap; i += 64) base[i] = (char)(i / 64 + 1);
  alias_barrier();
  for (size_t i = 0; i < cap; i += 64) {
    DROPIN_CHECK(base[cap + i] == (char)(i / 64 + 1));
    DROPIN_CHECK(base[2 * cap + i] == (char)(i / 64 + 1));
  }
  /* A write across the end of the middle view lands at the start of the
   * ring, as seen through the first and the last view. */
  memcpy(base + 2 * cap - 8, "0123456789abcdef", 16);
  alias_barrier();
  DROPIN_CHECK(memcmp(base + cap - 8, "01234567", 8) == 0);
  DROPIN_CHECK(memcmp(base, "89abcdef", 8) == 0);
  DROPIN_CHECK(memcmp(base + cap, "89abcdef", 8) == 0);
  /* Offset mapping aliases the right half. */
  memcpy(base2 + cap, "lower", 6);
  memcpy(base2, "upper", 6);
  alias_barrier();
  DROPIN_CHECK(memcmp(base2, "upper", 6) == 0 && memcmp(base2 + cap, "lower", 6) == 0);

  /* Teardown ordering rules. */
  CHECK_STATUS(hsa_amd_vmem_handle_release(h), HSA_STATUS_ERROR_RESOURCE_FREE);
  CHECK_STATUS(hsa_amd_vmem_address_free(va, 3 * cap), HSA_STATUS_ERROR_RESOURCE_FREE);
  CHECK_STATUS(hsa_amd_vmem_unmap(base, 2 * cap), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_unmap(base + KIB(4), cap - KIB(4)), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_unmap(NULL, cap), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  for (int i = 0; i < 3; ++i) {
    CHECK_STATUS(hsa_amd_vmem_unmap(base + (size_t)i * cap, cap), HSA_STATUS_SUCCESS);
  }
  CHECK_STATUS(hsa_amd_vmem_unmap(base, cap), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_handle_release(h), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_address_free(va, 3 * cap), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_unmap(base2, cap), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_unmap(base2 + cap, cap), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_handle_release(h2), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_address_free(va2, 2 * cap), HSA_STATUS_SUCCESS);
  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
  hsa_sim_live_t leaked;
  hsa_sim_get_leaked_at_shutdown(&leaked);
  DROPIN_CHECK(leaked.reservations == 0 && leaked.handles == 0 && leaked.mappings == 0);
}

/* ---- access (enforced with mprotect; faults checked in a child) -------------- */

static void on_fault(int sig) {
  (void)sig;
  _exit(42);
}

enum { PROBE_READ, PROBE_WRITE };

/* Returns true when touching p faults (in a forked child). */
static bool faults(volatile char* p, int what) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    if (what == PROBE_READ) {
      char c = *p;
      (void)c;
    } else {
      *p = 1;
    }
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    DROPIN_CHECK(!"fork/waitpid failed");
    return false;
  }
  if (WIFSIGNALED(status)) return WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS;
  return WIFEXITED(status) && WEXITSTATUS(status) != 0;
}

static void test_access(void) {
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  sys_t s = sys_get();
  const size_t cap = KIB(64);
  void* va = NULL;
  hsa_amd_vmem_alloc_handle_t h;
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, 2 * cap, 0, 0, 0), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_SUCCESS);
  char* p = va;
  /* Reserved, not mapped: no access. */
  DROPIN_CHECK(faults(p, PROBE_READ));
  CHECK_STATUS(hsa_amd_vmem_map(p, cap, 0, h, 0), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_map(p + cap, cap, 0, h, 0), HSA_STATUS_SUCCESS);
  /* Mapped, no set_access yet: no access. */
  DROPIN_CHECK(faults(p, PROBE_WRITE));
  DROPIN_CHECK(faults(p, PROBE_READ));

  /* Bad set_access calls change nothing. */
  hsa_amd_memory_access_desc_t good_then_bad[2] = {{HSA_ACCESS_PERMISSION_RW, s.cpu},
                                                   {HSA_ACCESS_PERMISSION_RW, {0xdead}}};
  CHECK_STATUS(hsa_amd_vmem_set_access(p, cap, good_then_bad, 2), HSA_STATUS_ERROR_INVALID_AGENT);
  hsa_amd_memory_access_desc_t bad_perm[2] = {{HSA_ACCESS_PERMISSION_RW, s.cpu},
                                              {(hsa_access_permission_t)4, s.gpu}};
  CHECK_STATUS(hsa_amd_vmem_set_access(p, cap, bad_perm, 2), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_set_access(p, cap, NULL, 1), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_set_access(p, cap, good_then_bad, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_set_access(p, 2 * cap, good_then_bad, 1), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_set_access(p + KIB(4), KIB(4), good_then_bad, 1),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(faults(p, PROBE_WRITE));

  /* GPU-only access: the CPU still cannot touch it; the grant is recorded. */
  hsa_amd_memory_access_desc_t gpu_rw = {HSA_ACCESS_PERMISSION_RW, s.gpu};
  CHECK_STATUS(hsa_amd_vmem_set_access(p, cap, &gpu_rw, 1), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(faults(p, PROBE_READ));
  hsa_access_permission_t perm = HSA_ACCESS_PERMISSION_NONE;
  CHECK_STATUS(hsa_amd_vmem_get_access(p, &perm, s.gpu), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(perm == HSA_ACCESS_PERMISSION_RW);
  CHECK_STATUS(hsa_amd_vmem_get_access(p, &perm, s.cpu), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(perm == HSA_ACCESS_PERMISSION_NONE);

  /* CPU read-only on the second view: reads work, writes fault. */
  hsa_amd_memory_access_desc_t cpu_ro = {HSA_ACCESS_PERMISSION_RO, s.cpu};
  CHECK_STATUS(hsa_amd_vmem_set_access(p + cap, cap, &cpu_ro, 1), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(!faults(p + cap, PROBE_READ));
  DROPIN_CHECK(faults(p + cap, PROBE_WRITE));
  /* CPU read-write on the first view: a write there is visible in the
   * read-only second view. */
  hsa_amd_memory_access_desc_t cpu_rw = {HSA_ACCESS_PERMISSION_RW, s.cpu};
  CHECK_STATUS(hsa_amd_vmem_set_access(p, cap, &cpu_rw, 1), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(!faults(p, PROBE_WRITE));
  p[100] = 'z';
  alias_barrier();
  DROPIN_CHECK(p[cap + 100] == 'z');
  /* WO is applied as read-write on the CPU (documented). */
  hsa_amd_memory_access_desc_t cpu_wo = {HSA_ACCESS_PERMISSION_WO, s.cpu};
  CHECK_STATUS(hsa_amd_vmem_set_access(p + cap, cap, &cpu_wo, 1), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(!faults(p + cap, PROBE_WRITE));
  /* NONE takes it away again. */
  hsa_amd_memory_access_desc_t cpu_none = {HSA_ACCESS_PERMISSION_NONE, s.cpu};
  CHECK_STATUS(hsa_amd_vmem_set_access(p, cap, &cpu_none, 1), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(faults(p, PROBE_READ));
  /* Unmapping restores the inaccessible reservation. */
  CHECK_STATUS(hsa_amd_vmem_unmap(p + cap, cap), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(faults(p + cap, PROBE_READ));
  CHECK_STATUS(hsa_amd_vmem_get_access(p + cap, &perm, s.cpu), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_vmem_unmap(p, cap), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_handle_release(h), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_address_free(va, 2 * cap), HSA_STATUS_SUCCESS);
  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- faults --------------------------------------------------------------------- */

static void test_faults(void) {
  /* An injected hsa_init failure leaves the runtime down. */
  hsa_sim_fail_nth_call("hsa_init", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(hsa_init(), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  int n = 0;
  CHECK_STATUS(hsa_iterate_agents(count_only, &n), HSA_STATUS_ERROR_NOT_INITIALIZED);
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_sim_call_count("hsa_init") == 2);
  sys_t s = sys_get();
  const size_t cap = KIB(64);

  void* va = NULL;
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, 3 * cap, 0, 0, 0), HSA_STATUS_SUCCESS);
  hsa_amd_vmem_alloc_handle_t h = {0x5e5e};
  hsa_sim_fail_nth_call("hsa_amd_vmem_handle_create", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  DROPIN_CHECK(h.handle == 0x5e5e); /* no output written */
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_SUCCESS);

  /* The 2nd next map fails without a side effect; the 1st and 3rd work. */
  uint64_t before = hsa_sim_call_count("hsa_amd_vmem_map");
  hsa_sim_fail_nth_call("hsa_amd_vmem_map", 2, HSA_STATUS_ERROR_INVALID_ALLOCATION);
  char* base = va;
  CHECK_STATUS(hsa_amd_vmem_map(base, cap, 0, h, 0), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_map(base + cap, cap, 0, h, 0), HSA_STATUS_ERROR_INVALID_ALLOCATION);
  hsa_sim_live_t live;
  hsa_sim_get_live(&live);
  DROPIN_CHECK(live.mappings == 1);
  CHECK_STATUS(hsa_amd_vmem_map(base + cap, cap, 0, h, 0), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_sim_call_count("hsa_amd_vmem_map") == before + 3);

  /* nth == 0 disarms; clear_faults disarms everything. */
  hsa_sim_fail_nth_call("hsa_amd_vmem_unmap", 1, HSA_STATUS_ERROR);
  hsa_sim_fail_nth_call("hsa_amd_vmem_unmap", 0, HSA_STATUS_ERROR);
  CHECK_STATUS(hsa_amd_vmem_unmap(base + cap, cap), HSA_STATUS_SUCCESS);
  hsa_sim_fail_nth_call("hsa_amd_vmem_unmap", 1, HSA_STATUS_ERROR);
  hsa_sim_fail_nth_call("hsa_amd_vmem_handle_release", 1, HSA_STATUS_ERROR);
  hsa_sim_clear_faults();
  CHECK_STATUS(hsa_amd_vmem_unmap(base, cap), HSA_STATUS_SUCCESS);

  /* Injection on release/free: the objects stay alive. */
  hsa_sim_fail_nth_call("hsa_amd_vmem_handle_release", 1, HSA_STATUS_ERROR_RESOURCE_FREE);
  CHECK_STATUS(hsa_amd_vmem_handle_release(h), HSA_STATUS_ERROR_RESOURCE_FREE);
  hsa_sim_fail_nth_call("hsa_amd_vmem_address_free", 1, HSA_STATUS_ERROR);
  CHECK_STATUS(hsa_amd_vmem_address_free(va, 3 * cap), HSA_STATUS_ERROR);
  hsa_sim_get_live(&live);
  DROPIN_CHECK(live.handles == 1 && live.reservations == 1);
  CHECK_STATUS(hsa_amd_vmem_handle_release(h), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_address_free(va, 3 * cap), HSA_STATUS_SUCCESS);

  /* Signals and info calls can fail too. */
  hsa_signal_t sig = {0};
  hsa_sim_fail_nth_call("hsa_amd_signal_create", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(hsa_amd_signal_create(0, 0, NULL, 0, &sig), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  DROPIN_CHECK(sig.handle == 0);
  hsa_sim_fail_nth_call("hsa_amd_memory_pool_get_info", 1, HSA_STATUS_ERROR_INVALID_ARGUMENT);
  size_t gran = 0;
  CHECK_STATUS(hsa_amd_memory_pool_get_info(s.gpu_coarse,
                                            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE, &gran),
               HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(gran == 0);
  CHECK_STATUS(hsa_amd_memory_pool_get_info(s.gpu_coarse,
                                            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE, &gran),
               HSA_STATUS_SUCCESS);
  DROPIN_CHECK(gran == KIB(64));

  /* Unknown names are ignored (with a message) and count nothing. */
  hsa_sim_fail_nth_call("hsa_no_such_function", 1, HSA_STATUS_ERROR);
  DROPIN_CHECK(hsa_sim_call_count("hsa_no_such_function") == 0);
  hsa_sim_reset_call_counts();
  DROPIN_CHECK(hsa_sim_call_count("hsa_amd_vmem_map") == 0);

  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- trace ---------------------------------------------------------------------- */

static void test_trace(void) {
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  sys_t s = sys_get();
  const size_t cap = KIB(64);
  void* va = NULL;
  hsa_amd_vmem_alloc_handle_t h;
  CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, cap, 0, cap, 0), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_sim_trace_count() == 0); /* off by default */
  hsa_sim_trace_enable(true);
  CHECK_STATUS(hsa_amd_vmem_handle_create(s.gpu_coarse, cap, MEMORY_TYPE_NONE, 0, &h),
               HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_map(va, cap, 0, h, 0), HSA_STATUS_SUCCESS);
  hsa_amd_memory_access_desc_t descs[3] = {{HSA_ACCESS_PERMISSION_RW, s.cpu},
                                           {HSA_ACCESS_PERMISSION_RO, s.gpu},
                                           {HSA_ACCESS_PERMISSION_WO, s.gpu}};
  CHECK_STATUS(hsa_amd_vmem_set_access(va, cap, descs, 3), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_set_access(va, cap, descs, 0), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_sim_trace_enable(false);
  CHECK_STATUS(hsa_amd_vmem_unmap(va, cap), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_sim_trace_count() == 4);
  const hsa_sim_trace_entry_t* e = hsa_sim_trace_get(0);
  DROPIN_CHECK(e != NULL && strcmp(e->function, "hsa_amd_vmem_handle_create") == 0);
  DROPIN_CHECK(e != NULL && e->args[0] == s.gpu_coarse.handle && e->args[1] == cap &&
        e->args[2] == MEMORY_TYPE_NONE && e->args[3] == 0 && e->result == HSA_STATUS_SUCCESS);
  e = hsa_sim_trace_get(1);
  DROPIN_CHECK(e != NULL && strcmp(e->function, "hsa_amd_vmem_map") == 0);
  DROPIN_CHECK(e != NULL && e->args[0] == (uint64_t)(uintptr_t)va && e->args[1] == cap &&
        e->args[2] == 0 && e->args[3] == h.handle && e->args[4] == 0);
  e = hsa_sim_trace_get(2);
  DROPIN_CHECK(e != NULL && strcmp(e->function, "hsa_amd_vmem_set_access") == 0);
  DROPIN_CHECK(e != NULL && e->desc_count == 3 && e->args[3] == 3);
  DROPIN_CHECK(e != NULL && e->descs[0].agent_handle.handle == s.cpu.handle &&
        e->descs[0].permissions == HSA_ACCESS_PERMISSION_RW &&
        e->descs[1].agent_handle.handle == s.gpu.handle &&
        e->descs[1].permissions == HSA_ACCESS_PERMISSION_RO &&
        e->descs[2].permissions == HSA_ACCESS_PERMISSION_WO);
  e = hsa_sim_trace_get(3);
  DROPIN_CHECK(e != NULL && e->result == HSA_STATUS_ERROR_INVALID_ARGUMENT && e->desc_count == 0);
  DROPIN_CHECK(hsa_sim_trace_get(4) == NULL);
  hsa_sim_trace_clear();
  DROPIN_CHECK(hsa_sim_trace_count() == 0 && hsa_sim_trace_get(0) == NULL);
  CHECK_STATUS(hsa_amd_vmem_handle_release(h), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_vmem_address_free(va, cap), HSA_STATUS_SUCCESS);
  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- stubs / exported names ------------------------------------------------------ */

typedef struct {
  const char* name;
  bool stub;
} fn_entry_t;

static const fn_entry_t g_all_functions[] = {
#define SELFTEST_IMPL_(name) {#name, false},
#define SELFTEST_STUB_(name) {#name, true},
    HSA_SIM_FUNCTIONS(SELFTEST_IMPL_, SELFTEST_STUB_)
#undef SELFTEST_IMPL_
#undef SELFTEST_STUB_
};
#define FN_COUNT (sizeof(g_all_functions) / sizeof(g_all_functions[0]))

static void test_stubs(void) {
  void* addrs[FN_COUNT];
  for (size_t i = 0; i < FN_COUNT; ++i) {
    const char* name = g_all_functions[i].name;
    void* p = dlsym(RTLD_DEFAULT, name);
    addrs[i] = p;
    if (p == NULL) {
      fprintf(stderr, "missing export: %s\n", name);
      ++dropin_failures;
      continue;
    }
    Dl_info info;
    DROPIN_CHECK(dladdr(p, &info) != 0 && info.dli_sname != NULL && strcmp(info.dli_sname, name) == 0);
    DROPIN_CHECK(info.dli_fname != NULL && strstr(info.dli_fname, "libhsa-runtime64.so.1") != NULL);
    for (size_t j = 0; j < i; ++j) {
      if (addrs[j] == p) {
        fprintf(stderr, "%s and %s share an address\n", name, g_all_functions[j].name);
        ++dropin_failures;
      }
    }
  }
  DROPIN_CHECK(FN_COUNT >= 118);
  /* Internal helpers are not exported. */
  DROPIN_CHECK(dlsym(RTLD_DEFAULT, "sim_enter") == NULL);
  DROPIN_CHECK(dlsym(RTLD_DEFAULT, "sim_lock") == NULL);
  /* Stubs return HSA_STATUS_ERROR, count, and can be made to fail otherwise. */
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  size_t stubs = 0;
  for (size_t i = 0; i < FN_COUNT; ++i) {
    if (!g_all_functions[i].stub || addrs[i] == NULL) continue;
    ++stubs;
    hsa_status_t (*fn)(void);
    memcpy(&fn, &addrs[i], sizeof(fn));
    CHECK_STATUS(fn(), HSA_STATUS_ERROR);
    DROPIN_CHECK(hsa_sim_call_count(g_all_functions[i].name) == 1);
  }
  DROPIN_CHECK(stubs > 30);
  hsa_sim_fail_nth_call("hsa_queue_create", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  hsa_status_t (*queue_create)(void);
  void* qc = dlsym(RTLD_DEFAULT, "hsa_queue_create");
  memcpy(&queue_create, &qc, sizeof(queue_create));
  CHECK_STATUS(queue_create(), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- signals -------------------------------------------------------------------- */

typedef void (*sig_void_fn)(hsa_signal_t, hsa_signal_value_t);
typedef hsa_signal_value_t (*sig_xchg_fn)(hsa_signal_t, hsa_signal_value_t);
typedef hsa_signal_value_t (*sig_cas_fn)(hsa_signal_t, hsa_signal_value_t, hsa_signal_value_t);

static void test_signals(void) {
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  sys_t s = sys_get();
  hsa_signal_t sig;
  CHECK_STATUS(hsa_signal_create(7, 0, NULL, &sig), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(sig.handle != 0);
  DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 7 && hsa_signal_load_scacquire(sig) == 7);
  /* Loads cost what ROCr's do: no count (asked, the count says so); the
   * other signal operations are counted. */
  DROPIN_CHECK(hsa_sim_call_count("hsa_signal_load_relaxed") == HSA_SIM_NOT_COUNTED);
  DROPIN_CHECK(hsa_sim_call_count("hsa_signal_load_scacquire") == HSA_SIM_NOT_COUNTED);
  uint64_t stores_before = hsa_sim_call_count("hsa_signal_store_relaxed");
  hsa_signal_store_relaxed(sig, 7);
  DROPIN_CHECK(hsa_sim_call_count("hsa_signal_store_relaxed") == stores_before + 1);

  sig_void_fn adds[] = {hsa_signal_add_scacq_screl, hsa_signal_add_scacquire,
                        hsa_signal_add_relaxed, hsa_signal_add_screlease};
  sig_void_fn subs[] = {hsa_signal_subtract_scacq_screl, hsa_signal_subtract_scacquire,
                        hsa_signal_subtract_relaxed, hsa_signal_subtract_screlease};
  sig_void_fn ands[] = {hsa_signal_and_scacq_screl, hsa_signal_and_scacquire,
                        hsa_signal_and_relaxed, hsa_signal_and_screlease};
  sig_void_fn ors[] = {hsa_signal_or_scacq_screl, hsa_signal_or_scacquire,
                       hsa_signal_or_relaxed, hsa_signal_or_screlease};
  sig_void_fn xors[] = {hsa_signal_xor_scacq_screl, hsa_signal_xor_scacquire,
                        hsa_signal_xor_relaxed, hsa_signal_xor_screlease};
  sig_void_fn stores[] = {hsa_signal_store_relaxed, hsa_signal_store_screlease,
                          hsa_signal_silent_store_relaxed, hsa_signal_silent_store_screlease};
  sig_xchg_fn xchgs[] = {hsa_signal_exchange_scacq_screl, hsa_signal_exchange_scacquire,
                         hsa_signal_exchange_relaxed, hsa_signal_exchange_screlease};
  sig_cas_fn cases[] = {hsa_signal_cas_scacq_screl, hsa_signal_cas_scacquire,
                        hsa_signal_cas_relaxed, hsa_signal_cas_screlease};
  for (int i = 0; i < 4; ++i) {
    stores[i](sig, 100);
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 100);
    adds[i](sig, 5);
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 105);
    subs[i](sig, 10);
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 95);
    ands[i](sig, 0x0F);
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == (95 & 0x0F));
    ors[i](sig, 0x100);
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == ((95 & 0x0F) | 0x100));
    xors[i](sig, 0x101);
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == (((95 & 0x0F) | 0x100) ^ 0x101));
    DROPIN_CHECK(xchgs[i](sig, -3) == (((95 & 0x0F) | 0x100) ^ 0x101));
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == -3);
    DROPIN_CHECK(cases[i](sig, 4, 9) == -3); /* fails: returns the observed value */
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == -3);
    DROPIN_CHECK(cases[i](sig, -3, 9) == -3); /* succeeds */
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 9);
  }
  /* Wrap-around arithmetic. */
  hsa_signal_store_relaxed(sig, INT64_MAX);
  hsa_signal_add_relaxed(sig, 1);
  DROPIN_CHECK(hsa_signal_load_relaxed(sig) == INT64_MIN);
  /* The raw value pointer. */
  int64_t* raw = hsa_sim_signal_value_ptr(sig);
  DROPIN_CHECK(raw != NULL);
  if (raw != NULL) {
    *raw = 1234;
    DROPIN_CHECK(hsa_signal_load_scacquire(sig) == 1234);
  }
  hsa_sim_live_t live;
  hsa_sim_get_live(&live);
  DROPIN_CHECK(live.signals == 1);
  CHECK_STATUS(hsa_signal_destroy(sig), HSA_STATUS_SUCCESS);
  /* Stale handle: detected, never dereferenced. */
  CHECK_STATUS(hsa_signal_destroy(sig), HSA_STATUS_ERROR_INVALID_SIGNAL);
  DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 0);
  hsa_signal_store_relaxed(sig, 5);
  hsa_signal_add_screlease(sig, 5);
  DROPIN_CHECK(hsa_signal_exchange_relaxed(sig, 1) == 0);
  DROPIN_CHECK(hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, 99, UINT64_MAX,
                                  HSA_WAIT_STATE_BLOCKED) == 0);
  DROPIN_CHECK(hsa_sim_signal_value_ptr(sig) == NULL);
  hsa_signal_t forged[] = {{0}, {1}, {0xFFFFFFFFFFFFFFFFull}, {((uint64_t)1 << 32) | 999999}};
  for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); ++i) {
    CHECK_STATUS(hsa_signal_destroy(forged[i]), HSA_STATUS_ERROR_INVALID_SIGNAL);
    DROPIN_CHECK(hsa_signal_load_scacquire(forged[i]) == 0);
  }
  /* A recycled slot gets a new handle; the old one stays dead. */
  hsa_signal_t again;
  CHECK_STATUS(hsa_signal_create(1, 0, NULL, &again), HSA_STATUS_SUCCESS);
  DROPIN_CHECK(again.handle != sig.handle);
  DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 0 && hsa_signal_load_relaxed(again) == 1);
  CHECK_STATUS(hsa_signal_destroy(again), HSA_STATUS_SUCCESS);

  /* Creation arguments. */
  CHECK_STATUS(hsa_signal_create(0, 0, NULL, NULL), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_signal_create(0, 1, NULL, &sig), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  hsa_agent_t consumers[2] = {s.cpu, {0xbad}};
  CHECK_STATUS(hsa_signal_create(0, 2, consumers, &sig), HSA_STATUS_ERROR_INVALID_AGENT);
  CHECK_STATUS(hsa_signal_create(0, 1, consumers, &sig), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_signal_destroy(sig), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_amd_signal_create(0, 0, NULL, 0x100, &sig), HSA_STATUS_ERROR_INVALID_ARGUMENT);
  CHECK_STATUS(hsa_amd_signal_create(3, 0, NULL, HSA_AMD_SIGNAL_AMD_GPU_ONLY, &sig),
               HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_signal_load_relaxed(sig) == 3);
  CHECK_STATUS(hsa_signal_destroy(sig), HSA_STATUS_SUCCESS);
  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);

  /* The configured limit on live signals. */
  hsa_sim_config_t cfg;
  hsa_sim_config_default(&cfg);
  cfg.max_signals = 8;
  CHECK_STATUS(hsa_sim_configure(&cfg), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  hsa_signal_t many[8];
  for (int i = 0; i < 8; ++i) CHECK_STATUS(hsa_signal_create(i, 0, NULL, &many[i]), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_signal_create(0, 0, NULL, &sig), HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  CHECK_STATUS(hsa_signal_destroy(many[3]), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_signal_create(0, 0, NULL, &many[3]), HSA_STATUS_SUCCESS);
  for (int i = 0; i < 8; ++i) CHECK_STATUS(hsa_signal_destroy(many[i]), HSA_STATUS_SUCCESS);
  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- waits ---------------------------------------------------------------------- */

typedef struct {
  hsa_signal_t sig;
  unsigned delay_ms;
  int64_t value;
  bool raw; /* plain memory write instead of a signal store */
  _Atomic uint64_t stored_at;
} setter_t;

static void* setter_main(void* arg) {
  setter_t* st = arg;
  sleep_ms(st->delay_ms);
  atomic_store(&st->stored_at, now_ns());
  if (st->raw) {
    /* A store that bypasses the runtime (no futex bump), as a device writes
     * the value; atomic (relaxed), since the waiter reads it concurrently. */
    _Atomic int64_t* p = (_Atomic int64_t*)(uintptr_t)hsa_sim_signal_value_ptr(st->sig);
    atomic_store_explicit(p, st->value, memory_order_relaxed);
  } else {
    hsa_signal_store_screlease(st->sig, st->value);
  }
  return NULL;
}

/* Waits (blocked, EQ value) while another thread sets the value after
 * delay_ms. Returns the wake latency in ns (return time - store time) and the
 * total wait in *total_ns. */
static uint64_t wait_for_setter(hsa_signal_t sig, unsigned delay_ms, int64_t value, bool raw,
                                uint64_t timeout_ns, hsa_wait_state_t state,
                                int64_t* out_value, uint64_t* total_ns) {
  setter_t st;
  st.sig = sig;
  st.delay_ms = delay_ms;
  st.value = value;
  st.raw = raw;
  atomic_init(&st.stored_at, 0);
  pthread_t t;
  uint64_t start = now_ns();
  pthread_create(&t, NULL, setter_main, &st);
  *out_value = hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, value, timeout_ns, state);
  uint64_t end = now_ns();
  pthread_join(t, NULL);
  *total_ns = end - start;
  uint64_t at = atomic_load(&st.stored_at);
  return end > at ? end - at : 0;
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* `rounds` blocked waits each woken by a store from another thread. Returns
 * the median wake latency (printed only: wall-clock figures are never
 * compared) and the wake delays the runtime applied meanwhile (count, and
 * their sum in *delay_us). */
static uint64_t wake_rounds(hsa_signal_t sig, int rounds, uint64_t* delays, uint64_t* delay_us) {
  uint64_t lat[64];
  uint64_t us0, delays0 = hsa_sim_wake_delays(&us0);
  for (int i = 0; i < rounds; ++i) {
    hsa_signal_store_relaxed(sig, 0);
    int64_t v;
    uint64_t total;
    uint64_t timeouts = hsa_sim_wait_timeouts();
    lat[i] = wait_for_setter(sig, 2, i + 1, false, 20000000000ull, HSA_WAIT_STATE_BLOCKED, &v, &total);
    DROPIN_CHECK(v == i + 1);
    /* Woken by the store, not by the timeout (a hang detector; re-checks are off). */
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts);
  }
  uint64_t us1, delays1 = hsa_sim_wake_delays(&us1);
  *delays = delays1 - delays0;
  *delay_us = us1 - us0;
  qsort(lat, (size_t)rounds, sizeof(lat[0]), cmp_u64);
  return lat[rounds / 2];
}

static void* long_blocked_wait(void* arg) {
  hsa_signal_t sig = *(hsa_signal_t*)arg;
  (void)hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_EQ, 1, 300000000ull, HSA_WAIT_STATE_BLOCKED);
  return NULL;
}

/* A 100 ms blocked wait made while another thread sleeps in a wait on the
 * same signal. Returns the sleeps the second wait began (the first is in one
 * long sleep meanwhile: re-checks are off) and its share of CPU time. */
static uint64_t second_waiter_sleeps(hsa_signal_t sig, double* cpu_share) {
  hsa_signal_store_relaxed(sig, 0);
  uint64_t before = hsa_sim_wait_sleeps();
  pthread_t first;
  if (pthread_create(&first, NULL, long_blocked_wait, &sig) != 0) return UINT64_MAX;
  uint64_t deadline = now_ns() + 10000000000ull; /* hang detector */
  while (hsa_sim_wait_sleeps() == before && now_ns() < deadline) sched_yield();
  uint64_t sleeps = hsa_sim_wait_sleeps();
  uint64_t c0 = thread_cpu_ns(), t0 = now_ns();
  DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_EQ, 1, 100000000ull,
                                HSA_WAIT_STATE_BLOCKED) == 0);
  *cpu_share = (double)(thread_cpu_ns() - c0) / (double)(now_ns() - t0);
  sleeps = hsa_sim_wait_sleeps() - sleeps;
  pthread_join(first, NULL);
  return sleeps;
}

static void test_waits(void) {
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  hsa_signal_t sig;
  CHECK_STATUS(hsa_signal_create(5, 0, NULL, &sig), HSA_STATUS_SUCCESS);
  hsa_wait_state_t states[2] = {HSA_WAIT_STATE_BLOCKED, HSA_WAIT_STATE_ACTIVE};

  /* Conditions already met return at once with the value. */
  for (int w = 0; w < 2; ++w) {
    DROPIN_CHECK(hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_EQ, 5, UINT64_MAX, states[w]) == 5);
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_NE, 4, UINT64_MAX, states[w]) == 5);
    DROPIN_CHECK(hsa_signal_wait_scacquire(sig, HSA_SIGNAL_CONDITION_LT, 6, UINT64_MAX, states[w]) == 5);
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_GTE, 5, UINT64_MAX, states[w]) == 5);
  }
  /* Unmet conditions time out after timeout_hint nanoseconds and return the
   * current value. */
  hsa_signal_condition_t conds[4] = {HSA_SIGNAL_CONDITION_EQ, HSA_SIGNAL_CONDITION_NE,
                                     HSA_SIGNAL_CONDITION_LT, HSA_SIGNAL_CONDITION_GTE};
  int64_t unmet[4] = {6, 5, 5, 6};
  for (int w = 0; w < 2; ++w) {
    for (int c = 0; c < 4; ++c) {
      uint64_t timeouts = hsa_sim_wait_timeouts();
      DROPIN_CHECK(hsa_signal_wait_scacquire(sig, conds[c], unmet[c], 20000000ull, states[w]) == 5);
      DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts + 1);
    }
  }
  {
    uint64_t timeouts = hsa_sim_wait_timeouts();
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_EQ, 6, 0, HSA_WAIT_STATE_BLOCKED) == 5);
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts + 1);
  }

  /* Cross-thread wake-ups for each condition and both wait states. */
  for (int w = 0; w < 2; ++w) {
    int64_t v;
    uint64_t total;
    hsa_signal_store_relaxed(sig, 0);
    uint64_t timeouts = hsa_sim_wait_timeouts();
    wait_for_setter(sig, 5, 42, false, 20000000000ull, states[w], &v, &total);
    DROPIN_CHECK(v == 42);
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts); /* woken, not timed out */
  }

  /* Futex wakes without and with the simulated interrupt delay: the runtime
   * applies the configured delay after each futex wake, none when it is 0
   * (counted; the measured latencies are printed, never compared). Periodic
   * re-checks off so that only the futex wake ends the sleep. A round whose
   * store lands before its waiter sleeps has no futex wake, hence "<=". */
  hsa_sim_set_periodic_recheck(false, 0);
  uint64_t d0, us0, d200, us200, d20, us20;
  uint64_t fast = wake_rounds(sig, 15, &d0, &us0);
  hsa_sim_set_wait_wake_delay_us(200);
  uint64_t slow = wake_rounds(sig, 15, &d200, &us200);
  hsa_sim_set_wait_wake_delay_us(20);
  uint64_t slow20 = wake_rounds(sig, 15, &d20, &us20);
  hsa_sim_set_wait_wake_delay_us(0);
  printf("blocked wait wake latency (median, not checked): delay 0: %.1f us, delay 20 us: %.1f us, "
         "delay 200 us: %.1f us; delayed wakes: %llu, %llu, %llu of 15\n",
         (double)fast / 1e3, (double)slow20 / 1e3, (double)slow / 1e3, (unsigned long long)d0,
         (unsigned long long)d20, (unsigned long long)d200);
  DROPIN_CHECK(d0 == 0 && us0 == 0);
  DROPIN_CHECK(d200 >= 1 && d200 <= 15 && us200 == 200 * d200);
  DROPIN_CHECK(d20 >= 1 && d20 <= 15 && us20 == 20 * d20);

  /* Periodic re-check on: a plain memory write is noticed within a few
   * periods. */
  hsa_sim_set_periodic_recheck(true, 1000);
  {
    int64_t v;
    uint64_t total;
    hsa_signal_store_relaxed(sig, 0);
    uint64_t final_polls = hsa_sim_wait_final_polls(), timeouts = hsa_sim_wait_timeouts();
    uint64_t lat = wait_for_setter(sig, 5, 77, true, 20000000000ull, HSA_WAIT_STATE_BLOCKED, &v, &total);
    DROPIN_CHECK(v == 77);
    printf("raw write noticed by periodic re-check after %.1f us\n", (double)lat / 1e3);
    /* Seen by a re-check while sleeping, not by the poll before the timeout. */
    DROPIN_CHECK(hsa_sim_wait_final_polls() == final_polls);
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts);
  }
  /* Re-check off: the raw write is not seen while the wait sleeps, only once
   * less than a whole millisecond is left: with exact millisecond sleeps
   * (tick 0) by the poll of that last part; with the kernel's ticks the
   * sleep ends past the deadline and the look after it sees it (as ROCr's
   * wait, which reads the value before it checks the time). Either way the
   * wait returns the value, not a timeout. */
  hsa_sim_set_periodic_recheck(false, 0);
  for (int ticks = 0; ticks < 2; ++ticks) {
    int64_t v;
    uint64_t total;
    hsa_sim_set_event_wait_hz(ticks ? 250u : 0u);
    hsa_signal_store_relaxed(sig, 0);
    uint64_t final_polls = hsa_sim_wait_final_polls(), timeouts = hsa_sim_wait_timeouts();
    wait_for_setter(sig, 5, 78, true, 300000000ull, HSA_WAIT_STATE_BLOCKED, &v, &total);
    DROPIN_CHECK(hsa_sim_wait_final_polls() == final_polls + 1);
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts);
    DROPIN_CHECK(v == 78);
    printf("raw write with re-check off, tick %s: wait returned after %.1f ms (timeout 300 ms)\n",
           ticks ? "4 ms" : "none", (double)total / 1e6);
  }
  hsa_sim_set_event_wait_hz(250);
  /* ROCr's blocked wait sleeps only whole milliseconds: one of 1 ms or less
   * never sleeps (it polls to its timeout); one with more than 1 ms left
   * after its first 200 us of polling sleeps. */
  {
    hsa_signal_store_relaxed(sig, 0);
    uint64_t sleeps = hsa_sim_wait_sleeps();
    uint64_t timeouts = hsa_sim_wait_timeouts();
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_EQ, 1, 1000000ull,
                                  HSA_WAIT_STATE_BLOCKED) == 0);
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts + 1);
    DROPIN_CHECK(hsa_sim_wait_sleeps() == sleeps);
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_EQ, 1, 20000000ull,
                                  HSA_WAIT_STATE_BLOCKED) == 0);
    DROPIN_CHECK(hsa_sim_wait_sleeps() > sleeps);
  }
  /* A second concurrent waiter on one signal sleeps when the driver reports
   * event ages and spins when it does not, as in ROCr: checked by the sleeps
   * it begins (its CPU share, printed, depends on the machine's load). */
  {
    double cpu_with, cpu_without;
    uint64_t with_ages = second_waiter_sleeps(sig, &cpu_with);
    hsa_sim_set_event_age(false);
    uint64_t without_ages = second_waiter_sleeps(sig, &cpu_without);
    hsa_sim_set_event_age(true);
    printf("second concurrent waiter: %llu sleep(s), CPU %.0f%% of its wait with event ages; "
           "%llu sleep(s), CPU %.0f%% without\n",
           (unsigned long long)with_ages, 100.0 * cpu_with, (unsigned long long)without_ages,
           100.0 * cpu_without);
    DROPIN_CHECK(with_ages >= 1 && with_ages != UINT64_MAX);
    DROPIN_CHECK(without_ages == 0);
  }
  /* An idle blocked wait with re-check off costs (almost) no CPU. */
  {
    hsa_signal_store_relaxed(sig, 0);
    uint64_t c0 = thread_cpu_ns();
    uint64_t sleeps = hsa_sim_wait_sleeps();
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_EQ, 1, 300000000ull,
                                  HSA_WAIT_STATE_BLOCKED) == 0);
    uint64_t cpu = thread_cpu_ns() - c0;
    sleeps = hsa_sim_wait_sleeps() - sleeps;
    printf("idle blocked wait of 300 ms, re-check off: %.3f ms CPU, %llu sleep(s)\n", (double)cpu / 1e6,
           (unsigned long long)sleeps);
    /* It slept through (one sleep of its whole milliseconds; a second only
     * after an interrupted one) instead of spinning. */
    DROPIN_CHECK(sleeps >= 1 && sleeps <= 2);
    hsa_sim_set_periodic_recheck(true, 1000);
    c0 = thread_cpu_ns();
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_EQ, 1, 300000000ull,
                                  HSA_WAIT_STATE_BLOCKED) == 0);
    printf("idle blocked wait of 300 ms, re-check every 1 ms: %.3f ms CPU\n",
           (double)(thread_cpu_ns() - c0) / 1e6);
  }
  /* Silent stores do not wake a blocked waiter (re-check off). */
  hsa_sim_set_periodic_recheck(false, 0);
  {
    hsa_signal_store_relaxed(sig, 0);
    uint64_t timeouts = hsa_sim_wait_timeouts();
    hsa_signal_silent_store_relaxed(sig, 0);
    DROPIN_CHECK(hsa_signal_wait_relaxed(sig, HSA_SIGNAL_CONDITION_NE, 0, 30000000ull,
                                  HSA_WAIT_STATE_BLOCKED) == 0);
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts + 1);
  }
  CHECK_STATUS(hsa_signal_destroy(sig), HSA_STATUS_SUCCESS);
  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- stress --------------------------------------------------------------------- */

#define STRESS_THREADS 4
#define STRESS_ADDS 20000

typedef struct {
  hsa_signal_t counter;
  hsa_signal_t cas_counter;
  sys_t sys;
  int id;
} stress_arg_t;

static void* stress_adder(void* arg) {
  stress_arg_t* a = arg;
  for (int i = 0; i < STRESS_ADDS; ++i) {
    switch (i & 3) {
      case 0: hsa_signal_add_scacq_screl(a->counter, 1); break;
      case 1: hsa_signal_add_screlease(a->counter, 1); break;
      case 2: hsa_signal_add_relaxed(a->counter, 1); break;
      default: hsa_signal_add_scacquire(a->counter, 1); break;
    }
    if ((i & 7) == 0) {
      hsa_signal_value_t seen = hsa_signal_load_relaxed(a->cas_counter);
      for (;;) {
        hsa_signal_value_t got = hsa_signal_cas_scacq_screl(a->cas_counter, seen, seen + 1);
        if (got == seen) break;
        seen = got;
      }
    }
  }
  return NULL;
}

/* Concurrent vmem and signal object churn. */
static void* stress_churn(void* arg) {
  stress_arg_t* a = arg;
  const size_t cap = KIB(64);
  for (int i = 0; i < 100; ++i) {
    void* va = NULL;
    hsa_amd_vmem_alloc_handle_t h;
    hsa_signal_t sig;
    CHECK_STATUS(hsa_amd_vmem_address_reserve_align(&va, 2 * cap, 0, cap, 0), HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_handle_create(a->sys.cpu_coarse, cap, MEMORY_TYPE_NONE, 0, &h),
                 HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_map(va, cap, 0, h, 0), HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_map((char*)va + cap, cap, 0, h, 0), HSA_STATUS_SUCCESS);
    hsa_amd_memory_access_desc_t d = {HSA_ACCESS_PERMISSION_RW, a->sys.cpu};
    CHECK_STATUS(hsa_amd_vmem_set_access(va, cap, &d, 1), HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_set_access((char*)va + cap, cap, &d, 1), HSA_STATUS_SUCCESS);
    ((volatile int*)va)[0] = a->id * 1000 + i;
    DROPIN_CHECK(((volatile int*)((char*)va + cap))[0] == a->id * 1000 + i);
    CHECK_STATUS(hsa_signal_create(i, 0, NULL, &sig), HSA_STATUS_SUCCESS);
    DROPIN_CHECK(hsa_signal_load_relaxed(sig) == i);
    CHECK_STATUS(hsa_signal_destroy(sig), HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_unmap(va, cap), HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_unmap((char*)va + cap, cap), HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_handle_release(h), HSA_STATUS_SUCCESS);
    CHECK_STATUS(hsa_amd_vmem_address_free(va, 2 * cap), HSA_STATUS_SUCCESS);
  }
  return NULL;
}

static void test_stress(void) {
  CHECK_STATUS(hsa_init(), HSA_STATUS_SUCCESS);
  stress_arg_t args[STRESS_THREADS];
  hsa_signal_t counter, cas_counter;
  CHECK_STATUS(hsa_signal_create(0, 0, NULL, &counter), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_signal_create(0, 0, NULL, &cas_counter), HSA_STATUS_SUCCESS);
  sys_t sys = sys_get();
  pthread_t threads[STRESS_THREADS], churn[2];
  for (int i = 0; i < STRESS_THREADS; ++i) {
    args[i].counter = counter;
    args[i].cas_counter = cas_counter;
    args[i].sys = sys;
    args[i].id = i;
    pthread_create(&threads[i], NULL, stress_adder, &args[i]);
  }
  for (int i = 0; i < 2; ++i) pthread_create(&churn[i], NULL, stress_churn, &args[i]);
  /* Blocked waits on intermediate values while the adders run (re-check off
   * so only futex wakes make progress). */
  hsa_sim_set_periodic_recheck(false, 0);
  const int64_t total = (int64_t)STRESS_THREADS * STRESS_ADDS;
  for (int64_t target = total / 8; target <= total; target += total / 8) {
    uint64_t timeouts = hsa_sim_wait_timeouts();
    int64_t v = hsa_signal_wait_scacquire(counter, HSA_SIGNAL_CONDITION_GTE, target,
                                          30000000000ull, HSA_WAIT_STATE_BLOCKED);
    DROPIN_CHECK(v >= target);
    DROPIN_CHECK(hsa_sim_wait_timeouts() == timeouts); /* woken, not timed out */
  }
  for (int i = 0; i < STRESS_THREADS; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < 2; ++i) pthread_join(churn[i], NULL);
  DROPIN_CHECK(hsa_signal_load_scacquire(counter) == total);
  DROPIN_CHECK(hsa_signal_load_scacquire(cas_counter) == (int64_t)STRESS_THREADS * (STRESS_ADDS / 8));
  CHECK_STATUS(hsa_signal_destroy(counter), HSA_STATUS_SUCCESS);
  CHECK_STATUS(hsa_signal_destroy(cas_counter), HSA_STATUS_SUCCESS);
  check_live_zero();
  CHECK_STATUS(hsa_shut_down(), HSA_STATUS_SUCCESS);
}

/* ---- main ----------------------------------------------------------------------- */

typedef struct {
  const char* name;
  void (*fn)(void);
} group_t;

static const group_t g_groups[] = {
    {"init", test_init},     {"agents", test_agents}, {"pools", test_pools},
    {"vmem", test_vmem},     {"access", test_access}, {"faults", test_faults},
    {"trace", test_trace},   {"stubs", test_stubs},   {"signals", test_signals},
    {"waits", test_waits},   {"stress", test_stress},
};

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <group>|all\n", argv[0]);
    return 2;
  }
  bool all = strcmp(argv[1], "all") == 0;
  bool found = false;
  for (size_t i = 0; i < sizeof(g_groups) / sizeof(g_groups[0]); ++i) {
    if (all || strcmp(argv[1], g_groups[i].name) == 0) {
      found = true;
      if (all) {
        /* Every group expects a fresh runtime: run each in a child. */
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
          g_groups[i].fn();
          _exit(dropin_failures == 0 ? 0 : 1);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        printf("%s: %s\n", g_groups[i].name, ok ? "ok" : "FAILED");
        if (!ok) ++dropin_failures;
      } else {
        g_groups[i].fn();
      }
    }
  }
  if (!found) {
    fprintf(stderr, "unknown group %s\n", argv[1]);
    return 2;
  }
  if (dropin_failures != 0) {
    fprintf(stderr, "%d check(s) failed\n", dropin_failures);
    return 1;
  }
  printf("%s: all checks passed\n", argv[1]);
  return 0;
}
