/* DEVMEM (service 3) through the device simulator, encoded as the device
 * libraries encode it: the default service over an HSA memory pool of the
 * software runtime (allocation, access grant, free, unknown and malformed
 * requests, failures injected into HSA, leak accounting through the
 * runtime's live counts, cleanup on disable and on unregister), the buffer
 * scope, a runtime's own DEVMEM handler in its place, and concurrent waves. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim.h"
#include "device_sim_services.h"
#include "hc_test.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

#define PACKETS 8u
#define ERROR_VALUE AMDGPU_DROPIN_HOSTCALL_ERROR_VALUE
#define DEVMEM AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM

static hsa_agent_t g_gpu;
static hsa_amd_memory_pool_t g_vram;       /* the GPU's coarse-grained pool */
static hsa_amd_memory_pool_t g_group_pool; /* GROUP segment: not allocatable */

/* One DEVMEM request from lane `lane` only; returns the answer. */
static uint64_t request(void* buffer, uint32_t lane, uint64_t address, uint64_t size) {
  uint64_t addresses[64] = {0}, sizes[64] = {0}, answers[64] = {0};
  addresses[lane] = address;
  sizes[lane] = size;
  int rc = device_sim_devmem_request(buffer, 1ull << lane, addresses, sizes, answers, HC_WAVES_TIMEOUT_NS);
  if (rc != DEVICE_SIM_OK) {
    fprintf(stderr, "devmem request: %s\n", device_sim_error_string(rc));
    return 0xDEADull;
  }
  return answers[lane];
}

static amdgpu_dropin_hostcall_status_t enable_devmem(void* buffer) {
  uint64_t agent = g_gpu.handle;
  return amdgpu_dropin_hostcall_devmem_enable(buffer, g_vram.handle, &agent, 1);
}

static void test_pool_checks(void) {
  uint64_t agent = g_gpu.handle;
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_devmem_enable(NULL, g_group_pool.handle, &agent, 1) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_POOL, "GROUP pool refused");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED, "nothing was registered");
}

