/*
 * amdgpu-dropin demo: both halves of the library, used exactly as IREE and
 * ROCclr use them, on the built-in software HSA runtime (default) or on the
 * system's ROCr (scripts/demo.sh --system-hsa puts ROCr first on the
 * library path).
 *
 *   vmem:     find pools, create a triple-mapped ringbuffer, write across its
 *             end and read the same bytes through the neighbouring views,
 *             tear it down and show nothing is left live.
 *   hostcall: enable a hostcall buffer, let simulated GPU waves (host
 *             threads running the device protocol) make FUNCTION_CALL
 *             requests, check every answer; then lanes of a wave call
 *             printf (hostcall service 2, encoded as the device libraries
 *             encode it) and the listener prints their lines; a custom
 *             service registered through the extension API answers a wave;
 *             DEVMEM (service 3) allocates device memory from a GPU pool for
 *             lanes and frees it; disable frees what the lanes left.
 *   phase-bit: the same waves and printf over a buffer enabled in the
 *             phase-bit protocol (device libraries built with
 *             USE_NEW_HOSTCALL_IMPL), with its occupancy bitmap.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim.h"
#include "device_sim_phase.h"
#include "device_sim_services.h"
#include "pf_device.h"
#include "iree/hal/drivers/amdgpu/util/libhsa.h"
#include "iree/hal/drivers/amdgpu/util/topology.h"
#include "iree/hal/drivers/amdgpu/util/vmem.h"
#include "rochostcall.hpp"
#include "system_hsa.h"

bool iree_test_libhsa_initialize(iree_hal_amdgpu_libhsa_t* out_libhsa, const char** out_missing);


static iree_hal_amdgpu_libhsa_t g_libhsa;
static iree_hal_amdgpu_topology_t g_topology;

static int fail(const char* what, iree_status_t status) {
  fprintf(stderr, "demo: %s failed (IREE status code %u)\n", what,
          (unsigned)iree_status_code(status));
  return 1;
}

static hsa_status_t collect_agent(hsa_agent_t agent, void* user_data) {
  (void)user_data;
  hsa_device_type_t type;
  if (hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type) != HSA_STATUS_SUCCESS) {
    return HSA_STATUS_ERROR;
  }
  if (type == HSA_DEVICE_TYPE_CPU && g_topology.cpu_agent_count < IREE_HAL_AMDGPU_MAX_CPU_AGENTS) {
    g_topology.cpu_agents[g_topology.cpu_agent_count++] = agent;
  } else if (type == HSA_DEVICE_TYPE_GPU &&
             g_topology.gpu_agent_count < IREE_HAL_AMDGPU_MAX_GPU_AGENTS) {
    g_topology.gpu_agents[g_topology.gpu_agent_count++] = agent;
  }
  if (g_topology.all_agent_count < IREE_HAL_AMDGPU_MAX_AGENTS) {
    g_topology.all_agents[g_topology.all_agent_count++] = agent;
  }
  return HSA_STATUS_SUCCESS;
}

/* Live-object accounting exists only in the software runtime. */
typedef struct {
  uint64_t reservations, handles, mappings, signals, pool_allocations;
} demo_live_t;
static bool get_live(demo_live_t* live) {
  void (*get)(demo_live_t*) = NULL;
  void* symbol = dlsym(RTLD_DEFAULT, "hsa_sim_get_live");
  memcpy(&get, &symbol, sizeof(symbol));
  if (!get) return false;
  get(live);
  return true;
}
static void print_live(const char* when) {
  demo_live_t live;
  if (!get_live(&live)) return;
  printf("  live HSA objects %s: %" PRIu64 " reservations, %" PRIu64 " handles, %" PRIu64
         " mappings, %" PRIu64 " signals, %" PRIu64 " pool blocks\n",
         when, live.reservations, live.handles, live.mappings, live.signals, live.pool_allocations);
}

static void hex(const uint8_t* bytes, size_t n, char* out) {
  for (size_t i = 0; i < n; ++i) sprintf(out + 2 * i, "%02x", bytes[i]);
}

