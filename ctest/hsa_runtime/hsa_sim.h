/*
 * Control API of the software HSA runtime (libhsa-runtime64.so.1 built from
 * ctest/hsa_runtime/). Tests use it to shape the simulated system, inject
 * failures and observe what the code under test did. Everything here is
 * thread-safe. Not part of the real HSA API: code that must also run on ROCr
 * only uses it when built against the simulator.
 */
#ifndef AMDGPU_DROPIN_HSA_SIM_H_
#define AMDGPU_DROPIN_HSA_SIM_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hsa/hsa.h"
#include "hsa/hsa_ext_amd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Configuration (call before the first hsa_init) ---------------------- */

#define HSA_SIM_MAX_POOLS_PER_AGENT 8
#define HSA_SIM_MAX_GPUS 64
#define HSA_SIM_MAX_SIGNALS 16384

/* One memory pool of an agent. Values are reported verbatim by
 * hsa_amd_memory_pool_get_info, so a granule may be 0 or not a power of two to
 * test how callers handle it. */
typedef struct hsa_sim_pool_desc_s {
  uint32_t segment;      /* hsa_amd_segment_t */
  uint32_t global_flags; /* hsa_amd_memory_pool_global_flag_t bits */
  bool alloc_allowed;    /* RUNTIME_ALLOC_ALLOWED */
  uint64_t size;         /* SIZE (and ALLOC_MAX_SIZE) */
  uint64_t alloc_granule; /* RUNTIME_ALLOC_GRANULE */
  uint64_t rec_granule;   /* RUNTIME_ALLOC_REC_GRANULE */
  uint64_t alignment;     /* RUNTIME_ALLOC_ALIGNMENT */
} hsa_sim_pool_desc_t;

typedef struct hsa_sim_config_s {
  /* Number of GPU agents (0..HSA_SIM_MAX_GPUS). There is always one CPU
   * agent, listed first by hsa_iterate_agents. */
  uint32_t gpu_count;
  /* Pools of the CPU agent, in iteration order. */
  hsa_sim_pool_desc_t cpu_pools[HSA_SIM_MAX_POOLS_PER_AGENT];
  uint32_t cpu_pool_count;
  /* Pools of every GPU agent, in iteration order. */
  hsa_sim_pool_desc_t gpu_pools[HSA_SIM_MAX_POOLS_PER_AGENT];
  uint32_t gpu_pool_count;
  /* Live signals allowed at once (1..HSA_SIM_MAX_SIGNALS, default 4096);
   * creating more fails with HSA_STATUS_ERROR_OUT_OF_RESOURCES. */
  uint32_t max_signals;
} hsa_sim_config_t;

/* Fills *config with the defaults: 2 GPUs (or $HSA_SIM_GPU_COUNT);
 * CPU pools: [0] GLOBAL fine-grained|KERNARG_INIT, [1] GLOBAL coarse-grained;
 * GPU pools: [0] GLOBAL coarse-grained (VRAM), [1] GLOBAL fine-grained,
 * [2] GLOBAL extended-scope fine-grained, [3] GROUP (not allocatable).
 * Allocatable pools: granule 4 KiB, recommended granule 64 KiB, alignment
 * 4 KiB. */
HSA_API void hsa_sim_config_default(hsa_sim_config_t* config);

/* Applies *config for the next hsa_init (the system is built when the
 * reference count goes from 0 to 1). Returns INVALID_ARGUMENT for a NULL or
 * out-of-range config and HSA_STATUS_ERROR_INVALID_RUNTIME_STATE while the
 * runtime is initialized. An explicit configuration wins over
 * $HSA_SIM_GPU_COUNT. */
HSA_API hsa_status_t hsa_sim_configure(const hsa_sim_config_t* config);

/* ---- Fault injection and call counts ------------------------------------ */

/* The nth next call (1-based) of the named HSA function returns `status` and
 * does nothing else (no side effect, no output written). One pending fault per
 * function; arming again replaces it; nth == 0 disarms it. Only functions that
 * return hsa_status_t can fail this way. An unknown name is reported on
 * stderr and ignored. */