static void test_default_service(void) {
  void* buffer = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "enable");
  const uint64_t base = hc_live_pool_blocks();
  DROPIN_REQUIRE_MSG(enable_devmem(NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "devmem enable");
  DROPIN_CHECK_MSG(enable_devmem(NULL) == AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED, "twice");
  hsa_sim_reset_call_counts();

  /* 64 lanes allocate at once. */
  uint64_t addresses[64] = {0}, sizes[64], answers[64] = {0};
  for (int lane = 0; lane < 64; ++lane) sizes[lane] = 1000u * (uint64_t)(lane + 1);
  DROPIN_REQUIRE_MSG(device_sim_devmem_request(buffer, ~0ull, addresses, sizes, answers, HC_WAVES_TIMEOUT_NS) ==
                 DEVICE_SIM_OK, "allocate x64");
  bool distinct = true, usable = true;
  for (int lane = 0; lane < 64; ++lane) {
    if (answers[lane] == 0 || answers[lane] == ERROR_VALUE) usable = false;
    for (int other = 0; other < lane; ++other) distinct &= answers[other] != answers[lane];
  }
  DROPIN_REQUIRE_MSG(usable, "every lane got memory");
  DROPIN_CHECK_MSG(distinct, "distinct blocks");
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 64, "%llu live blocks (want %llu)",
           (unsigned long long)hc_live_pool_blocks(), (unsigned long long)(base + 64));
  DROPIN_CHECK_MSG(hsa_sim_call_count("hsa_amd_agents_allow_access") == 64, "access granted per block");
  for (int lane = 0; lane < 64; ++lane) {
    DROPIN_CHECK_MSG(hsa_sim_pool_block_accessible((void*)(uintptr_t)answers[lane], g_gpu), "lane %d", lane);
    memset((void*)(uintptr_t)answers[lane], 0xA5, sizes[lane]); /* the block is really that big */
  }

  /* Lanes 0..31 free theirs (size 0, as the device heap does). */
  uint64_t frees[64] = {0}, zero[64] = {0}, freed[64];
  memset(freed, 0xFF, sizeof(freed));
  for (int lane = 0; lane < 32; ++lane) frees[lane] = answers[lane];
  DROPIN_REQUIRE_MSG(device_sim_devmem_request(buffer, 0xFFFFFFFFull, frees, zero, freed, HC_WAVES_TIMEOUT_NS) ==
                 DEVICE_SIM_OK, "free x32");
  for (int lane = 0; lane < 32; ++lane) DROPIN_CHECK_MSG(freed[lane] == 0, "free answer lane %d", lane);
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 32, "after frees: %llu", (unsigned long long)hc_live_pool_blocks());

  /* Unknown address, double free, malformed, too large: answered 0, no change. */
  DROPIN_CHECK_MSG(request(buffer, 5, 0x123456789000ull, 0) == 0, "unknown address");
  DROPIN_CHECK_MSG(request(buffer, 6, answers[0], 0) == 0, "double free");
  DROPIN_CHECK_MSG(request(buffer, 7, 0, 0) == 0, "address 0 and size 0");
  DROPIN_CHECK_MSG(request(buffer, 8, 0, 1ull << 62) == 0, "larger than the pool");
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 32, "nothing changed: %llu", (unsigned long long)hc_live_pool_blocks());
  DROPIN_CHECK_MSG(hsa_sim_call_count("hsa_amd_memory_pool_free") == 32, "only known blocks freed: %llu",
           (unsigned long long)hsa_sim_call_count("hsa_amd_memory_pool_free"));

  /* HSA failures: the lane gets 0 and nothing leaks. */
  hsa_sim_fail_nth_call("hsa_amd_agents_allow_access", 1, HSA_STATUS_ERROR);
  DROPIN_CHECK_MSG(request(buffer, 9, 0, 4096) == 0, "failed access grant answers 0");
  hsa_sim_fail_nth_call("hsa_amd_memory_pool_allocate", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  DROPIN_CHECK_MSG(request(buffer, 10, 0, 4096) == 0, "failed allocation answers 0");
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 32, "no block left by the failures: %llu",
           (unsigned long long)hc_live_pool_blocks());

  /* Disabling the buffer frees what its requests left. */
  hc_disable(buffer, NULL);
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base, "after disable: %llu (want %llu)", (unsigned long long)hc_live_pool_blocks(),
           (unsigned long long)base);

  /* The service (for every buffer) stays; unregistering it frees the rest. */
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "re-enable");
  uint64_t again = request(buffer, 0, 0, 65536);
  DROPIN_CHECK_MSG(again != 0 && hc_live_pool_blocks() == base + 1, "allocation after re-enable");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister");
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base, "unregister freed the rest: %llu", (unsigned long long)hc_live_pool_blocks());
  DROPIN_CHECK_MSG(request(buffer, 0, 0, 64) == 0, "no DEVMEM service any more: 0 (no memory), never -1");
  hc_disable_and_free(buffer);
}

static int32_t runtime_devmem(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  (void)user, (void)buffer, (void)service, (void)lane;
  slot[0] = slot[0] == 0 ? 0x5000 + slot[1] : 0;
  return 0;
}

static void test_buffer_scope_and_runtime_handler(void) {
  void* a = hc_alloc_buffer(PACKETS);
  void* b = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(a, PACKETS, NULL) && hc_enable(b, PACKETS, NULL), "enable");
  const uint64_t base = hc_live_pool_blocks();
  /* A runtime with its own memory objects serves DEVMEM itself. */
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(DEVMEM, NULL, runtime_devmem, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "runtime handler");
  DROPIN_CHECK_MSG(enable_devmem(NULL) == AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED,
           "the default cannot replace it");
  DROPIN_REQUIRE_MSG(enable_devmem(a) == AMDGPU_DROPIN_HOSTCALL_OK, "default for A only");
  uint64_t on_a = request(a, 3, 0, 8192);
  DROPIN_CHECK_MSG(on_a != 0 && on_a != 0x5000 + 8192 && hc_live_pool_blocks() == base + 1, "A: default service");
  DROPIN_CHECK_MSG(request(b, 3, 0, 8192) == 0x5000 + 8192, "B: the runtime's handler");
  /* Disabling A frees its block and ends A's service. */
  hc_disable(a, NULL);
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base, "A's block freed on disable");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, a) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED, "A's service ended with A");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister the runtime's");
  hc_disable(b, NULL);
  hc_free_buffer(a);
  hc_free_buffer(b);
}

