/*
 * Software HSA runtime: the table functions that do not return a status and
 * act on objects this runtime never creates.
 *
 * Queues: hsa_queue_create is a stub that fails, so no valid hsa_queue_t
 * exists and every queue index operation is a call with a queue the runtime
 * did not make (undefined in ROCr, which dereferences it). Here they read
 * nothing through the pointer: loads, CAS and add return 0, stores do
 * nothing, and the first call of each is reported on stderr.
 *
 * Multi-signal waits (hsa_amd_signal_wait_all/any) are not simulated: they
 * return UINT32_MAX at once, ROCr's "no signal satisfied" result, and are
 * reported on stderr the first time.
 *
 * Each function counts its calls (hsa_sim_call_count) like every export.
 */
#include <stdio.h>

#include "hsa_sim_internal.h"

static _Atomic bool g_reported[SIM_FN_COUNT];

static void sim_unsupported(sim_fn_t fn, const char* what) {
  sim_count_call(fn);
  /* relaxed: only deduplicates a diagnostic. */
  if (!atomic_exchange_explicit(&g_reported[fn], true, memory_order_relaxed)) {
    fprintf(stderr, "hsa_sim: %s called: %s\n", sim_fn_name(fn), what);
  }
}

#define SIM_NO_QUEUE "no queue exists in this runtime (hsa_queue_create fails)"

#define SIM_QUEUE_LOAD_(name)                          \
  HSA_API uint64_t name(const void* queue);            \
  HSA_API uint64_t name(const void* queue) {           \
    (void)queue;                                       \
    sim_unsupported(SIM_FN_##name, SIM_NO_QUEUE);      \
    return 0;                                          \
  }
#define SIM_QUEUE_STORE_(name)                                \
  HSA_API void name(const void* queue, uint64_t value);       \
  HSA_API void name(const void* queue, uint64_t value) {      \
    (void)queue;                                              \
    (void)value;                                              \
    sim_unsupported(SIM_FN_##name, SIM_NO_QUEUE);             \
  }
#define SIM_QUEUE_CAS_(name)                                                 \
  HSA_API uint64_t name(const void* queue, uint64_t expected, uint64_t value); \
  HSA_API uint64_t name(const void* queue, uint64_t expected, uint64_t value) { \
    (void)queue;                                                             \
    (void)expected;                                                          \
    (void)value;                                                             \
    sim_unsupported(SIM_FN_##name, SIM_NO_QUEUE);                            \
    return 0;                                                                \
  }
#define SIM_QUEUE_ADD_(name)                                   \
  HSA_API uint64_t name(const void* queue, uint64_t value);    \
  HSA_API uint64_t name(const void* queue, uint64_t value) {   \
    (void)queue;                                               \
    (void)value;                                               \
    sim_unsupported(SIM_FN_##name, SIM_NO_QUEUE);              \
    return 0;                                                  \
  }

SIM_QUEUE_LOAD_(hsa_queue_load_read_index_scacquire)
SIM_QUEUE_LOAD_(hsa_queue_load_read_index_relaxed)
SIM_QUEUE_LOAD_(hsa_queue_load_write_index_relaxed)
SIM_QUEUE_LOAD_(hsa_queue_load_write_index_scacquire)
SIM_QUEUE_STORE_(hsa_queue_store_write_index_relaxed)
SIM_QUEUE_STORE_(hsa_queue_store_write_index_screlease)
SIM_QUEUE_CAS_(hsa_queue_cas_write_index_scacq_screl)
SIM_QUEUE_CAS_(hsa_queue_cas_write_index_scacquire)
SIM_QUEUE_CAS_(hsa_queue_cas_write_index_relaxed)
SIM_QUEUE_CAS_(hsa_queue_cas_write_index_screlease)
SIM_QUEUE_ADD_(hsa_queue_add_write_index_scacq_screl)
SIM_QUEUE_ADD_(hsa_queue_add_write_index_scacquire)
SIM_QUEUE_ADD_(hsa_queue_add_write_index_relaxed)
SIM_QUEUE_ADD_(hsa_queue_add_write_index_screlease)
SIM_QUEUE_STORE_(hsa_queue_store_read_index_relaxed)
SIM_QUEUE_STORE_(hsa_queue_store_read_index_screlease)

#define SIM_MULTI_WAIT_(name)                                                \
  HSA_API uint32_t name(uint32_t signal_count, hsa_signal_t* signals,        \
                        hsa_signal_condition_t* conditions,                  \
                        hsa_signal_value_t* compare_values,                  \
                        uint64_t timeout_hint, hsa_wait_state_t wait_hint,   \
                        hsa_signal_value_t* satisfying_values);              \
  HSA_API uint32_t name(uint32_t signal_count, hsa_signal_t* signals,        \
                        hsa_signal_condition_t* conditions,                  \
                        hsa_signal_value_t* compare_values,                  \
                        uint64_t timeout_hint, hsa_wait_state_t wait_hint,   \
                        hsa_signal_value_t* satisfying_values) {             \
    (void)signal_count;                                                      \
    (void)signals;                                                           \
    (void)conditions;                                                        \
    (void)compare_values;                                                    \
    (void)timeout_hint;                                                      \
    (void)wait_hint;                                                         \
    (void)satisfying_values;                                                 \
    sim_unsupported(SIM_FN_##name, "multi-signal waits are not simulated");  \
    return UINT32_MAX;                                                       \
  }

SIM_MULTI_WAIT_(hsa_amd_signal_wait_all)
SIM_MULTI_WAIT_(hsa_amd_signal_wait_any)