static int demo_vmem(void) {
  printf("== vmem: pools and the triple-mapped ringbuffer\n");
  for (size_t i = 0; i < g_topology.gpu_agent_count; ++i) {
    hsa_amd_memory_pool_t coarse, fine;
    iree_status_t status =
        iree_hal_amdgpu_find_coarse_global_memory_pool(&g_libhsa, g_topology.gpu_agents[i], &coarse);
    if (status) return fail("find coarse pool", status);
    status = iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, g_topology.gpu_agents[i], &fine);
    if (status) return fail("find fine pool", status);
    printf("  GPU %zu: coarse-grained pool 0x%" PRIx64 ", fine-grained pool 0x%" PRIx64 "\n", i,
           coarse.handle, fine.handle);
  }
  hsa_agent_t cpu = g_topology.cpu_agents[0];
  hsa_amd_memory_pool_t host_pool;
  iree_status_t status = iree_hal_amdgpu_find_fine_global_memory_pool(&g_libhsa, cpu, &host_pool);
  if (status) return fail("find host pool", status);

  /* Host memory, pinned, shared with every agent: the CPU can check it. */
  iree_hal_amdgpu_vmem_ringbuffer_t ring;
  const iree_device_size_t requested = 1000;
  status = iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
      &g_libhsa, cpu, host_pool, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST, requested,
      &g_topology, IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &ring);
  if (status) return fail("ringbuffer initialize", status);
  printf("  ringbuffer: asked %" PRIu64 " bytes, capacity %" PRIu64
         " (rounded to the granule); views prev %p, base %p, next %p\n",
         (uint64_t)requested, (uint64_t)ring.capacity, ring.va_base_ptr, ring.ring_base_ptr,
         (void*)((uint8_t*)ring.ring_base_ptr + ring.capacity));
  print_live("with the ringbuffer");

  /* Write 32 bytes straddling the end of the ring, with no wrap logic. */
  uint8_t* base = (uint8_t*)ring.ring_base_ptr;
  const size_t cap = (size_t)ring.capacity;
  for (size_t i = 0; i < 32; ++i) base[cap - 16 + i] = (uint8_t)(0xA0 + i);
  /* The views alias, which the compiler cannot know: keep the reads below
   * after the writes above. */
  atomic_signal_fence(memory_order_seq_cst);
  char written[65], at_start[65], before_start[65];
  hex(base + cap - 16, 32, written);
  /* The 16 bytes past the end are the ring's first 16 bytes, and the 16
   * before the end are also visible just before the base (prev view). */
  uint8_t wrapped[32];
  memcpy(wrapped, base - 16, 16);
  memcpy(wrapped + 16, base, 16);
  hex(base, 16, at_start);
  hex(base - 16, 16, before_start);
  bool agree = memcmp(wrapped, base + cap - 16, 32) == 0;
  printf("  wrote ring[cap-16 .. cap+16):   %s\n", written);
  printf("  read  ring[-16 .. 0) ++ [0..16): %s%s\n", before_start, at_start);
  printf("  views agree: %s\n", agree ? "yes" : "NO");

  iree_hal_amdgpu_vmem_ringbuffer_deinitialize(&g_libhsa, &ring);
  print_live("after deinitialize");
  return agree ? 0 : 1;
}

/* printf from 4 lanes of one simulated wave, as a kernel's
 * printf("...", lane, name, value) arrives: control word, format string in
 * 8-byte words, one argument per packet. */
static int demo_printf(void* buffer) {
  static const char* const names[4] = {"alpha", "beta", "gamma", "delta"};
  pf_message_t* messages[64] = {0};
  uint64_t results[64] = {0};
  const uint64_t lanes = 0xF;
  fflush(stdout);
  for (int lane = 0; lane < 4; ++lane) {
    messages[lane] = malloc(sizeof(pf_message_t));
    if (!messages[lane]) return 1;
    pf_arg_t args[4] = {pf_i32(lane), pf_str(names[lane]), pf_f64(lane * 1.25 + 0.001),
                        pf_u32(0xC0DE0000u + (unsigned)lane)};
    if (!pf_encode(messages[lane], PF_PER_ARGUMENT, 0,
                   "  [device printf] lane %d says %-6s value=%8.3f tag=%#x\n", args, 4)) {
      return 1;
    }
  }
  int rc = pf_send_wave(buffer, lanes, messages, results);
  for (int lane = 0; lane < 4; ++lane) free(messages[lane]);
  printf("  printf from 4 lanes: %s, return values %d %d %d %d\n", rc == 0 ? "served" : "FAILED",
         (int)results[0], (int)results[1], (int)results[2], (int)results[3]);
  return rc;
}

