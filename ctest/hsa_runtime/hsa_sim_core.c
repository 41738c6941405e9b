/*
 * Software HSA runtime: its shared state (locks, the reference count, the
 * active configuration, live counts), agents, memory pools, status strings,
 * system information, and the control API (call counts, fault injection,
 * trace). Initialization, configuration and shutdown are
 * hsa_sim_lifetime.c's.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hsa_sim_internal.h"

/* ---- Function names -------------------------------------------------------- */

static const char* const g_fn_names[SIM_FN_COUNT] = {
#define SIM_FN_NAME_(name) #name,
    HSA_SIM_FUNCTIONS(SIM_FN_NAME_, SIM_FN_NAME_)
#undef SIM_FN_NAME_
};

const char* sim_fn_name(sim_fn_t fn) {
  return (unsigned)fn < SIM_FN_COUNT ? g_fn_names[fn] : "?";
}

static int sim_fn_lookup(const char* name) {
  if (name == NULL) return -1;
  for (int i = 0; i < SIM_FN_COUNT; ++i) {
    if (strcmp(g_fn_names[i], name) == 0) return i;
  }
  return -1;
}

/* ---- State ------------------------------------------------------------------ */

static pthread_mutex_t g_state_lock = PTHREAD_MUTEX_INITIALIZER;
/* Protects fault injection and the trace (never held with g_state_lock
 * taken after it). */
static pthread_mutex_t g_meta_lock = PTHREAD_MUTEX_INITIALIZER;

void sim_lock(void) { pthread_mutex_lock(&g_state_lock); }
void sim_unlock(void) { pthread_mutex_unlock(&g_state_lock); }

/* fork: both locks are taken before and released after (in parent and
 * child), so a child never inherits one held by a thread it does not have
 * (the order is the one the code nests them in: state, then meta). A child
 * then uses the parent's runtime state as its own, as a forked child of a
 * process with a working runtime would have to. */
static void sim_before_fork(void) {
  pthread_mutex_lock(&g_state_lock);
  pthread_mutex_lock(&g_meta_lock);
}
static void sim_after_fork(void) {
  pthread_mutex_unlock(&g_meta_lock);
  pthread_mutex_unlock(&g_state_lock);
}
__attribute__((constructor)) static void sim_install_fork_handlers(void) {
  pthread_atfork(sim_before_fork, sim_after_fork, sim_after_fork);
}

/* hsa_init reference count (hsa_sim_internal.h). */
_Atomic uint32_t sim_refcount;

hsa_sim_config_t sim_active_config;
hsa_sim_live_t sim_live;

bool sim_initialized(void) {
  /* acquire: pairs with the release store in hsa_init, so the configuration
   * written before it is visible. */
  return atomic_load_explicit(&sim_refcount, memory_order_acquire) != 0;
}

uint64_t sim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- Call counts, faults, trace ----------------------------------------- */

/* One cache line per counter: signal operations are counted from many
 * threads at once. */
typedef struct {
  _Alignas(64) _Atomic uint64_t calls;
} sim_counter_t;
static sim_counter_t g_calls[SIM_FN_COUNT];

typedef struct {
  uint32_t countdown; /* 0: not armed */
  hsa_status_t status;
} sim_fault_t;
static sim_fault_t g_faults[SIM_FN_COUNT]; /* under g_meta_lock */
/* Number of armed faults; lets the common path skip the lock. Written under
 * g_meta_lock. */
static _Atomic uint32_t g_faults_armed;

#define SIM_TRACE_CHUNK 1024u
#define SIM_TRACE_MAX_CHUNKS 64u
static hsa_sim_trace_entry_t* g_trace_chunks[SIM_TRACE_MAX_CHUNKS];
static size_t g_trace_count;                 /* under g_meta_lock */
static _Atomic bool g_trace_on;

void sim_count_call(sim_fn_t fn) {
  /* relaxed: a statistic; readers need no ordering with other memory. */
  atomic_fetch_add_explicit(&g_calls[fn].calls, 1, memory_order_relaxed);
}

