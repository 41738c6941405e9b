/* Several buffers served at once, with buffers enabled and disabled from
 * other threads while waves keep calling. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "device_sim.h"
#include "hc_test.h"
#include "rochostcall.hpp"

/* A function call on every lane of one full wave, checked. */
static int one_checked_call(void* buffer, uint64_t salt) {
  return device_sim_fc_checked_call(buffer, ~0ull, salt, HC_WAVES_TIMEOUT_NS);
}

/* 8 buffers (mixed packet counts), 16 waves spread over them. */
static void test_many_buffers_served_at_once(void) {
  enum { B = 8 };
  static const uint32_t counts[B] = {2, 3, 4, 5, 16, 17, 64, 100};
  void* buffers[B];
  for (int i = 0; i < B; ++i) {
    buffers[i] = hc_alloc_buffer(counts[i]);
    DROPIN_REQUIRE_MSG(buffers[i] != NULL && enableHostcalls(buffers[i], counts[i], &buffers[i]),
               "enable %d", i);
  }
  device_sim_waves_config_t config = device_sim_waves_config(
      buffers, B, 16, 1500, 7, HC_WAVES_TIMEOUT_NS);
  config.check_inactive_lanes = true;
  device_sim_waves_result_t result;
  int rc = device_sim_run_waves(&config, &result);
  DROPIN_CHECK_MSG(rc == 0 && result.calls == 16u * 1500u, "%llu calls, %llu errors, %llu mismatches: %s",
           (unsigned long long)result.calls, (unsigned long long)result.errors,
           (unsigned long long)result.mismatches, result.first_failure);
  for (int i = 0; i < B; ++i) {
    disableHostcalls(buffers[i], &buffers[i]);
    hc_free_buffer(buffers[i]);
  }
}

typedef struct churn {
  _Atomic int stop;
  _Atomic uint64_t finished; /* cycles done (also read while it runs) */
  _Atomic int ended;         /* the thread returned (a failure stops it) */
  uint64_t cycles;
  int failures;
  char failure[200];
  uint32_t base;
} churn_t;

/* Enables a fresh buffer, makes checked calls on it, disables it; again. */
static void* churn_main(void* arg) {
  churn_t* churn = (churn_t*)arg;
  uint32_t n = 2 + churn->base % 7;
  /* Relaxed: stop is a plain request flag. */
  while (!atomic_load_explicit(&churn->stop, memory_order_relaxed)) {
    void* buffer = hc_alloc_buffer(n);
    if (buffer == NULL || !enableHostcalls(buffer, n, buffer)) {
      churn->failures++;
      snprintf(churn->failure, sizeof(churn->failure), "enable failed at cycle %llu",
               (unsigned long long)churn->cycles);
      hc_free_buffer(buffer);
      break;
    }
    for (int call = 0; call < 3; ++call) {
      int rc = one_checked_call(buffer, churn->cycles * 3 + (uint64_t)call);
      if (rc != 0) {
        churn->failures++;
        snprintf(churn->failure, sizeof(churn->failure), "call on churned buffer (n=%u): %s", n,
                 rc > 0 ? "wrong result" : device_sim_error_string(rc));
        break;
      }
    }
    disableHostcalls(buffer, buffer);
    hc_free_buffer(buffer);
    churn->cycles++;
    /* Relaxed: a progress count. */
    atomic_store_explicit(&churn->finished, churn->cycles, memory_order_relaxed);
    n = 2 + (n + 3) % 9;
    if (churn->failures) break;
  }
  /* Relaxed: only ends the caller's wait early; the join orders the rest. */
  atomic_store_explicit(&churn->ended, 1, memory_order_relaxed);
  return NULL;
}

/* Until each churn thread has finished a cycle (or failed): the claim "it
 * made a cycle" then does not depend on how much time it had. The bound is a
 * hang detector. */
static void wait_for_a_cycle_each(churn_t* churns, int count) {
  for (int i = 0; i < count; ++i) {
    for (int step = 0; step < 20000; ++step) {
      if (atomic_load_explicit(&churns[i].finished, memory_order_relaxed) > 0 ||
          atomic_load_explicit(&churns[i].ended, memory_order_relaxed)) {
        break;
      }
      hc_sleep_ms(1);
    }
  }
}

#define CHURNS 2

/* Starts CHURNS churn threads; thread i starts from base i * base_step. */
static void start_churns(churn_t churns[CHURNS], pthread_t threads[CHURNS], uint32_t base_step) {
  for (int i = 0; i < CHURNS; ++i) {
    memset(&churns[i], 0, sizeof(churns[i]));
    churns[i].base = (uint32_t)i * base_step;
    pthread_create(&threads[i], NULL, churn_main, &churns[i]);
  }
}