HSA_API void hsa_sim_fail_nth_call(const char* function, uint32_t nth,
                                   hsa_status_t status);
HSA_API void hsa_sim_clear_faults(void);

/* Calls of the named HSA function since the process started or the last
 * hsa_sim_reset_call_counts (failed and injected calls included). The
 * signal loads are not counted (a count would cost every look of a thread
 * polling a signal a locked add that ROCr's plain load does not): for them
 * it says so on stderr and returns HSA_SIM_NOT_COUNTED. */
#define HSA_SIM_NOT_COUNTED UINT64_MAX
HSA_API uint64_t hsa_sim_call_count(const char* function);
HSA_API void hsa_sim_reset_call_counts(void);

/* Blocked signal waits (HSA_WAIT_STATE_BLOCKED, any thread) in progress now. */
HSA_API uint32_t hsa_sim_blocked_waits(void);

/* Sleeps blocked signal waits have begun since the process started. A blocked
 * wait polls its first 200 us and any last partial millisecond (as ROCr's),
 * so a wait answered early or one of 1 ms or less never sleeps. */
HSA_API uint64_t hsa_sim_wait_sleeps(void);

/* Futex wakes of blocked waits after which the interrupt-latency delay
 * (hsa_sim_set_wait_wake_delay_us) was applied since the process started;
 * *total_us (if not NULL) gets the sum of the delays applied. Tests check
 * these counts instead of measuring the delays. */
HSA_API uint64_t hsa_sim_wake_delays(uint64_t* total_us);

/* Signal waits (either wait state) that returned because their timeout
 * passed with the condition unmet, since the process started. "Woken, not
 * timed out" is this count unchanged; "timed out" is it moved by one. */
HSA_API uint64_t hsa_sim_wait_timeouts(void);

/* Blocked waits whose condition was found met only in the poll of their last
 * partial millisecond (after their sleeps: a plain memory write that no
 * sleep noticed), since the process started. */
HSA_API uint64_t hsa_sim_wait_final_polls(void);

/* The timeout hints of the signal waits begun since wait number `since`
 * (of the last 64 waits, any thread, oldest first) into out[0..max); returns
 * how many. With out == NULL returns the number of waits begun so far, the
 * `since` of a later call. Tests check the timeouts a listener asks for
 * instead of counting its waits over a stretch of wall-clock time. */
HSA_API uint64_t hsa_sim_recent_wait_timeouts(uint64_t since, uint64_t* out, uint32_t max);

/* ---- Live objects -------------------------------------------------------- */

typedef struct hsa_sim_live_s {
  uint64_t reservations; /* hsa_amd_vmem_address_reserve(_align) not freed */
  uint64_t handles;      /* hsa_amd_vmem_handle_create not released */
  uint64_t mappings;     /* hsa_amd_vmem_map not unmapped */
  uint64_t signals;      /* signals not destroyed */
  uint64_t pool_allocations; /* hsa_amd_memory_pool_allocate not freed */
} hsa_sim_live_t;

HSA_API void hsa_sim_get_live(hsa_sim_live_t* out);
/* What was still live when the last hsa_shut_down dropped the reference count
 * to 0 (the runtime then releases it all, as ROCr does). */
HSA_API void hsa_sim_get_leaked_at_shutdown(hsa_sim_live_t* out);

/* True when `ptr` lies in a live hsa_amd_memory_pool_allocate block that
 * `agent` may access (the pool's owner, or granted by
 * hsa_amd_agents_allow_access). */
HSA_API bool hsa_sim_pool_block_accessible(const void* ptr, hsa_agent_t agent);

/* ---- Call trace ---------------------------------------------------------- */

#define HSA_SIM_TRACE_MAX_DESCS 16

/* One traced call. Traced: every function that returns hsa_status_t
 * (including stubs). Signal load/store/read-modify-write/wait calls are
 * counted but not traced. */
