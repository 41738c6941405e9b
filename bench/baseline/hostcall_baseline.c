/* libhostcall_baseline: the benchmark's reference listener, our own C
 * implementation of the strategy ROCclr's hostcall listener followed in
 * 2019-20, exporting the same four functions as the product library
 * (getHostcallBufferSize, getHostcallBufferAlignment, enableHostcalls,
 * disableHostcalls). The benchmark dlopens it (RTLD_LOCAL) next to the
 * product library and calls each through its own handle, so both listeners
 * are measured in one process and one run. It is never part of the product.
 *
 * The strategy (docs/listener.md#upstreams-listener), which is what the benchmark compares against:
 *
 *  * one process-wide listener thread, started by the first enableHostcalls,
 *    and one doorbell signal (hsa_signal_create(1, 0, NULL, &s)) shared by
 *    every buffer;
 *  * the thread blocks on the doorbell until its value differs from the last
 *    value seen (HSA_WAIT_STATE_BLOCKED, 1 ms timeout); a timeout without a
 *    change goes straight back to waiting: packets are served only when the
 *    value changed;
 *  * on a change it takes one global lock and, under it, walks every
 *    registered buffer: detaches its ready stack (exchange with 0) and
 *    serves each packet of the chain (docs/protocols.md#classic-host-steps), running the services under
 *    the lock; enable and disable take the same lock;
 *  * a doorbell value of 0 tells the thread to exit; the last
 *    disableHostcalls stores 0, joins the thread and destroys the signal.
 *
 * Services: FUNCTION_CALL only (the benchmark's traffic). Any other service
 * id is answered by clearing READY without touching the payload (upstream
 * aborts the process; a benchmark has no use for that). Two guards upstream
 * lacks, neither on the measured fast path's critical section: a tagged
 * pointer whose index is not below the packet count ends the walk, and so
 * does a chain longer than the packet count. The registry, the lifetime and
 * the serving code are shared with the other reference listeners
 * (baseline_common.c).
 *
 * The thread is named "amdgpu-hc-base" so the benchmark finds its CPU time. */
#define _GNU_SOURCE
#include "baseline_common.h"

BASELINE_EXPORTS

static void* listener_main(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), baseline_strategy.thread_name);
  uint64_t timeout = baseline_timestamp_frequency() / 1000u; /* 1 ms */
  hsa_signal_value_t seen = BASELINE_SIGNAL_INIT;
  for (;;) {
    hsa_signal_value_t value;
    do {
      value = hsa_signal_wait_scacquire(baseline_doorbell, HSA_SIGNAL_CONDITION_NE, seen, timeout,
                                        HSA_WAIT_STATE_BLOCKED);
    } while (value == seen);
    seen = value;
    if (value == BASELINE_SIGNAL_DONE) break;
    pthread_mutex_lock(&baseline_lock);
    for (uint32_t i = 0; i < baseline_count; ++i) baseline_serve_classic(&baseline_buffers[i]);
    pthread_mutex_unlock(&baseline_lock);
  }
  return NULL;
}

const baseline_strategy_t baseline_strategy = {"amdgpu-hc-base", listener_main};