/* Device malloc's heap is the device's: a block that a request on buffer A
 * made may be freed through buffer B served from the same pool and agents
 * (one book for the scope), also after A is disabled; the blocks left are
 * freed when the scope's last buffer goes. `global`: one service for every
 * buffer; else one per buffer, with the same pool and agent. */
static void cross_buffer_free(bool global) {
  void* a = hc_alloc_buffer(PACKETS);
  void* b = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(a, PACKETS, NULL) && hc_enable(b, PACKETS, NULL), "enable");
  const uint64_t base = hc_live_pool_blocks();
  if (global) {
    DROPIN_REQUIRE_MSG(enable_devmem(NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "devmem for every buffer");
  } else {
    DROPIN_REQUIRE_MSG(enable_devmem(a) == AMDGPU_DROPIN_HOSTCALL_OK && enable_devmem(b) == AMDGPU_DROPIN_HOSTCALL_OK,
               "devmem for A and for B");
  }
  uint64_t made_on_a = request(a, 5, 0, 2u << 20);
  uint64_t kept_on_a = request(a, 6, 0, 4096);
  uint64_t made_on_b = request(b, 0, 0, 4096);
  DROPIN_REQUIRE_MSG(made_on_a != 0 && kept_on_a != 0 && made_on_b != 0, "allocations");
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 3, "%llu live", (unsigned long long)hc_live_pool_blocks());
  hc_disable(a, NULL);
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 3,
           "disabling A freed blocks B may still use: %llu live (want %llu)",
           (unsigned long long)hc_live_pool_blocks(), (unsigned long long)(base + 3));
  DROPIN_CHECK_MSG(request(b, 1, made_on_a, 0) == 0, "free answered");
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 2, "A's block, freed through B, is still live: %llu (want %llu)",
           (unsigned long long)hc_live_pool_blocks(), (unsigned long long)(base + 2));
  hc_disable(b, NULL);
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base, "the scope's last buffer went: %llu live (want %llu)",
           (unsigned long long)hc_live_pool_blocks(), (unsigned long long)base);
  if (global) {
    DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "unregister");
  }
  hc_free_buffer(a);
  hc_free_buffer(b);
}

/* A process-wide and a per-buffer default service of the same pool and agent
 * share one book. Unregistering the buffer's own service while the buffer
 * stays enabled (now served by the process-wide one) frees nothing: its
 * device heap may still use the blocks. */
static void test_unregister_per_buffer_service_under_a_global_one(void) {
  void* a = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(a, PACKETS, NULL), "enable");
  const uint64_t base = hc_live_pool_blocks();
  DROPIN_REQUIRE_MSG(enable_devmem(NULL) == AMDGPU_DROPIN_HOSTCALL_OK && enable_devmem(a) == AMDGPU_DROPIN_HOSTCALL_OK,
                     "devmem for every buffer and for A");
  uint64_t block = request(a, 3, 0, 4096);
  uint64_t other = request(a, 4, 0, 8192);
  DROPIN_REQUIRE_MSG(block != 0 && other != 0 && hc_live_pool_blocks() == base + 2, "allocations");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, a) == AMDGPU_DROPIN_HOSTCALL_OK,
                   "unregister A's own service");
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base + 2,
                   "unregistering A's own service freed blocks A (still enabled) uses: %llu live (want %llu)",
                   (unsigned long long)hc_live_pool_blocks(), (unsigned long long)(base + 2));
  DROPIN_CHECK_MSG(request(a, 3, block, 0) == 0 && hc_live_pool_blocks() == base + 1,
                   "the process-wide service frees A's block: %llu live (want %llu)",
                   (unsigned long long)hc_live_pool_blocks(), (unsigned long long)(base + 1));
  hc_disable(a, NULL);
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base, "the scope's last buffer went: %llu live (want %llu)",
                   (unsigned long long)hc_live_pool_blocks(), (unsigned long long)base);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "unregister");
  hc_free_buffer(a);
}

static void test_cross_buffer_free_one_service(void) { cross_buffer_free(true); }
static void test_cross_buffer_free_per_buffer_services(void) { cross_buffer_free(false); }

/* Waves allocate and free concurrently on two buffers. */
typedef struct wave_arg {
  void* buffer;
  int failures;
} wave_arg_t;

