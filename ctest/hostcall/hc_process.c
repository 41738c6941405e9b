/* Process-level robustness: exiting (from any thread, during traffic, during a
 * slow or stuck host function) with buffers enabled neither hangs nor
 * crashes; a forked child does not inherit a half-running listener. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amdgpu_dropin_hostcall_constants.h"
#include "device_sim.h"
#include "hc_test.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

/* A child that has not exited by then is hung. */
#define EXIT_DEADLINE_MS 20000u /* a hang detector */

static device_sim_waves_t* start_waves(void* const* buffers, uint32_t count, uint32_t waves,
                                       uint32_t calls) {
  device_sim_waves_config_t config = device_sim_waves_config(
      buffers, count, waves, calls, 3, HC_CALL_TIMEOUT_NS);
  return device_sim_waves_start(&config);
}

/* ---- exit ------------------------------------------------------------------ */

static void* exit_thread(void* arg) {
  exit((int)(intptr_t)arg);
  return NULL;
}

/* exit() from another thread while 8 waves are mid-flight on 2 buffers. */
static int child_exit_from_thread(void) {
  hc_hsa_init();
  static void* buffers[2];
  for (int i = 0; i < 2; ++i) {
    buffers[i] = hc_alloc_buffer(8);
    if (!enableHostcalls(buffers[i], 8, NULL)) return 2;
  }
  if (hc_call_ok(buffers[0], 1) != 0) return 3;
  device_sim_waves_t* waves = start_waves(buffers, 2, 8, 0);
  if (waves == NULL) return 4;
  hc_sleep_ms(100);
  pthread_t thread;
  pthread_create(&thread, NULL, exit_thread, (void*)(intptr_t)42);
  for (;;) pause();
}

/* Return from main with a buffer enabled and the listener idle. */
static int child_exit_idle(void) {
  hc_hsa_init();
  void* buffer = hc_alloc_buffer(4);
  if (!enableHostcalls(buffer, 4, NULL)) return 2;
  if (hc_call_ok(buffer, 1) != 0) return 3;
  return 43;
}

/* Return from main with the listener idle in its blocked doorbell wait,
 * saying when (hc_now_us) on stderr. */
/* Counted, not timed: the waits that ended at their timeout between the
 * return from main and the end of the library's exit handler, and the
 * blocked waits still in progress then (an atexit handler registered before
 * the first enable runs after the library's). */
static uint64_t g_timeouts_at_return;

static void report_exit_waits(void) {
  fprintf(stderr, "exit-timeouts=%llu exit-blocked-waits=%u\n",
          (unsigned long long)(hsa_sim_wait_timeouts() - g_timeouts_at_return), hsa_sim_blocked_waits());
}

static int child_exit_idle_timed(void) {
  hc_hsa_init();
  atexit(report_exit_waits);
  void* buffer = hc_alloc_buffer(4);
  if (!enableHostcalls(buffer, 4, NULL)) return 2;
  if (hc_call_ok(buffer, 1) != 0) return 3;
  /* Until the listener has ended one idle wait and begun the next (counted
   * calls; the loop bound is a hang detector): every earlier timeout is then
   * counted, and the wait in progress has at least its first timeout left. */
  uint64_t waits = hsa_sim_call_count("hsa_signal_wait_scacquire");
  for (int i = 0; i < 10000 && hsa_sim_call_count("hsa_signal_wait_scacquire") < waits + 2; ++i) {
    hc_sleep_ms(1);
  }
  if (hsa_sim_blocked_waits() != 1) return 4;
  g_timeouts_at_return = hsa_sim_wait_timeouts();
  fprintf(stderr, "returning-from-main-us=%llu\n", (unsigned long long)hc_now_us());
  return 0;
}

/* The exit handler rings the doorbell only while HSA still answers. An
 * atexit handler registered before the first enable runs after the library's
 * (handlers run last-registered first) and checks the rings made at exit:
 * exactly one with HSA alive, none after the application shut HSA down
 * (with a buffer still enabled: its bug, but exit must stay safe). */
