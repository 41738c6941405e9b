/* libhostcall_floor_doorbell / libhostcall_floor_stack: the benchmark's
 * floor, a minimal listener that spins a core and serves FUNCTION_CALL only
 * on classic buffers (see bench/README.md, "The listeners"). It never
 * blocks and takes the global lock once per 1024 passes (so enable and
 * disable are not shut out), never per request. Two variants, chosen at
 * build time:
 *
 *  * FLOOR_POLL_DOORBELL=1 ("floor-db", thread "amdgpu-hc-fldb"): polls the
 *    doorbell signal's value and, when it changed, serves every buffer (a
 *    wave rings after pushing, so a push that the serve misses comes with a
 *    later change);
 *  * FLOOR_POLL_DOORBELL=0 ("floor-st", thread "amdgpu-hc-flst"): polls each
 *    buffer's ready stack (one relaxed load) and serves a non-empty one. The
 *    ready-stack word shares its cache line with the free-stack top, which
 *    the device CASes on every pop and push.
 *
 * It exits when the last disable sets baseline_stopping. */
#define _GNU_SOURCE
#include "baseline_common.h"

#ifndef FLOOR_POLL_DOORBELL
#error "build with -DFLOOR_POLL_DOORBELL=0 or 1"
#endif

BASELINE_EXPORTS

#define PASSES_PER_LOCK 1024u

static void* listener_main(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), baseline_strategy.thread_name);
#if FLOOR_POLL_DOORBELL
  hsa_signal_value_t seen = BASELINE_SIGNAL_INIT;
#endif
  for (;;) {
    /* Relaxed: see baseline_stopping. */
    if (atomic_load_explicit(&baseline_stopping, memory_order_relaxed)) break;
    pthread_mutex_lock(&baseline_lock);
    for (uint32_t pass = 0; pass < PASSES_PER_LOCK; ++pass) {
#if FLOOR_POLL_DOORBELL
      /* Acquire is not needed for the data (the exchange in the serve
       * acquires); relaxed is enough to notice a change. */
      hsa_signal_value_t value = hsa_signal_load_relaxed(baseline_doorbell);
      if (value != seen) {
        seen = value;
        for (uint32_t i = 0; i < baseline_count; ++i) baseline_serve_classic(&baseline_buffers[i]);
      } else {
        baseline_spin_hint();
      }
#else
      bool any = false;
      for (uint32_t i = 0; i < baseline_count; ++i) {
        if (baseline_classic_has_work(&baseline_buffers[i])) {
          baseline_serve_classic(&baseline_buffers[i]);
          any = true;
        }
      }
      if (!any) baseline_spin_hint();
#endif
    }
    pthread_mutex_unlock(&baseline_lock);
  }
  return NULL;
}

#if FLOOR_POLL_DOORBELL
const baseline_strategy_t baseline_strategy = {"amdgpu-hc-fldb", listener_main};
#else
const baseline_strategy_t baseline_strategy = {"amdgpu-hc-flst", listener_main};
#endif