/* A custom service (id 0x4D41 "MA": multiply-add) registered through the
 * extension API: every lane asks for slot[0] * slot[1] + slot[2]. */
#define DEMO_SERVICE_MULADD 0x4D41u

static int32_t demo_muladd(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  (void)buffer, (void)service, (void)lane;
  atomic_fetch_add((atomic_uint_fast64_t*)user, 1);
  slot[0] = slot[0] * slot[1] + slot[2];
  return 0;
}

static int demo_custom_service(void* buffer) {
  static atomic_uint_fast64_t calls;
  if (amdgpu_dropin_hostcall_register_lane_handler(DEMO_SERVICE_MULADD, NULL, demo_muladd, &calls) !=
      AMDGPU_DROPIN_HOSTCALL_OK) {
    return 1;
  }
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  for (uint64_t lane = 0; lane < 64; ++lane) {
    lanes[lane][0] = lane;
    lanes[lane][1] = 1000;
    lanes[lane][2] = 7;
  }
  int rc = device_sim_hostcall(buffer, DEMO_SERVICE_MULADD, ~0ull, lanes, 0);
  bool right = rc == DEVICE_SIM_OK;
  for (uint64_t lane = 0; lane < 64 && right; ++lane) right = lanes[lane][0] == lane * 1000 + 7;
  printf("  custom service %#x (API version %u): 64 lanes answered by a registered handler "
         "(%" PRIu64 " calls), lane 63 got %" PRIu64 ": %s\n",
         DEMO_SERVICE_MULADD, amdgpu_dropin_hostcall_api_version(), (uint64_t)atomic_load(&calls),
         lanes[63][0], right ? "right" : "WRONG");
  amdgpu_dropin_hostcall_unregister_handler(DEMO_SERVICE_MULADD, NULL);
  return right ? 0 : 1;
}

static hsa_status_t find_devmem_pool(hsa_amd_memory_pool_t pool, void* data) {
  uint32_t segment = 0;
  bool allowed = false;
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment);
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &allowed);
  if (segment == HSA_AMD_SEGMENT_GLOBAL && allowed) {
    *(hsa_amd_memory_pool_t*)data = pool;
    return HSA_STATUS_INFO_BREAK;
  }
  return HSA_STATUS_SUCCESS;
}

/* DEVMEM as the device heap uses it: 16 lanes each ask for a 2 MiB slab,
 * half of them free theirs, disableHostcalls frees the rest. */
static int demo_devmem(void* buffer) {
  if (g_topology.gpu_agent_count == 0) {
    printf("  DEVMEM: no GPU agent, skipped\n");
    return 0;
  }
  hsa_agent_t gpu = g_topology.gpu_agents[0];
  hsa_amd_memory_pool_t pool = {0};
  hsa_amd_agent_iterate_memory_pools(gpu, find_devmem_pool, &pool);
  uint64_t agent = gpu.handle;
  amdgpu_dropin_hostcall_status_t status =
      amdgpu_dropin_hostcall_devmem_enable(buffer, pool.handle, &agent, 1);
  if (status != AMDGPU_DROPIN_HOSTCALL_OK) {
    printf("  DEVMEM: enable failed: %s\n", amdgpu_dropin_hostcall_status_string(status));
    return 1;
  }
  uint64_t zero[64] = {0}, sizes[64] = {0}, slabs[64] = {0}, answers[64] = {0};
  const uint64_t mask = 0xFFFF;
  for (int lane = 0; lane < 16; ++lane) sizes[lane] = 2u << 20;
  int rc = device_sim_devmem_request(buffer, mask, zero, sizes, slabs, 0);
  demo_live_t live = {0};
  bool sim = get_live(&live);
  int got = 0;
  for (int lane = 0; lane < 16; ++lane) {
    if (slabs[lane] != 0 && slabs[lane] != AMDGPU_DROPIN_HOSTCALL_ERROR_VALUE) {
      /* The simulated wave writes its slab (on a real GPU, VRAM may not be
       * host-accessible: only the software runtime's blocks are touched). */
      if (sim) memset((void*)(uintptr_t)slabs[lane], lane, 2u << 20);
      got++;
    }
  }
  printf("  DEVMEM: 16 lanes asked for 2 MiB each: %d slabs (lane 0 at %#" PRIx64 ")", got, slabs[0]);
  if (sim) printf(", %" PRIu64 " pool blocks live", live.pool_allocations);
  printf("\n");
  if (rc == DEVICE_SIM_OK) rc = device_sim_devmem_request(buffer, 0xFF, slabs, zero, answers, 0);
  if (sim && get_live(&live)) {
    printf("  DEVMEM: lanes 0-7 freed theirs: %" PRIu64 " pool blocks live\n", live.pool_allocations);
  }
  return rc == DEVICE_SIM_OK && got == 16 ? 0 : 1;
}