static uint64_t g_adds_before_exit;
static bool g_hsa_shut_down;

static void check_exit_rings(void) {
  uint64_t rings = hsa_sim_call_count("hsa_signal_add_screlease") - g_adds_before_exit;
  if (rings != (g_hsa_shut_down ? 0u : 1u)) {
    fprintf(stderr, "%llu doorbell rings at exit (HSA %s)\n", (unsigned long long)rings,
            g_hsa_shut_down ? "shut down" : "alive");
    _exit(3);
  }
}

static int exit_counting_rings(bool shut_down) {
  hc_hsa_init();
  atexit(check_exit_rings);
  void* buffer = hc_alloc_buffer(4);
  if (!enableHostcalls(buffer, 4, NULL)) return 2;
  if (hc_call_ok(buffer, 1) != 0) return 4;
  hc_sleep_ms(30);
  g_hsa_shut_down = shut_down;
  if (shut_down && hsa_shut_down() != HSA_STATUS_SUCCESS) return 5;
  g_adds_before_exit = hsa_sim_call_count("hsa_signal_add_screlease");
  return 0;
}

static int child_exit_rings_hsa_alive(void) { return exit_counting_rings(false); }
static int child_exit_rings_hsa_shut_down(void) { return exit_counting_rings(true); }

/* Exit when no ring can reach the listener (HSA stops answering the
 * library's check at exit) while the listener sits in a long idle wait (its
 * timeout has grown past the exit bound for busy listeners): exit still
 * waits until the listener has left the HSA wait, so no listener is inside
 * the runtime when the application's later exit handlers (or the runtime's
 * teardown) run. The handler registered before the first enable runs after
 * the library's and checks it. */
static void check_no_wait_in_progress(void) {
  if (hsa_sim_blocked_waits() != 0) {
    fprintf(stderr, "%u blocked HSA wait(s) still in progress after the library's exit handler\n",
            hsa_sim_blocked_waits());
    _exit(3);
  }
}

static int child_exit_unrung_during_long_wait(void) {
  hc_hsa_init();
  atexit(check_no_wait_in_progress);
  void* buffer = hc_alloc_buffer(4);
  if (!enableHostcalls(buffer, 4, NULL)) return 2;
  if (hc_call_ok(buffer, 1) != 0) return 4;
  /* Waits of 100 and 400 ms have timed out: the listener is in its third,
   * of IDLE_WAIT_MAX_MS, longer than EXIT_TIMEOUT_MS. */
  hc_sleep_ms(AMDGPU_DROPIN_HOSTCALL_WAIT_TIMEOUT_MS * (1 + AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_GROWTH) +
              100);
  if (hsa_sim_blocked_waits() != 1) return 5;
  /* The library asks whether HSA still answers before it rings: say no. */
  hsa_sim_fail_nth_call("hsa_system_get_info", 1, HSA_STATUS_ERROR_NOT_INITIALIZED);
  return 0;
}

static void expect_exit(const char* name, int code);

static void test_exit_waits_for_a_listener_in_a_long_unrung_wait(void) {
  _Static_assert(AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS > AMDGPU_DROPIN_HOSTCALL_EXIT_TIMEOUT_MS,
                 "the case needs a wait longer than the exit bound");
  expect_exit("exit_unrung_long_wait", 0);
}

static _Atomic int service_entered = 0;

/* FUNCTION_CALL host functions that take long or never return. */
static void slow_host_function(uint64_t out[2], const uint64_t in[7]) {
  service_entered = 1;
  hc_sleep_ms(300);
  out[0] = in[0];
  out[1] = in[1];
}

static void stuck_host_function(uint64_t out[2], const uint64_t in[7]) {
  service_entered = 1;
  for (;;) pause();
  out[0] = in[0];
}

typedef void (*host_fn)(uint64_t out[2], const uint64_t in[7]);

