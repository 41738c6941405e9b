/* disableHostcalls called from inside a hostcall service, and packets left
 * waiting when a buffer is disabled.
 *
 * * A service of buffer B disables buffer A while the other listener thread
 *   (the slow-buffer helper) is inside a service of A: disable must wait for
 *   that service, as it does for any caller, or A could be freed under it.
 * * A service disables its own buffer (the last one): no deadlock, the wave
 *   gets its answer, the listener stops.
 * * Packets still waiting when their buffer is disabled are logged (their
 *   waves never get an answer). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device_sim.h"
#include "hc_test.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

#define PACKETS 8u

typedef void (*host_fn)(uint64_t out[2], const uint64_t in[7]);

static void sleep_ms_exact(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000L * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One single-lane FUNCTION_CALL with arguments in[0], in[1]; returns 0 and
 * the two answer words, or -1. */
static int call(void* buffer, host_fn fn, uint64_t a0, uint64_t a1, uint64_t out[2]) {
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  lanes[0][0] = (uint64_t)(uintptr_t)fn;
  lanes[0][1] = a0;
  lanes[0][2] = a1;
  int rc = device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, lanes, HC_WAVES_TIMEOUT_NS);
  if (rc != DEVICE_SIM_OK) {
    fprintf(stderr, "device_sim_hostcall: %s\n", device_sim_error_string(rc));
    return -1;
  }
  out[0] = lanes[0][0];
  out[1] = lanes[0][1];
  return 0;
}

/* ---- a service disables a buffer the other listener thread is serving ------ */

static _Atomic int a_inside;

static void slow_5ms(uint64_t out[2], const uint64_t in[7]) {
  (void)in;
  sleep_ms_exact(5);
  out[0] = hc_served_by();
  out[1] = 0;
}

/* Runs on the helper (A is slow): holds A's service for 300 ms. */
static void held_300ms(uint64_t out[2], const uint64_t in[7]) {
  (void)in;
  /* Relaxed: a flag polled by the other service; nothing rides on it. */
  atomic_store_explicit(&a_inside, 1, memory_order_relaxed);
  sleep_ms_exact(300);
  out[0] = hc_served_by();
  atomic_store_explicit(&a_inside, 0, memory_order_relaxed);
  out[1] = 0;
}

/* Runs on the main listener (B is fast): disables buffer in[0]; answers
 * whether A's service was still running when disable returned. */
static void disable_other(uint64_t out[2], const uint64_t in[7]) {
  void* victim = (void*)(uintptr_t)in[0];
  uint64_t t0 = device_sim_now_ns();
  while (!atomic_load_explicit(&a_inside, memory_order_relaxed) &&
         device_sim_now_ns() - t0 < 5ull * 1000 * 1000 * 1000) {
    sleep_ms_exact(1);
  }
  disableHostcalls(victim, victim);
  out[0] = (uint64_t)atomic_load_explicit(&a_inside, memory_order_relaxed);
  out[1] = hc_served_by();
}

static void* call_held(void* buffer) {
  uint64_t out[2] = {0, 0};
  return (void*)(intptr_t)(call(buffer, held_300ms, 0, 0, out) == 0 && out[0] == HC_SERVED_BY_HELPER
                               ? 0
                               : 1);
}

static void test_disable_other_buffer_from_service(void) {
  void* a = hc_alloc_buffer(PACKETS);
  void* b = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(enableHostcalls(a, PACKETS, a) && enableHostcalls(b, PACKETS, b), "enable");
  /* Slow visits in a row hand A to the helper thread. */
  uint64_t out[2] = {0, 0};
  for (int k = 0; k < 6 && out[0] != HC_SERVED_BY_HELPER; ++k) {
    DROPIN_REQUIRE_MSG(call(a, slow_5ms, 0, 0, out) == 0, "slow call %d", k);
  }
  DROPIN_REQUIRE_MSG(out[0] == HC_SERVED_BY_HELPER, "buffer A never moved to the helper (served by %llu)",
             (unsigned long long)out[0]);

  pthread_t thread;
  DROPIN_REQUIRE_MSG(pthread_create(&thread, NULL, call_held, a) == 0, "thread");
  int rc = call(b, disable_other, (uint64_t)(uintptr_t)a, 0, out);
  void* held_result = NULL;
  pthread_join(thread, &held_result);
  DROPIN_CHECK_MSG(rc == 0, "the disabling call on B was not answered");
  DROPIN_CHECK_MSG(out[1] == HC_SERVED_BY_MAIN, "B served by %llu, expected the main listener",
           (unsigned long long)out[1]);
  DROPIN_CHECK_MSG(out[0] == 0,
           "disableHostcalls(A) from a service of B returned while the helper was still "
           "inside A's service (A could be freed under it)");
  DROPIN_CHECK_MSG(held_result == NULL, "the call on A in flight during its disable was not answered");
  /* A is disabled: a second disable is a no-op, B still works. */
  disableHostcalls(a, a);
  DROPIN_CHECK_MSG(call(b, slow_5ms, 0, 0, out) == 0, "B after A's disable");
  disableHostcalls(b, b);
  hc_free_buffer(a);
  hc_free_buffer(b);
}

