/* libhostcall_phase2026: the benchmark's reference listener for the
 * strategy of ROCclr's phase-bit hostcall listener as of 2026
 * (USE_NEW_HOSTCALL_IMPL), our own C implementation (see bench/README.md,
 * "The listeners"), running the phase-bit protocol:
 *
 *  * one listener thread and one doorbell signal for all buffers;
 *  * each pass takes one global lock and scans every registered buffer's
 *    packets [0, limit): a packet whose device phase differs from its host
 *    phase is served and handed back by flipping the host phase; the limit
 *    narrows to just past the last packet served, and when no buffer served
 *    anything but some limit was narrowed, every limit is reset to the whole
 *    buffer and the thread scans again;
 *  * while a pass served work (or reset a limit) the thread scans again at
 *    once, yielding the CPU every 128 passes;
 *  * when a full scan of every buffer found nothing it blocks on the
 *    doorbell until its value differs from the last one seen, for at most
 *    1 Mi ticks of the runtime's timestamp clock, then scans again whether
 *    or not it changed (on ROCr, a wait that short never sleeps: it polls);
 *  * the doorbell's value 0 tells it to exit.
 *
 * Services: FUNCTION_CALL only. The thread is named "amdgpu-hc-p2026". */
#define _GNU_SOURCE
#include <sched.h>

#include "baseline_common.h"

BASELINE_EXPORTS

#define YIELD_EVERY 128u
#define WAIT_TICKS BASELINE_MI

static void* listener_main(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), baseline_strategy.thread_name);
  hsa_signal_value_t seen = BASELINE_SIGNAL_INIT;
  uint32_t passes = 0;
  for (;;) {
    int result = BASELINE_IDLE_FULL;
    pthread_mutex_lock(&baseline_lock);
    for (uint32_t i = 0; i < baseline_count; ++i) {
      int r = baseline_serve_phase(&baseline_buffers[i]);
      if (r < result) result = r;
    }
    if (result == BASELINE_IDLE_NARROW) {
      for (uint32_t i = 0; i < baseline_count; ++i) {
        baseline_buffers[i].scan_limit = baseline_buffers[i].packets;
      }
    }
    pthread_mutex_unlock(&baseline_lock);
    if (result != BASELINE_IDLE_FULL) {
      if (++passes >= YIELD_EVERY) {
        passes = 0;
        sched_yield();
      }
      continue;
    }
    passes = 0;
    seen = hsa_signal_wait_scacquire(baseline_doorbell, HSA_SIGNAL_CONDITION_NE, seen, WAIT_TICKS,
                                     HSA_WAIT_STATE_BLOCKED);
    if (seen == BASELINE_SIGNAL_DONE) break;
  }
  return NULL;
}

const baseline_strategy_t baseline_strategy = {"amdgpu-hc-p2026", listener_main};