static void* call_thread(void* arg) {
  void* buffer = ((void**)arg)[0];
  host_fn fn = (host_fn)(uintptr_t)((void**)arg)[1];
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  lanes[0][0] = (uint64_t)(uintptr_t)fn;
  device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, lanes, 60ull * 1000000000ull);
  return NULL;
}

static int exit_during(host_fn fn, int code) {
  hc_hsa_init();
  static void* buffer;
  buffer = hc_alloc_buffer(4);
  if (!enableHostcalls(buffer, 4, NULL)) return 2;
  static void* arg[2];
  arg[0] = buffer;
  arg[1] = (void*)(uintptr_t)fn;
  pthread_t thread;
  pthread_create(&thread, NULL, call_thread, arg);
  for (int i = 0; i < 2000 && !service_entered; ++i) hc_sleep_ms(1);
  if (!service_entered) return 5;
  exit(code);
}

static int child_exit_during_slow_service(void) { return exit_during(slow_host_function, 44); }
static int child_exit_during_stuck_service(void) { return exit_during(stuck_host_function, 45); }

static void expect_exit(const char* name, int code) {
  hc_child_result_t r;
  DROPIN_REQUIRE_MSG(hc_spawn_child(name, NULL, EXIT_DEADLINE_MS, &r), "spawn %s", name);
  DROPIN_CHECK_MSG(r.exited && r.exit_code == code, "%s: want exit %d; child %s", name, code,
           hc_child_describe(&r));
  printf("  %s: exit after %llu ms\n", name, (unsigned long long)r.elapsed_ms);
}

static int compare_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

/* With an idle listener the process does not wait for the listener's wait
 * timeout at exit: the exit handler wakes the listener through the doorbell.
 * Checked by counts (no wait timed out during exit, none in progress after
 * the library's exit handler), never by the time it took; the time from the
 * return from main to the process end is printed only. */
#define EXIT_RUNS 7
static void test_exit_with_idle_listener_is_fast(void) {
  /* The figure is our exit, not the leak checker's scan of the heap. */
  static const char* const env[] = {"ASAN_OPTIONS=detect_leaks=0", "LSAN_OPTIONS=detect_leaks=0",
                                    NULL};
  uint64_t latency[EXIT_RUNS];
  for (int run = 0; run < EXIT_RUNS; ++run) {
    hc_child_result_t r;
    DROPIN_REQUIRE_MSG(hc_spawn_child("exit_idle_timed", env, EXIT_DEADLINE_MS, &r), "spawn");
    DROPIN_REQUIRE_MSG(r.exited && r.exit_code == 0, "child %s", hc_child_describe(&r));
    const char* mark = strstr(r.err, "returning-from-main-us=");
    DROPIN_REQUIRE_MSG(mark != NULL, "no timestamp; child %s", hc_child_describe(&r));
    unsigned long long returned = strtoull(mark + strlen("returning-from-main-us="), NULL, 10);
    latency[run] = r.reaped_us >= returned ? r.reaped_us - returned : 0;
    const char* counts = strstr(r.err, "exit-timeouts=");
    DROPIN_REQUIRE_MSG(counts != NULL, "no exit counts; child %s", hc_child_describe(&r));
    unsigned long long timeouts = 0, in_progress = 0;
    DROPIN_REQUIRE_MSG(sscanf(counts, "exit-timeouts=%llu exit-blocked-waits=%llu", &timeouts, &in_progress) == 2,
               "exit counts: %s", counts);
    DROPIN_CHECK_MSG(timeouts == 0, "run %d: %llu wait(s) timed out during exit (the ring did not wake it)", run,
             timeouts);
    DROPIN_CHECK_MSG(in_progress == 0, "run %d: %llu blocked wait(s) still in progress", run, in_progress);
  }
  qsort(latency, EXIT_RUNS, sizeof(latency[0]), compare_u64);
  printf("  return from main to process end: min %llu us, median %llu us, max %llu us\n",
         (unsigned long long)latency[0], (unsigned long long)latency[EXIT_RUNS / 2],
         (unsigned long long)latency[EXIT_RUNS - 1]);
}