/* Once each has made a cycle (or failed): stops and joins the threads and
 * checks that each made enable/disable cycles and none failed. */
static void stop_churns(churn_t churns[CHURNS], pthread_t threads[CHURNS]) {
  wait_for_a_cycle_each(churns, CHURNS);
  for (int i = 0; i < CHURNS; ++i) {
    atomic_store_explicit(&churns[i].stop, 1, memory_order_relaxed);
    pthread_join(threads[i], NULL);
    DROPIN_CHECK_MSG(churns[i].failures == 0, "churn thread %d: %s", i, churns[i].failure);
    DROPIN_CHECK_MSG(churns[i].cycles > 0, "churn thread %d made no cycle", i);
    printf("  churn thread %d: %llu enable/disable cycles\n", i, (unsigned long long)churns[i].cycles);
  }
}

/* Waves on 4 permanent buffers while 2 threads churn other buffers. */
static void test_churn_while_serving(void) {
  enum { B = 4 };
  void* buffers[B];
  for (int i = 0; i < B; ++i) {
    buffers[i] = hc_alloc_buffer(8);
    DROPIN_REQUIRE_MSG(buffers[i] != NULL && enableHostcalls(buffers[i], 8, NULL), "enable %d", i);
  }
  device_sim_waves_config_t config = device_sim_waves_config(
      buffers, B, 8, 1500, 11, HC_WAVES_TIMEOUT_NS);
  device_sim_waves_t* waves = device_sim_waves_start(&config);
  DROPIN_REQUIRE_MSG(waves != NULL, "start waves");

  churn_t churns[CHURNS];
  pthread_t threads[CHURNS];
  start_churns(churns, threads, 3);
  device_sim_waves_result_t result;
  int rc = device_sim_waves_join(waves, &result);
  stop_churns(churns, threads);
  DROPIN_CHECK_MSG(rc == 0 && result.calls == 8u * 1500u, "%llu calls, %llu errors, %llu mismatches: %s",
           (unsigned long long)result.calls, (unsigned long long)result.errors,
           (unsigned long long)result.mismatches, result.first_failure);
  for (int i = 0; i < B; ++i) {
    hc_disable_and_free(buffers[i]);
  }
}

/* No buffer stays enabled: the listener starts and stops on every cycle
 * while another thread does the same. */
static void test_listener_start_stop_churn(void) {
  int threads_before = hc_thread_count();
  uint64_t signals_before = hc_live_signals();
  churn_t churns[CHURNS];
  pthread_t threads[CHURNS];
  start_churns(churns, threads, 1);
  hc_sleep_ms(700);
  stop_churns(churns, threads);
  int threads_after = hc_wait_thread_count(threads_before, 2000);
  DROPIN_CHECK_MSG(threads_after == threads_before, "threads %d before, %d after", threads_before,
           threads_after);
  DROPIN_CHECK_MSG(hc_live_signals() == signals_before, "signals %llu before, %llu after",
           (unsigned long long)signals_before, (unsigned long long)hc_live_signals());
}

/* Disabling one buffer while its neighbours are busy leaves them served;
 * re-enabling the same memory works (fresh initialization). */
static void test_disable_one_of_many(void) {
  void* a = hc_alloc_buffer(8);
  void* b = hc_alloc_buffer(8);
  DROPIN_REQUIRE_MSG(enableHostcalls(a, 8, NULL) && enableHostcalls(b, 8, NULL), "enable");
  void* buffers[1] = {a};
  device_sim_waves_config_t config = device_sim_waves_config(
      buffers, 1, 4, 2000, 5, HC_WAVES_TIMEOUT_NS);
  device_sim_waves_t* waves = device_sim_waves_start(&config);
  DROPIN_REQUIRE_MSG(waves != NULL, "start");
  for (int i = 0; i < 50; ++i) {
    DROPIN_CHECK_MSG(one_checked_call(b, (uint64_t)i) == 0, "call on b");
    disableHostcalls(b, NULL);
    memset(b, 0, getHostcallBufferSize(8));
    DROPIN_CHECK_MSG(enableHostcalls(b, 8, NULL), "re-enable b");
  }
  device_sim_waves_result_t result;
  DROPIN_CHECK_MSG(device_sim_waves_join(waves, &result) == 0, "waves on a: %s", result.first_failure);
  disableHostcalls(a, NULL);
  disableHostcalls(b, NULL);
  hc_free_buffer(a);
  hc_free_buffer(b);
}

int main(void) {
  hc_hsa_init();
  HC_RUN(test_many_buffers_served_at_once);
  HC_RUN(test_churn_while_serving);
  HC_RUN(test_listener_start_stop_churn);
  HC_RUN(test_disable_one_of_many);
  return dropin_check_exit_code();
}