/* ---- a service disables its own (last) buffer ------------------------------ */

static void disable_self(uint64_t out[2], const uint64_t in[7]) {
  void* self = (void*)(uintptr_t)in[0];
  disableHostcalls(self, NULL);
  out[0] = 77;
  out[1] = in[1] + 1;
}

static void test_disable_own_buffer_from_service(void) {
  int threads0 = hc_thread_count();
  void* c = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(enableHostcalls(c, PACKETS, NULL), "enable");
  uint64_t out[2] = {0, 0};
  DROPIN_CHECK_MSG(call(c, disable_self, (uint64_t)(uintptr_t)c, 41, out) == 0 && out[0] == 77 &&
               out[1] == 42,
           "self-disable call not answered (%llu, %llu)", (unsigned long long)out[0],
           (unsigned long long)out[1]);
  int left = hc_wait_thread_count(threads0, 5000);
  DROPIN_CHECK_MSG(left == threads0, "%d threads after the last buffer disabled itself, expected %d", left,
           threads0);
  /* It is disabled: enabling it again works and serves. */
  DROPIN_REQUIRE_MSG(enableHostcalls(c, PACKETS, NULL), "re-enable");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(c, ~0ull, 5, HC_WAVES_TIMEOUT_NS) == 0, "call after re-enable");
  hc_disable_and_free(c);
}

/* ---- packets left waiting at disable are logged --------------------------- */

static int child_abandoned(void) {
  hc_hsa_init();
  /* Blocked waits see only signal operations: an unrung packet waits for the
   * listener's timeout rescan (100 ms), so disable comes first. */
  hsa_sim_set_periodic_recheck(false, 0);
  void* buffer = hc_alloc_buffer(PACKETS);
  if (!enableHostcalls(buffer, PACKETS, NULL)) return 2;
  if (device_sim_fc_checked_call(buffer, ~0ull, 1, HC_WAVES_TIMEOUT_NS) != 0) return 3;
  hc_sleep_ms(20); /* the listener goes back to its blocked wait */
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  uint64_t ptr = 0;
  if (device_sim_pop_free(buffer, &ptr, HC_WAVES_TIMEOUT_NS) != 0) return 4;
  device_sim_fill(buffer, ptr, DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, (const uint64_t(*)[8])lanes);
  device_sim_push_ready(buffer, ptr);
  disableHostcalls(buffer, NULL);
  /* Raced with the listener's timeout rescan (served after all): no verdict. */
  device_sim_packet_header_t* packet =
      device_sim_packet(buffer, ptr & device_sim_header(buffer)->index_mask);
  /* Acquire: pairs with the host's release clear of READY (if it served it). */
  if ((atomic_load_explicit(&packet->control, memory_order_acquire) & DEVICE_SIM_CONTROL_READY) == 0)
    return 5;
  hc_free_buffer(buffer);
  return 0;
}

static void test_abandoned_packets_are_logged(void) {
  static const char* const env[] = {"AMD_LOG_LEVEL=2", NULL};
  hc_child_result_t r;
  DROPIN_REQUIRE_MSG(hc_spawn_child("abandoned", env, HC_CHILD_TIMEOUT_MS, &r), "spawn");
  if (r.exited && r.exit_code == 5) {
    printf("  the listener served the packet before disable (timing); not checked\n");
    return;
  }
  DROPIN_CHECK_MSG(r.exited && r.exit_code == 0, "child %s", hc_child_describe(&r));
  DROPIN_CHECK_MSG(hc_contains(r.err, "abandoned"),
           "a packet left waiting at disable was not logged; stderr: %s", r.err);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"abandoned", child_abandoned},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
  hc_hsa_init();
  HC_RUN(test_disable_other_buffer_from_service);
  HC_RUN(test_disable_own_buffer_from_service);
  HC_RUN(test_abandoned_packets_are_logged);
  return dropin_check_exit_code();
}