bool sim_enter(sim_fn_t fn, hsa_status_t* out_injected) {
  sim_count_call(fn);
  /* relaxed: a hint only; the decision is taken under g_meta_lock. A fault
   * armed concurrently with this call may or may not apply to it. */
  if (atomic_load_explicit(&g_faults_armed, memory_order_relaxed) == 0) {
    return false;
  }
  bool fire = false;
  pthread_mutex_lock(&g_meta_lock);
  sim_fault_t* f = &g_faults[fn];
  if (f->countdown != 0) {
    if (--f->countdown == 0) {
      fire = true;
      *out_injected = f->status;
      atomic_fetch_sub_explicit(&g_faults_armed, 1, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&g_meta_lock);
  return fire;
}

hsa_status_t sim_leave(sim_fn_t fn, hsa_status_t result, const uint64_t args[6],
                       const hsa_amd_memory_access_desc_t* descs,
                       size_t desc_count) {
  /* relaxed: enabling is not synchronized with calls in flight. */
  if (!atomic_load_explicit(&g_trace_on, memory_order_relaxed)) return result;
  pthread_mutex_lock(&g_meta_lock);
  size_t chunk = g_trace_count / SIM_TRACE_CHUNK;
  if (chunk < SIM_TRACE_MAX_CHUNKS) {
    if (g_trace_chunks[chunk] == NULL) {
      g_trace_chunks[chunk] = calloc(SIM_TRACE_CHUNK, sizeof(hsa_sim_trace_entry_t));
    }
    if (g_trace_chunks[chunk] != NULL) {
      hsa_sim_trace_entry_t* e =
          &g_trace_chunks[chunk][g_trace_count % SIM_TRACE_CHUNK];
      memset(e, 0, sizeof(*e));
      e->function = g_fn_names[fn];
      e->result = result;
      if (args != NULL) memcpy(e->args, args, sizeof(e->args));
      if (descs != NULL) {
        size_t n = desc_count < HSA_SIM_TRACE_MAX_DESCS ? desc_count
                                                        : HSA_SIM_TRACE_MAX_DESCS;
        memcpy(e->descs, descs, n * sizeof(*descs));
        e->desc_count = (uint32_t)n;
      }
      ++g_trace_count;
    }
  }
  pthread_mutex_unlock(&g_meta_lock);
  return result;
}

HSA_API void hsa_sim_fail_nth_call(const char* function, uint32_t nth,
                                   hsa_status_t status) {
  int fn = sim_fn_lookup(function);
  if (fn < 0) {
    fprintf(stderr, "hsa_sim: hsa_sim_fail_nth_call: unknown function '%s'\n",
            function ? function : "(null)");
    return;
  }
  pthread_mutex_lock(&g_meta_lock);
  sim_fault_t* f = &g_faults[fn];
  if (f->countdown != 0) {
    atomic_fetch_sub_explicit(&g_faults_armed, 1, memory_order_relaxed);
  }
  f->countdown = nth;
  f->status = status;
  if (nth != 0) atomic_fetch_add_explicit(&g_faults_armed, 1, memory_order_relaxed);
  pthread_mutex_unlock(&g_meta_lock);
}

HSA_API void hsa_sim_clear_faults(void) {
  pthread_mutex_lock(&g_meta_lock);
  memset(g_faults, 0, sizeof(g_faults));
  atomic_store_explicit(&g_faults_armed, 0, memory_order_relaxed);
  pthread_mutex_unlock(&g_meta_lock);
}

HSA_API uint64_t hsa_sim_call_count(const char* function) {
  int fn = sim_fn_lookup(function);
  if (fn < 0) return 0;
  if (fn == SIM_FN_hsa_signal_load_scacquire || fn == SIM_FN_hsa_signal_load_relaxed) {
    fprintf(stderr, "hsa_sim: hsa_sim_call_count: %s is not counted\n", function);
    return HSA_SIM_NOT_COUNTED;
  }
  /* relaxed: see sim_count_call. */
  return atomic_load_explicit(&g_calls[fn].calls, memory_order_relaxed);
}

HSA_API void hsa_sim_reset_call_counts(void) {
  for (int i = 0; i < SIM_FN_COUNT; ++i) {
    atomic_store_explicit(&g_calls[i].calls, 0, memory_order_relaxed);
  }
}

HSA_API void hsa_sim_trace_enable(bool on) {
  atomic_store_explicit(&g_trace_on, on, memory_order_relaxed);
}

HSA_API void hsa_sim_trace_clear(void) {
  pthread_mutex_lock(&g_meta_lock);
  g_trace_count = 0;
  pthread_mutex_unlock(&g_meta_lock);
}

HSA_API size_t hsa_sim_trace_count(void) {
  pthread_mutex_lock(&g_meta_lock);
  size_t n = g_trace_count;
  pthread_mutex_unlock(&g_meta_lock);
  return n;
}

HSA_API const hsa_sim_trace_entry_t* hsa_sim_trace_get(size_t i) {
  const hsa_sim_trace_entry_t* e = NULL;
  pthread_mutex_lock(&g_meta_lock);
  if (i < g_trace_count) {
    e = &g_trace_chunks[i / SIM_TRACE_CHUNK][i % SIM_TRACE_CHUNK];
  }
  pthread_mutex_unlock(&g_meta_lock);
  return e;
}

HSA_API void hsa_sim_get_live(hsa_sim_live_t* out) {
  if (out == NULL) return;
  sim_lock();
  *out = sim_live;
  sim_unlock();
}

/* ---- Status strings ------------------------------------------------------ */

typedef struct {
  hsa_status_t status;
  const char* text;
} sim_status_text_t;

static const sim_status_text_t g_status_texts[] = {
    {HSA_STATUS_SUCCESS, "HSA_STATUS_SUCCESS: the call succeeded."},
    {HSA_STATUS_INFO_BREAK, "HSA_STATUS_INFO_BREAK: a callback stopped the iteration."},
    {HSA_STATUS_ERROR, "HSA_STATUS_ERROR: generic failure."},
    {HSA_STATUS_ERROR_INVALID_ARGUMENT, "HSA_STATUS_ERROR_INVALID_ARGUMENT: an argument is not valid."},
    {HSA_STATUS_ERROR_INVALID_QUEUE_CREATION, "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: the queue cannot be created."},
    {HSA_STATUS_ERROR_INVALID_ALLOCATION, "HSA_STATUS_ERROR_INVALID_ALLOCATION: the allocation is not valid."},
    {HSA_STATUS_ERROR_INVALID_AGENT, "HSA_STATUS_ERROR_INVALID_AGENT: the agent is not valid."},
    {HSA_STATUS_ERROR_INVALID_REGION, "HSA_STATUS_ERROR_INVALID_REGION: the region is not valid."},
    {HSA_STATUS_ERROR_INVALID_SIGNAL, "HSA_STATUS_ERROR_INVALID_SIGNAL: the signal is not valid."},
    {HSA_STATUS_ERROR_INVALID_QUEUE, "HSA_STATUS_ERROR_INVALID_QUEUE: the queue is not valid."},
    {HSA_STATUS_ERROR_OUT_OF_RESOURCES, "HSA_STATUS_ERROR_OUT_OF_RESOURCES: the runtime ran out of a resource."},
    {HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: the packet is malformed."},
    {HSA_STATUS_ERROR_RESOURCE_FREE, "HSA_STATUS_ERROR_RESOURCE_FREE: the resource is still in use and cannot be freed."},
    {HSA_STATUS_ERROR_NOT_INITIALIZED, "HSA_STATUS_ERROR_NOT_INITIALIZED: the runtime is not initialized."},
    {HSA_STATUS_ERROR_REFCOUNT_OVERFLOW, "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW: the reference count overflowed."},
    {HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS, "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: the arguments do not fit together."},
    {HSA_STATUS_ERROR_INVALID_INDEX, "HSA_STATUS_ERROR_INVALID_INDEX: the index is not valid."},
    {HSA_STATUS_ERROR_INVALID_ISA, "HSA_STATUS_ERROR_INVALID_ISA: the instruction set is not valid."},
    {HSA_STATUS_ERROR_INVALID_ISA_NAME, "HSA_STATUS_ERROR_INVALID_ISA_NAME: the instruction set name is not valid."},
    {HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT: the code object is not valid."},
    {HSA_STATUS_ERROR_INVALID_EXECUTABLE, "HSA_STATUS_ERROR_INVALID_EXECUTABLE: the executable is not valid."},
    {HSA_STATUS_ERROR_FROZEN_EXECUTABLE, "HSA_STATUS_ERROR_FROZEN_EXECUTABLE: the executable is frozen."},
    {HSA_STATUS_ERROR_INVALID_SYMBOL_NAME, "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: no symbol has this name."},
    {HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED, "HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED: the variable is already defined."},
    {HSA_STATUS_ERROR_VARIABLE_UNDEFINED, "HSA_STATUS_ERROR_VARIABLE_UNDEFINED: the variable is not defined."},
    {HSA_STATUS_ERROR_EXCEPTION, "HSA_STATUS_ERROR_EXCEPTION: an HSAIL exception was raised."},
    {HSA_STATUS_ERROR_INVALID_CODE_SYMBOL, "HSA_STATUS_ERROR_INVALID_CODE_SYMBOL: the code symbol is not valid."},
    {HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL, "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: the executable symbol is not valid."},
    {HSA_STATUS_ERROR_INVALID_FILE, "HSA_STATUS_ERROR_INVALID_FILE: the file is not valid."},
    {HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: the code object reader is not valid."},
    {HSA_STATUS_ERROR_INVALID_CACHE, "HSA_STATUS_ERROR_INVALID_CACHE: the cache is not valid."},
    {HSA_STATUS_ERROR_INVALID_WAVEFRONT, "HSA_STATUS_ERROR_INVALID_WAVEFRONT: the wavefront is not valid."},
    {HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP, "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP: the signal group is not valid."},
    {HSA_STATUS_ERROR_INVALID_RUNTIME_STATE, "HSA_STATUS_ERROR_INVALID_RUNTIME_STATE: the runtime is in a state that does not allow this."},
    {HSA_STATUS_ERROR_FATAL, "HSA_STATUS_ERROR_FATAL: fatal runtime failure."},
    {(hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL, "HSA_STATUS_ERROR_INVALID_MEMORY_POOL: the memory pool is not valid."},
    {(hsa_status_t)HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION, "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: memory access outside the aperture."},
    {(hsa_status_t)HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION, "HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION: illegal instruction."},
    {(hsa_status_t)HSA_STATUS_ERROR_MEMORY_FAULT, "HSA_STATUS_ERROR_MEMORY_FAULT: memory fault."},
    {(hsa_status_t)HSA_STATUS_CU_MASK_REDUCED, "HSA_STATUS_CU_MASK_REDUCED: the CU mask was reduced."},
    {(hsa_status_t)HSA_STATUS_ERROR_OUT_OF_REGISTERS, "HSA_STATUS_ERROR_OUT_OF_REGISTERS: out of registers."},
    {(hsa_status_t)HSA_STATUS_ERROR_RESOURCE_BUSY, "HSA_STATUS_ERROR_RESOURCE_BUSY: the resource is busy."},
    {(hsa_status_t)HSA_STATUS_ERROR_NOT_SUPPORTED, "HSA_STATUS_ERROR_NOT_SUPPORTED: not supported."},
};

/* Works before hsa_init, as ROCr's does. */
HSA_API hsa_status_t hsa_status_string(hsa_status_t status,
                                       const char** status_string) {
  hsa_status_t result;
  if (!sim_enter(SIM_FN_hsa_status_string, &result)) {
    result = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    if (status_string != NULL) {
      for (size_t i = 0; i < sizeof(g_status_texts) / sizeof(g_status_texts[0]); ++i) {
        if (g_status_texts[i].status == status) {
          *status_string = g_status_texts[i].text;
          result = HSA_STATUS_SUCCESS;
          break;
        }
      }
    }
  }
  uint64_t args[6] = {(uint64_t)status, SIM_U64(status_string), 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_status_string, result, args, NULL, 0);
}

/* ---- System information -------------------------------------------------- */

HSA_API hsa_status_t hsa_system_get_info(hsa_system_info_t attribute,
                                         void* value) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_system_get_info, &status)) {
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (value == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      status = HSA_STATUS_SUCCESS;
      switch ((int)attribute) {
        case HSA_SYSTEM_INFO_VERSION_MAJOR:
          *(uint16_t*)value = 1;
          break;
        case HSA_SYSTEM_INFO_VERSION_MINOR:
          *(uint16_t*)value = 1;
          break;
        case HSA_SYSTEM_INFO_TIMESTAMP:
          *(uint64_t*)value = sim_now_ns();
          break;
        case HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY:
          *(uint64_t*)value = 1000000000ull;
          break;
        case HSA_SYSTEM_INFO_SIGNAL_MAX_WAIT:
          *(uint64_t*)value = UINT64_MAX;
          break;
        case HSA_SYSTEM_INFO_ENDIANNESS:
          *(hsa_endianness_t*)value = HSA_ENDIANNESS_LITTLE;
          break;
        case HSA_SYSTEM_INFO_MACHINE_MODEL:
          *(hsa_machine_model_t*)value = HSA_MACHINE_MODEL_LARGE;
          break;
        default:
          status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
          break;
      }
    }
  }
  uint64_t args[6] = {(uint64_t)attribute, SIM_U64(value), 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_system_get_info, status, args, NULL, 0);
}

/* ---- Agents ---------------------------------------------------------------- */

#define SIM_AGENT_TAG 0xA6E0000000000000ull
#define SIM_POOL_TAG 0x9001000000000000ull
#define SIM_TAG_MASK 0xFFFF000000000000ull

uint32_t sim_agent_count(void) { return 1 + sim_active_config.gpu_count; }

hsa_agent_t sim_agent_handle(uint32_t index) {
  hsa_agent_t a = {SIM_AGENT_TAG | ((uint64_t)index + 1)};
  return a;
}

bool sim_agent_index(hsa_agent_t agent, uint32_t* out_index) {
  if (!sim_initialized()) return false;
  if ((agent.handle & SIM_TAG_MASK) != SIM_AGENT_TAG) return false;
  uint64_t low = agent.handle & ~SIM_TAG_MASK;
  if (low == 0 || low > sim_agent_count()) return false;
  *out_index = (uint32_t)(low - 1);
  return true;
}

static hsa_amd_memory_pool_t sim_pool_handle(uint32_t agent, uint32_t pool) {
  hsa_amd_memory_pool_t p = {SIM_POOL_TAG | ((uint64_t)agent << 16) |
                             ((uint64_t)pool + 1)};
  return p;
}

static const hsa_sim_pool_desc_t* sim_agent_pools(uint32_t agent,
                                                  uint32_t* out_count) {
  if (agent == 0) {
    *out_count = sim_active_config.cpu_pool_count;
    return sim_active_config.cpu_pools;
  }
  *out_count = sim_active_config.gpu_pool_count;
  return sim_active_config.gpu_pools;
}

bool sim_pool_lookup(hsa_amd_memory_pool_t pool, uint32_t* out_agent_index,
                     const hsa_sim_pool_desc_t** out_desc) {
  if (!sim_initialized()) return false;
  if ((pool.handle & SIM_TAG_MASK) != SIM_POOL_TAG) return false;
  uint64_t low = pool.handle & ~SIM_TAG_MASK;
  if ((low >> 32) != 0) return false;
  uint64_t agent = low >> 16;
  uint64_t index = low & 0xFFFF;
  if (agent >= sim_agent_count() || index == 0) return false;
  uint32_t count = 0;
  const hsa_sim_pool_desc_t* pools = sim_agent_pools((uint32_t)agent, &count);
  if (index > count) return false;
  *out_agent_index = (uint32_t)agent;
  *out_desc = &pools[index - 1];
  return true;
}

/* The PCI device id every simulated GPU reports (an MI300X's, matching the
 * gfx942 name): IREE's topology groups GPUs whose vendor, name and chip id
 * agree. */
#define SIM_GPU_CHIP_ID 0x74a1u

/* ROCr's UUID strings: "GPU-" and the 64-bit unique id as 16 lower-case hex
 * digits (21 bytes with the NUL); CPU agents answer "CPU-XX". The simulated
 * unique id is fixed per GPU index and differs between GPUs. */
static void sim_agent_uuid(uint32_t index, char* value) {
  if (index == 0) {
    memcpy(value, "CPU-XX", sizeof("CPU-XX"));
    return;
  }
  const uint64_t unique_id = 0x5157a1e000000000ull | (uint64_t)index;
  snprintf(value, sizeof("GPU-") + 16, "GPU-%016llx",
           (unsigned long long)unique_id);
}

static void sim_copy_name(void* value, const char* name) {
  char buffer[64];
  memset(buffer, 0, sizeof(buffer));
  strncpy(buffer, name, sizeof(buffer) - 1);
  memcpy(value, buffer, sizeof(buffer));
}

HSA_API hsa_status_t hsa_agent_get_info(hsa_agent_t agent,
                                        hsa_agent_info_t attribute,
                                        void* value) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_agent_get_info, &status)) {
    uint32_t index = 0;
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (!sim_agent_index(agent, &index)) {
      status = HSA_STATUS_ERROR_INVALID_AGENT;
    } else if (value == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      bool cpu = index == 0;
      status = HSA_STATUS_SUCCESS;
      switch ((int)attribute) {
        case HSA_AGENT_INFO_NAME:
          sim_copy_name(value, cpu ? "hsa-sim-cpu" : "gfx942");
          break;
        case HSA_AGENT_INFO_VENDOR_NAME:
          sim_copy_name(value, cpu ? "CPU" : "AMD");
          break;
        case HSA_AGENT_INFO_FEATURE:
          *(hsa_agent_feature_t*)value = cpu ? HSA_AGENT_FEATURE_AGENT_DISPATCH
                                             : HSA_AGENT_FEATURE_KERNEL_DISPATCH;
          break;
        case HSA_AGENT_INFO_MACHINE_MODEL:
          *(hsa_machine_model_t*)value = HSA_MACHINE_MODEL_LARGE;
          break;
        case HSA_AGENT_INFO_PROFILE:
          *(hsa_profile_t*)value = cpu ? HSA_PROFILE_FULL : HSA_PROFILE_BASE;
          break;
        case HSA_AGENT_INFO_WAVEFRONT_SIZE:
          *(uint32_t*)value = cpu ? 0 : 64;
          break;
        case HSA_AGENT_INFO_NODE:
          *(uint32_t*)value = index;
          break;
        case HSA_AGENT_INFO_DEVICE:
          *(hsa_device_type_t*)value = cpu ? HSA_DEVICE_TYPE_CPU : HSA_DEVICE_TYPE_GPU;
          break;
        /* AMD attributes IREE's topology reads, with ROCr's answers for a
         * CPU agent. The simulated system is one NUMA node: its CPU agent
         * is every GPU's nearest CPU. */
        case HSA_AMD_AGENT_INFO_NEAREST_CPU:
          *(hsa_agent_t*)value = cpu ? (hsa_agent_t){0} : sim_agent_handle(0);
          break;
        case HSA_AMD_AGENT_INFO_CHIP_ID:
          *(uint32_t*)value = cpu ? 0 : SIM_GPU_CHIP_ID;
          break;
        case HSA_AMD_AGENT_INFO_UUID:
          sim_agent_uuid(index, (char*)value);
          break;
        default:
          status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
          break;
      }
    }
  }
  uint64_t args[6] = {agent.handle, (uint64_t)attribute, SIM_U64(value), 0, 0, 0};
  return sim_leave(SIM_FN_hsa_agent_get_info, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_iterate_agents(
    hsa_status_t (*callback)(hsa_agent_t agent, void* data), void* data) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_iterate_agents, &status)) {
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (callback == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      /* The callback runs without any lock held: it may call back in. */
      status = HSA_STATUS_SUCCESS;
      uint32_t count = sim_agent_count();
      for (uint32_t i = 0; i < count && status == HSA_STATUS_SUCCESS; ++i) {
        status = callback(sim_agent_handle(i), data);
      }
    }
  }
  uint64_t args[6] = {SIM_U64(callback), SIM_U64(data), 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_iterate_agents, status, args, NULL, 0);
}

