/*
 * Internal interfaces shared by the software HSA runtime's translation units.
 * Everything declared here has hidden visibility: the library exports only
 * HSA API names and the hsa_sim_* control API.
 */
#ifndef AMDGPU_DROPIN_HSA_SIM_INTERNAL_H_
#define AMDGPU_DROPIN_HSA_SIM_INTERNAL_H_

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hsa_sim.h"
#include "hsa_sim_functions.inc"

#define SIM_HIDDEN __attribute__((visibility("hidden")))

/* One id per exported HSA function (SIM_FN_hsa_init, ...). */
typedef enum {
#define SIM_FN_ID_(name) SIM_FN_##name,
  HSA_SIM_FUNCTIONS(SIM_FN_ID_, SIM_FN_ID_)
#undef SIM_FN_ID_
  SIM_FN_COUNT
} sim_fn_t;

SIM_HIDDEN const char* sim_fn_name(sim_fn_t fn);

/* Agents are numbered 0 (the CPU) .. gpu_count. */
#define SIM_MAX_AGENTS (1 + HSA_SIM_MAX_GPUS)

/* The configuration the current initialization was built from. Written only
 * while the reference count is 0 (under the state lock) and published by the
 * release store of the reference count, so readers that saw
 * sim_initialized() == true may read it without a lock. */
SIM_HIDDEN extern hsa_sim_config_t sim_active_config;

/* The state lock: vmem objects, signal slot allocation, init/shutdown. */
SIM_HIDDEN void sim_lock(void);
SIM_HIDDEN void sim_unlock(void);

SIM_HIDDEN bool sim_initialized(void);

/* hsa_init's reference count (hsa_sim_lifetime.c writes it, under the state
 * lock); the release store that makes it non-zero publishes
 * sim_active_config to readers that load it with acquire (sim_initialized). */
SIM_HIDDEN extern _Atomic uint32_t sim_refcount;
SIM_HIDDEN uint32_t sim_agent_count(void);

/* Decodes an agent handle; false when invalid (or not initialized). */
SIM_HIDDEN bool sim_agent_index(hsa_agent_t agent, uint32_t* out_index);
SIM_HIDDEN hsa_agent_t sim_agent_handle(uint32_t index);

/* Decodes a pool handle; false when invalid (or not initialized). */
SIM_HIDDEN bool sim_pool_lookup(hsa_amd_memory_pool_t pool,
                                uint32_t* out_agent_index,
                                const hsa_sim_pool_desc_t** out_desc);

/* Counts a call of fn (every exported function does this). */
SIM_HIDDEN void sim_count_call(sim_fn_t fn);

/* Prologue of a status-returning function: counts the call and consumes a
 * pending injected fault. Returns true (and the status to return) when the
 * call must fail without doing anything. */
SIM_HIDDEN bool sim_enter(sim_fn_t fn, hsa_status_t* out_injected);

/* Epilogue: records the call in the trace when tracing is on; returns result. */
SIM_HIDDEN hsa_status_t sim_leave(sim_fn_t fn, hsa_status_t result,
                                  const uint64_t args[6],
                                  const hsa_amd_memory_access_desc_t* descs,
                                  size_t desc_count);

/* Live counters, updated under the state lock by vmem and signals. */
SIM_HIDDEN extern hsa_sim_live_t sim_live;

/* Called under the state lock when the reference count drops to 0: release
 * every object, adding what was released to *leaked. */
SIM_HIDDEN void sim_vmem_shutdown(hsa_sim_live_t* leaked);
SIM_HIDDEN void sim_signal_shutdown(hsa_sim_live_t* leaked);
SIM_HIDDEN void sim_pool_memory_shutdown(hsa_sim_live_t* leaked);

SIM_HIDDEN uint64_t sim_now_ns(void);

#define SIM_U64(x) ((uint64_t)(uintptr_t)(x))

#endif /* AMDGPU_DROPIN_HSA_SIM_INTERNAL_H_ */