static void test_exit_rings_only_while_hsa_answers(void) {
  expect_exit("exit_rings_alive", 0);
  expect_exit("exit_rings_shut_down", 0);
}

static void test_exit_from_other_thread_mid_flight(void) {
  expect_exit("exit_from_thread", 42);
}
static void test_exit_with_idle_listener(void) { expect_exit("exit_idle", 43); }
static void test_exit_during_slow_service(void) { expect_exit("exit_slow", 44); }
static void test_exit_during_stuck_service(void) { expect_exit("exit_stuck", 45); }

/* ---- fork ------------------------------------------------------------------ */

static void* parent_buffer;

/* In the child of a process whose listener was serving waves: only this
 * thread exists; a fresh buffer is served; the inherited registration can be
 * disabled without hanging. */
static int fork_child_body(void) {
  int failures = 0;
  int threads = hc_thread_count();
  if (threads != 1) {
    fprintf(stderr, "child has %d threads\n", threads);
    failures++;
  }
  void* fresh = hc_alloc_buffer(4);
  if (!enableHostcalls(fresh, 4, NULL)) {
    fprintf(stderr, "child: enable of a fresh buffer failed\n");
    return 2;
  }
  for (int i = 0; i < 20; ++i) {
    int rc = hc_call_ok(fresh, (uint64_t)i);
    if (rc != 0) {
      fprintf(stderr, "child: call %d on the fresh buffer: %d\n", i, rc);
      return 3;
    }
  }
  device_sim_waves_result_t result;
  if (hc_run_waves(fresh, 4, 200, 77, HC_CALL_TIMEOUT_NS, &result) != 0) {
    fprintf(stderr, "child waves: %s\n", result.first_failure);
    failures++;
  }
  disableHostcalls(parent_buffer, NULL);
  disableHostcalls(fresh, NULL);
  if (hc_wait_thread_count(1, 2000) != 1) {
    fprintf(stderr, "child: listener not stopped\n");
    failures++;
  }
  return failures ? 1 : 0;
}

/* A child that exits at once (atexit handlers run) with the inherited state. */
static int fork_child_exit_at_once(void) { exit(46); }

static void test_fork_with_listener_running(void) {
  HC_SKIP_FORK_UNDER_TSAN();
  parent_buffer = hc_alloc_buffer(8);
  DROPIN_REQUIRE_MSG(enableHostcalls(parent_buffer, 8, NULL), "enable");
  DROPIN_CHECK_MSG(hc_call_ok(parent_buffer, 1) == 0, "parent call");
  void* buffers[1] = {parent_buffer};
  device_sim_waves_t* waves = start_waves(buffers, 1, 4, 0);
  DROPIN_REQUIRE_MSG(waves != NULL, "start waves");
  hc_sleep_ms(30);
  for (int round = 0; round < 3; ++round) {
    hc_child_result_t r;
    DROPIN_CHECK_MSG(hc_fork_child(fork_child_body, 15000, &r), "fork");
    DROPIN_CHECK_MSG(r.exited && r.exit_code == 0, "round %d: child %s", round, hc_child_describe(&r));
    DROPIN_CHECK_MSG(hc_fork_child(fork_child_exit_at_once, EXIT_DEADLINE_MS, &r), "fork");
    DROPIN_CHECK_MSG(r.exited && r.exit_code == 46, "round %d: exiting child %s", round,
             hc_child_describe(&r));
  }
  device_sim_waves_stop(waves);
  device_sim_waves_result_t result;
  DROPIN_CHECK_MSG(device_sim_waves_join(waves, &result) == 0, "parent waves: %s", result.first_failure);
  DROPIN_CHECK_MSG(result.calls > 0, "parent waves made no call");
  printf("  parent waves: %llu calls during the forks\n", (unsigned long long)result.calls);
  DROPIN_CHECK_MSG(hc_call_ok(parent_buffer, 2) == 0, "parent call after the forks");
  hc_disable_and_free(parent_buffer);
}