/* ---- Memory pools ---------------------------------------------------------- */

HSA_API hsa_status_t hsa_amd_agent_iterate_memory_pools(
    hsa_agent_t agent,
    hsa_status_t (*callback)(hsa_amd_memory_pool_t memory_pool, void* data),
    void* data) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_agent_iterate_memory_pools, &status)) {
    uint32_t index = 0;
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (!sim_agent_index(agent, &index)) {
      status = HSA_STATUS_ERROR_INVALID_AGENT;
    } else if (callback == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      status = HSA_STATUS_SUCCESS;
      uint32_t count = 0;
      (void)sim_agent_pools(index, &count);
      for (uint32_t i = 0; i < count && status == HSA_STATUS_SUCCESS; ++i) {
        status = callback(sim_pool_handle(index, i), data);
      }
    }
  }
  uint64_t args[6] = {agent.handle, SIM_U64(callback), SIM_U64(data), 0, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_agent_iterate_memory_pools, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_amd_memory_pool_get_info(
    hsa_amd_memory_pool_t memory_pool, hsa_amd_memory_pool_info_t attribute,
    void* value) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_memory_pool_get_info, &status)) {
    uint32_t agent = 0;
    const hsa_sim_pool_desc_t* d = NULL;
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (!sim_pool_lookup(memory_pool, &agent, &d) || value == NULL) {
      /* A bad pool handle is reported as INVALID_ARGUMENT (documented). */
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      status = HSA_STATUS_SUCCESS;
      switch ((int)attribute) {
        case HSA_AMD_MEMORY_POOL_INFO_SEGMENT:
          *(uint32_t*)value = d->segment;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS:
          *(uint32_t*)value = d->global_flags;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_SIZE:
        case HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE:
          *(size_t*)value = (size_t)d->size;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED:
          *(bool*)value = d->alloc_allowed;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE:
          *(size_t*)value = (size_t)d->alloc_granule;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT:
          *(size_t*)value = (size_t)d->alignment;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE:
          *(size_t*)value = (size_t)d->rec_granule;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL:
          *(bool*)value = agent == 0 && (d->global_flags &
                                         HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) != 0;
          break;
        case HSA_AMD_MEMORY_POOL_INFO_LOCATION:
          *(uint32_t*)value = agent == 0 ? HSA_AMD_MEMORY_POOL_LOCATION_CPU
                                         : HSA_AMD_MEMORY_POOL_LOCATION_GPU;
          break;
        default:
          status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
          break;
      }
    }
  }
  uint64_t args[6] = {memory_pool.handle, (uint64_t)attribute, SIM_U64(value), 0, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_memory_pool_get_info, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_amd_agent_memory_pool_get_info(
    hsa_agent_t agent, hsa_amd_memory_pool_t memory_pool,
    hsa_amd_agent_memory_pool_info_t attribute, void* value) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_agent_memory_pool_get_info, &status)) {
    uint32_t index = 0, owner = 0;
    const hsa_sim_pool_desc_t* d = NULL;
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (!sim_agent_index(agent, &index)) {
      status = HSA_STATUS_ERROR_INVALID_AGENT;
    } else if (!sim_pool_lookup(memory_pool, &owner, &d) || value == NULL ||
               attribute != HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      /* Owner: by default. GPU -> fine-grained system memory: by default;
       * CPU -> coarse-grained device memory: never; anything else needs an
       * explicit grant. */
      hsa_amd_memory_pool_access_t access;
      bool fine = (d->global_flags & (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED |
                                      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED)) != 0;
      if (index == owner) {
        access = HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
      } else if (owner == 0 && fine) {
        access = HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT;
      } else if (index == 0 && !fine) {
        access = HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED;
      } else {
        access = HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT;
      }
      *(hsa_amd_memory_pool_access_t*)value = access;
      status = HSA_STATUS_SUCCESS;
    }
  }
  uint64_t args[6] = {agent.handle, memory_pool.handle, (uint64_t)attribute,
                      SIM_U64(value), 0, 0};
  return sim_leave(SIM_FN_hsa_amd_agent_memory_pool_get_info, status, args, NULL, 0);
}