static int demo_hostcall(void) {
  printf("== hostcall: simulated GPU waves calling host functions\n");
  const uint32_t packets = 64;
  size_t size = getHostcallBufferSize(packets);
  uint32_t alignment = getHostcallBufferAlignment();
  void* buffer = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
  if (!buffer) return 1;
  memset(buffer, 0, size);
  printf("  buffer for %u packets: %zu bytes, alignment %u\n", packets, size, alignment);
  if (!enableHostcalls(buffer, packets, buffer)) {
    fprintf(stderr, "demo: enableHostcalls failed (AMD_LOG_LEVEL=1 says why)\n");
    free(buffer);
    return 1;
  }
  void* buffers[1] = {buffer};
  device_sim_waves_config_t config = device_sim_waves_config(
      buffers, 1, 8, 2000, 2026, 10ull * 1000 * 1000 * 1000);
  device_sim_waves_result_t result;
  int rc = device_sim_run_waves(&config, &result);
  double seconds = (double)result.elapsed_ns / 1e9;
  printf("  %u waves x %u calls: %" PRIu64 " calls served (%" PRIu64
         " lane requests), %" PRIu64 " wrong answers, %" PRIu64 " errors, %.1f ms, %.0f calls/s\n",
         config.waves, config.calls_per_wave, result.calls, result.lanes_served, result.mismatches,
         result.errors, seconds * 1e3, seconds > 0 ? (double)result.calls / seconds : 0.0);
  if (rc != 0) printf("  first failure: %s\n", result.first_failure);
  if (rc == 0) rc = demo_printf(buffer);
  if (rc == 0) rc = demo_custom_service(buffer);
  if (rc == 0) rc = demo_devmem(buffer);
  disableHostcalls(buffer, buffer);
  print_live("after disableHostcalls (DEVMEM blocks the lanes left are freed)");
  demo_live_t after;
  if (get_live(&after) && after.pool_allocations != 0) {
    printf("  DEVMEM: %" PRIu64 " blocks leaked\n", after.pool_allocations);
    rc = 1;
  }
  free(buffer);
  return rc == 0 ? 0 : 1;
}

/* The same waves and printf over a phase-bit buffer: what a runtime does when
 * its kernels were built against device libraries using the phase-bit
 * protocol (USE_NEW_HOSTCALL_IMPL). The occupancy bitmap stands for the
 * device memory the runtime allocates beside the buffer. */