/* A fork while another thread is inside the very first enableHostcalls
 * (holding the registration lock, before any listener ever started) must not
 * leave the child with that lock held: the child's first hostcall call would
 * wait forever. Every enable here fails at hsa_signal_create, so no listener
 * ever starts in this process: this case is about the registration lock,
 * taken at random moments. A fork while a thread is inside the first
 * listener start's process hooks is made deterministic by the hook build
 * (hc_fork_hooks.c). Its own ctest (hostcall_fork_first_enable), which
 * skips under ASan. */
static _Atomic int enabler_stop;

static void* enabler_thread(void* buffer) {
  /* Relaxed: a stop request only needs to be seen eventually. */
  while (!atomic_load_explicit(&enabler_stop, memory_order_relaxed)) {
    hsa_sim_fail_nth_call("hsa_signal_create", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
    if (enableHostcalls(buffer, 4, NULL)) {
      fprintf(stderr, "enable succeeded despite the injected fault\n");
      disableHostcalls(buffer, NULL);
    }
  }
  return NULL;
}

static int grandchild_disable_unknown(void) {
  static uint64_t unknown[8];
  disableHostcalls(unknown, NULL); /* takes the registration lock */
  return 0;
}

static int child_fork_during_first_enable(void) {
  hc_hsa_init();
  void* buffer = hc_alloc_buffer(4);
  pthread_t thread;
  if (pthread_create(&thread, NULL, enabler_thread, buffer) != 0) return 2;
  hc_sleep_ms(5);
  int hung = 0;
  for (int round = 0; round < 20; ++round) {
    hc_child_result_t r;
    if (!hc_fork_child(grandchild_disable_unknown, 2000, &r)) return 3;
    if (!(r.exited && r.exit_code == 0)) {
      fprintf(stderr, "round %d: forked child %s\n", round, hc_child_describe(&r));
      ++hung;
      break;
    }
  }
  atomic_store_explicit(&enabler_stop, 1, memory_order_relaxed);
  pthread_join(thread, NULL);
  hc_free_buffer(buffer);
  return hung ? 1 : 0;
}

static void test_fork_during_first_enable(void) {
  hc_child_result_t r;
  HC_CHILD_OK("fork_first_enable", NULL, 60000, &r);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"exit_from_thread", child_exit_from_thread},
      {"exit_idle", child_exit_idle},
      {"exit_idle_timed", child_exit_idle_timed},
      {"exit_rings_alive", child_exit_rings_hsa_alive},
      {"exit_rings_shut_down", child_exit_rings_hsa_shut_down},
      {"exit_slow", child_exit_during_slow_service},
      {"exit_stuck", child_exit_during_stuck_service},
      {"exit_unrung_long_wait", child_exit_unrung_during_long_wait},
      {"fork_first_enable", child_fork_during_first_enable},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
  if (argc == 2 && strcmp(argv[1], "fork_first_enable") == 0) {
#if defined(__SANITIZE_ADDRESS__)
    /* The library allocates its fresh registry in the forked child. glibc's
     * malloc is fork-safe, but GCC's ASan allocator is not: a child forked
     * while the enabling thread is inside malloc deadlocks on ASan's
     * allocator lock. */
    printf("skipped: the ASan allocator is not fork-safe (a fork at a random moment may find it locked)\n");
    return 77;
#endif
    hc_hsa_init();
    HC_RUN(test_fork_during_first_enable);
    return dropin_check_exit_code();
  }
  hc_hsa_init();
  HC_RUN(test_exit_with_idle_listener);
  HC_RUN(test_exit_with_idle_listener_is_fast);
  HC_RUN(test_exit_rings_only_while_hsa_answers);
  HC_RUN(test_exit_from_other_thread_mid_flight);
  HC_RUN(test_exit_during_slow_service);
  HC_RUN(test_exit_during_stuck_service);
  HC_RUN(test_exit_waits_for_a_listener_in_a_long_unrung_wait);
  HC_RUN(test_fork_with_listener_running);
  return dropin_check_exit_code();
}