static void* devmem_wave(void* p) {
  wave_arg_t* arg = p;
  for (int round = 0; round < 100; ++round) {
    uint64_t zero[64] = {0}, sizes[64], blocks[64] = {0}, answers[64];
    for (int lane = 0; lane < 64; ++lane) sizes[lane] = 256u + (uint64_t)lane;
    const uint64_t mask = 0x00FF00FF00FF00FFull;
    if (device_sim_devmem_request(arg->buffer, mask, zero, sizes, blocks, HC_WAVES_TIMEOUT_NS) != DEVICE_SIM_OK) {
      arg->failures++;
      continue;
    }
    for (int lane = 0; lane < 64; ++lane) {
      if ((mask >> lane) & 1) {
        if (blocks[lane] == 0 || blocks[lane] == ERROR_VALUE) arg->failures++;
        *(volatile uint8_t*)(uintptr_t)blocks[lane] = (uint8_t)lane;
      }
    }
    if (device_sim_devmem_request(arg->buffer, mask, blocks, zero, answers, HC_WAVES_TIMEOUT_NS) != DEVICE_SIM_OK) {
      arg->failures++;
    }
  }
  return NULL;
}

static void test_concurrent_waves(void) {
  void* buffers[2] = {hc_alloc_buffer(PACKETS), hc_alloc_buffer(PACKETS)};
  DROPIN_REQUIRE_MSG(hc_enable(buffers[0], PACKETS, NULL) && hc_enable(buffers[1], PACKETS, NULL),
             "enable");
  const uint64_t base = hc_live_pool_blocks();
  DROPIN_REQUIRE_MSG(enable_devmem(NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "devmem enable");
  pthread_t threads[4];
  wave_arg_t args[4];
  for (int i = 0; i < 4; ++i) {
    args[i] = (wave_arg_t){.buffer = buffers[i % 2]};
    pthread_create(&threads[i], NULL, devmem_wave, &args[i]);
  }
  int failures = 0;
  for (int i = 0; i < 4; ++i) {
    pthread_join(threads[i], NULL);
    failures += args[i].failures;
  }
  DROPIN_CHECK_MSG(failures == 0, "%d failed requests", failures);
  DROPIN_CHECK_MSG(hc_live_pool_blocks() == base, "leak: %llu live blocks (want %llu)", (unsigned long long)hc_live_pool_blocks(),
           (unsigned long long)base);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister");
  hc_disable_and_free(buffers[0]);
  hc_disable_and_free(buffers[1]);
}

/* Child: DEVMEM with no service at all, several times. */
static int child_unserved(void) {
  hc_hsa_init();
  void* buffer = hc_alloc_buffer(PACKETS);
  if (!hc_enable(buffer, PACKETS, NULL)) return 2;
  for (int i = 0; i < 3; ++i) {
    if (request(buffer, (uint32_t)i, 0, 4096) != 0) return 3;       /* allocate: no memory */
    if (request(buffer, (uint32_t)i, 0x10000, 0) != 0) return 4;    /* free: ignored */
  }
  hc_disable_and_free(buffer);
  return 0;
}

static void test_unserved_answers_zero_and_logs_once(void) {
  static const char* const env[] = {"AMD_LOG_LEVEL=1", NULL};
  hc_child_result_t r;
  HC_CHILD_OK("unserved", env, HC_CHILD_TIMEOUT_MS, &r);
  int lines = hc_count_occurrences(r.err, "no DEVMEM service is registered");
  DROPIN_CHECK_MSG(lines == 1, "logged %d times (want once); stderr: %s", lines, r.err);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"unserved", child_unserved},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
  hc_hsa_init();
  if (!hc_find_gpu_pools(&g_gpu.handle, &g_vram.handle, &g_group_pool.handle)) {
    fprintf(stderr, "no GPU agent with a coarse-grained and a GROUP pool in the software runtime\n");
    return 1;
  }
  HC_RUN(test_pool_checks);
  HC_RUN(test_unserved_answers_zero_and_logs_once);
  HC_RUN(test_default_service);
  HC_RUN(test_buffer_scope_and_runtime_handler);
  HC_RUN(test_cross_buffer_free_one_service);
  HC_RUN(test_cross_buffer_free_per_buffer_services);
  HC_RUN(test_unregister_per_buffer_service_under_a_global_one);
  HC_RUN(test_concurrent_waves);
  return dropin_check_exit_code();
}