typedef struct hsa_sim_trace_entry_s {
  const char* function; /* static string, the exported name */
  hsa_status_t result;
  /* The call's scalar and pointer arguments in declaration order (handles as
   * their uint64_t, pointers as their address); unused slots are 0. */
  uint64_t args[6];
  /* hsa_amd_vmem_set_access: the descriptors passed (first 16). */
  uint32_t desc_count;
  hsa_amd_memory_access_desc_t descs[HSA_SIM_TRACE_MAX_DESCS];
} hsa_sim_trace_entry_t;

HSA_API void hsa_sim_trace_enable(bool on);
HSA_API void hsa_sim_trace_clear(void);
HSA_API size_t hsa_sim_trace_count(void);
/* Entry i (0-based, in call order) or NULL; valid until hsa_sim_trace_clear. */
HSA_API const hsa_sim_trace_entry_t* hsa_sim_trace_get(size_t i);

/* ---- Signal waits -------------------------------------------------------- */

/* Delay added after a BLOCKED wait is woken by a signal change (models the
 * interrupt latency of a real GPU). Default 0. Kept accurate to a few
 * microseconds: the part longer than this machine's fixed nanosleep cost is
 * slept, the rest waited out with sched_yield. */
HSA_API void hsa_sim_set_wait_wake_delay_us(uint32_t us);
/* On: BLOCKED waits also re-check the value every period_us, so that a plain
 * memory write through hsa_sim_signal_value_ptr is noticed while they sleep.
 * Default off, as ROCr: a blocked wait sleeps until a signal operation wakes
 * it or its timeout ends (it notices a plain write only while it polls). */
HSA_API void hsa_sim_set_periodic_recheck(bool on, uint32_t period_us);

/* How signal waits behave. HSA_SIM_WAIT_ROCR (the default) is ROCr's
 * contract (README.md, "Signal waits"): polls are tight loops without pause
 * or yield, a BLOCKED wait polls its first 200 us and then sleeps in an event
 * wait whose timeout the kernel counts in ticks (hsa_sim_set_event_wait_hz),
 * and a GPU's ring (hsa_sim_signal_add_from_device) costs the ringer no
 * system call. HSA_SIM_WAIT_LEGACY is this runtime's earlier, kinder model,
 * kept only so that the benchmark can name it: a pause in every poll, ACTIVE
 * waits that yield every 1024 spins, exact millisecond sleeps, and rings
 * that wake like host writes. */
typedef enum { HSA_SIM_WAIT_ROCR = 0, HSA_SIM_WAIT_LEGACY = 1 } hsa_sim_wait_model_t;
HSA_API void hsa_sim_set_wait_model(hsa_sim_wait_model_t model);
/* The kernel tick (CONFIG_HZ) event-wait timeouts are counted in: a sleep of
 * N ms that nothing wakes lasts msecs_to_jiffies(N) + 1 ticks, ending on a
 * tick. Default 250; 0 sleeps exactly N ms. */
HSA_API void hsa_sim_set_event_wait_hz(uint32_t hz);
/* What a wave's doorbell ring does (the device library's signal add): a
 * release add of `value`, then the interrupt, which wakes a waiter only if
 * it sleeps in its event wait; a waiter still polling sees the new value by
 * itself. Invalid handles are ignored. */
HSA_API void hsa_sim_signal_add_from_device(hsa_signal_t signal, hsa_signal_value_t value);

/* Whether the simulated kernel driver reports event ages (default: yes, as
 * current ones). Without them, as in ROCr, a wait that starts while another
 * wait on the same signal is in progress spins (is made ACTIVE). */
HSA_API void hsa_sim_set_event_age(bool supported);
/* The signal's value as raw memory (what a GPU writes), or NULL for an
 * invalid handle. Writes through it wake no waiter. */
HSA_API int64_t* hsa_sim_signal_value_ptr(hsa_signal_t signal);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AMDGPU_DROPIN_HSA_SIM_H_ */
