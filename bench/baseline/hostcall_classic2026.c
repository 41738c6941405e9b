/* libhostcall_classic2026: the benchmark's reference listener for the
 * strategy of ROCclr's classic (ready-stack) hostcall listener as of 2026,
 * our own C implementation (see bench/README.md, "The listeners"):
 *
 *  * one listener thread and one doorbell signal for all buffers, as the
 *    2019-20 strategy;
 *  * it blocks on the doorbell until its value differs from the last one
 *    seen, with a timeout of 4 Mi ticks of the runtime's timestamp clock;
 *    each wait that times out doubles the next timeout, up to 16 Mi ticks;
 *    each change halves it, never below 4 Mi;
 *  * it serves every registered buffer under one global lock when the value
 *    changed, and also after a timeout while any buffer is registered (the
 *    2026 fix for rings lost on some GPUs, TheRock#6357), so a lost ring
 *    waits at most one timeout;
 *  * the doorbell's value 0 tells it to exit.
 *
 * Services: FUNCTION_CALL only, as the 2019-20 baseline. The thread is named
 * "amdgpu-hc-c2026". */
#define _GNU_SOURCE
#include "baseline_common.h"

BASELINE_EXPORTS

#define TIMEOUT_FLOOR (4u * BASELINE_MI)
#define TIMEOUT_CEIL (16u * BASELINE_MI)

static void* listener_main(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), baseline_strategy.thread_name);
  uint64_t timeout = TIMEOUT_FLOOR;
  hsa_signal_value_t seen = BASELINE_SIGNAL_INIT;
  for (;;) {
    hsa_signal_value_t value = hsa_signal_wait_scacquire(
        baseline_doorbell, HSA_SIGNAL_CONDITION_NE, seen, timeout, HSA_WAIT_STATE_BLOCKED);
    if (value != seen) {
      seen = value;
      timeout /= 2;
      if (timeout < TIMEOUT_FLOOR) timeout = TIMEOUT_FLOOR;
    } else {
      timeout *= 2;
      if (timeout > TIMEOUT_CEIL) timeout = TIMEOUT_CEIL;
    }
    if (seen == BASELINE_SIGNAL_DONE) break;
    pthread_mutex_lock(&baseline_lock);
    for (uint32_t i = 0; i < baseline_count; ++i) baseline_serve_classic(&baseline_buffers[i]);
    pthread_mutex_unlock(&baseline_lock);
  }
  return NULL;
}

const baseline_strategy_t baseline_strategy = {"amdgpu-hc-c2026", listener_main};