static int demo_phase_bit(void) {
  printf("== hostcall, phase-bit protocol: the same waves and printf\n");
  const uint32_t packets = 16;
  const uint32_t protocol = AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT;
  size_t size = amdgpu_dropin_hostcall_buffer_size(protocol, packets);
  size_t bitmap_size = amdgpu_dropin_hostcall_occupancy_size(packets);
  void* buffer = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
  uint32_t* bitmap = calloc(1, bitmap_size);
  if (!buffer || !bitmap || !device_sim_phase_attach(buffer)) {
    free(buffer);
    free(bitmap);
    return 1;
  }
  memset(buffer, 0, size);
  printf("  buffer for %u packets: %zu bytes, alignment %u, occupancy bitmap %zu bytes\n", packets, size,
         amdgpu_dropin_hostcall_buffer_alignment(protocol), bitmap_size);
  amdgpu_dropin_hostcall_status_t status = amdgpu_dropin_hostcall_enable(buffer, packets, buffer, protocol, bitmap);
  if (status != AMDGPU_DROPIN_HOSTCALL_OK) {
    fprintf(stderr, "demo: amdgpu_dropin_hostcall_enable: %s\n", amdgpu_dropin_hostcall_status_string(status));
    device_sim_phase_detach(buffer);
    free(buffer);
    free(bitmap);
    return 1;
  }
  void* buffers[1] = {buffer};
  device_sim_waves_config_t config = device_sim_waves_config(buffers, 1, 8, 2000, 2027, 10ull * 1000 * 1000 * 1000);
  device_sim_waves_result_t result;
  int rc = device_sim_run_waves(&config, &result);
  double seconds = (double)result.elapsed_ns / 1e9;
  printf("  %u waves x %u calls: %" PRIu64 " calls served, %" PRIu64 " wrong answers, %" PRIu64
         " errors, %.1f ms, %.0f calls/s; doorbell rung %" PRIu64 " times, %" PRIu64 " rings throttled\n",
         config.waves, config.calls_per_wave, result.calls, result.mismatches, result.errors, seconds * 1e3,
         seconds > 0 ? (double)result.calls / seconds : 0.0, device_sim_phase_rings(),
         device_sim_phase_throttled());
  if (rc != 0) printf("  first failure: %s\n", result.first_failure);
  if (rc == 0) rc = demo_printf(buffer);
  if (amdgpu_dropin_hostcall_disable(buffer, buffer) != AMDGPU_DROPIN_HOSTCALL_OK) rc = 1;
  device_sim_phase_detach(buffer);
  free(buffer);
  free(bitmap);
  return rc == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  bool want_system = argc > 1 && strcmp(argv[1], "--system-hsa") == 0;
  /* Which library provides HSA (the system ROCr or the built-in one). */
  bool is_sim = dlsym(RTLD_DEFAULT, "hsa_sim_get_live") != NULL;
  printf("amdgpu-dropin demo on %s (%s)\n",
         is_sim ? "the built-in software HSA runtime" : "the system ROCr", system_hsa_library());
  if (want_system && is_sim) {
    fprintf(stderr, "demo: --system-hsa asked but no system ROCr was found on the library path\n");
    return 1;
  }
  /* The vmem half needs every function of IREE's HSA table; the hostcall
   * half only HSA signals. The built-in runtime has everything: anything
   * missing there is a failure; on a system ROCr it is a reason to skip. */
  const char* missing = NULL;
  bool vmem_api = iree_test_libhsa_initialize(&g_libhsa, &missing);
  if (!vmem_api && is_sim) {
    fprintf(stderr, "demo: the software HSA runtime lacks %s\n", missing);
    return 1;
  }
  if (!vmem_api) system_hsa_has_vmem_api("demo");
  hsa_status_t status = hsa_init();
  if (status != HSA_STATUS_SUCCESS) {
    system_hsa_explain_init_failure("demo", status);
    if (is_sim) return 1;
    printf("demo: SKIPPED: neither half can run without an initialized HSA runtime\n");
    return SYSTEM_HSA_SKIP;
  }
  hsa_iterate_agents(collect_agent, NULL);
  printf("agents: %zu CPU, %zu GPU\n", g_topology.cpu_agent_count, g_topology.gpu_agent_count);
  int rc = 0;
  if (!vmem_api) {
    printf("demo: vmem part skipped (see above)\n");
  } else if (!is_sim && g_topology.gpu_agent_count == 0) {
    printf("demo: vmem part skipped: ROCr found no GPU agent\n");
  } else {
    rc = g_topology.cpu_agent_count ? demo_vmem() : 1;
  }
  if (rc == 0) rc = demo_hostcall();
  if (rc == 0) rc = demo_phase_bit();
  hsa_shut_down();
  printf("%s\n", rc == 0 ? "demo: OK" : "demo: FAILED");
  return rc;
}
