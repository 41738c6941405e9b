/* Probes a new user would try, as tests with small counts (ctest) and as a
 * long soak (a documented command, see README "Soak"):
 *
 * - exit(), exit() from another thread, _exit(), and a disable racing exit,
 *   each while waves are mid-flight on two buffers: the process ends with its
 *   own exit code, never hangs or crashes;
 * - an enable/disable soak: worker threads enable buffers with random packet
 *   counts, run waves with random lane masks, send printf messages, disable
 *   and free them; a fork now and then during the traffic, whose child
 *   enables its own buffer and calls once. Every answer is checked.
 *
 *   hc_probes                 the ctest run (about 3 s)
 *   hc_probes --soak SECONDS  the soak; prints totals, wrong answers, RSS and
 *                             threads every 10 s and at the end
 *
 * (dlopen/dlclose churn: hc_dlclose, HC_DLCLOSE_ROUNDS=N for a long run;
 * fork with a listener serving: hc_process.) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device_sim.h"
#include "hc_test.h"
#include "pf_device.h"
#include "rochostcall.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FORK_DURING_SOAK 0
#else
#define FORK_DURING_SOAK 1
#endif

#define EXIT_DEADLINE_MS 10000u

/* ---- exit during traffic ------------------------------------------------- */

enum exit_variant { EXIT_MAIN, EXIT_OTHER_THREAD, UNDERSCORE_EXIT, DISABLE_VS_EXIT, VARIANTS };
static const char* const variant_names[VARIANTS] = {"exit", "exit_from_thread", "_exit",
                                                    "disable_vs_exit"};

static void* g_exit_buffers[2];

static void* exit_thread(void* arg) {
  (void)arg;
  exit(0);
  return NULL;
}

static void* disable_thread(void* arg) {
  (void)arg;
  disableHostcalls(g_exit_buffers[0], NULL);
  disableHostcalls(g_exit_buffers[1], NULL);
  return NULL;
}

/* The child: 2 buffers, 6 waves calling without end, then the variant after
 * a random 0-15 ms. Exits with 0 in every variant. */
static int child_exit_traffic(void) {
  const char* v = getenv("HC_PROBE_VARIANT");
  const char* s = getenv("HC_PROBE_SEED");
  int variant = v ? atoi(v) : 0;
  uint64_t seed = s ? strtoull(s, NULL, 10) : 1;
  hc_hsa_init();
  for (int i = 0; i < 2; ++i) {
    g_exit_buffers[i] = hc_alloc_buffer(8);
    if (!enableHostcalls(g_exit_buffers[i], 8, NULL)) return 2;
  }
  device_sim_waves_config_t config = device_sim_waves_config(g_exit_buffers, 2, 6, 0, seed, HC_WAVES_TIMEOUT_NS);
  static device_sim_waves_t* waves; /* static: still reachable at exit (LeakSanitizer) */
  waves = device_sim_waves_start(&config);
  if (waves == NULL) return 3;
  hc_sleep_ms((uint32_t)(device_sim_rand(&seed) % 16));
  pthread_t thread;
  switch (variant) {
    case EXIT_MAIN:
      exit(0);
    case EXIT_OTHER_THREAD:
      pthread_create(&thread, NULL, exit_thread, NULL);
      for (;;) pause();
    case UNDERSCORE_EXIT:
      _exit(0);
    default:
      pthread_create(&thread, NULL, disable_thread, NULL);
      exit(0);
  }
}

static int g_exit_rounds = 3;

static void test_exit_during_traffic(void) {
  for (int variant = 0; variant < VARIANTS; ++variant) {
    uint64_t worst = 0;
    for (int round = 0; round < g_exit_rounds; ++round) {
      char v[32], s[40];
      snprintf(v, sizeof(v), "HC_PROBE_VARIANT=%d", variant);
      snprintf(s, sizeof(s), "HC_PROBE_SEED=%d", round * 31 + variant + 1);
      const char* const env[] = {v, s, NULL};
      hc_child_result_t r;
      DROPIN_REQUIRE_MSG(hc_spawn_child("exit_traffic", env, EXIT_DEADLINE_MS, &r), "spawn");
      DROPIN_CHECK_MSG(r.exited && r.exit_code == 0, "%s round %d: child %s", variant_names[variant], round,
               hc_child_describe(&r));
      if (r.elapsed_ms > worst) worst = r.elapsed_ms;
    }
    printf("  %s during traffic: %d runs, slowest %llu ms\n", variant_names[variant], g_exit_rounds,
           (unsigned long long)worst);
  }
}

/* ---- enable/disable soak ------------------------------------------------- */

static _Atomic int g_soak_stop;
static _Atomic uint64_t g_cycles, g_calls, g_printf_lines, g_wrong, g_forks, g_fork_failures;

/* A printf from one lane: "soak <worker> <cycle> <value>\n" to stdout (which
 * the soak points at /dev/null); its reply must be the byte count. */
static bool soak_printf(void* buffer, uint32_t worker, uint64_t cycle, uint64_t value) {
  static _Thread_local pf_message_t message;
  pf_arg_t args[3] = {pf_u32(worker), pf_u64(cycle), pf_u64(value)};
  if (!pf_encode(&message, (value & 1) ? PF_PACKED : PF_PER_ARGUMENT, 0, "soak %u %llu %llu\n", args, 3)) {
    return false;
  }
  uint64_t result = 0;
  if (pf_send(buffer, &message, &result) != 0) return false;
  char expected[96];
  int len = snprintf(expected, sizeof(expected), "soak %u %llu %llu\n", worker,
                     (unsigned long long)cycle, (unsigned long long)value);
  return result == (uint64_t)len;
}

/* In a child forked during traffic: a fresh buffer and one checked call. */
static int fork_child_call(void) {
  void* buffer = hc_alloc_buffer(4);
  if (!enableHostcalls(buffer, 4, NULL)) return 2;
  if (device_sim_fc_checked_call(buffer, ~0ull, 7, HC_WAVES_TIMEOUT_NS) != 0) return 3;
  disableHostcalls(buffer, NULL);
  return 0;
}

static void* soak_worker(void* arg) {
  uint32_t worker = (uint32_t)(uintptr_t)arg;
  uint64_t rng = 0x5EED0000ull + worker;
  /* Relaxed everywhere: a stop flag and statistics counters. */
  while (!atomic_load_explicit(&g_soak_stop, memory_order_relaxed)) {
    uint32_t n = 2 + (uint32_t)(device_sim_rand(&rng) % 39);
    void* buffer = hc_alloc_buffer(n);
    if (!enableHostcalls(buffer, n, NULL)) {
      atomic_fetch_add_explicit(&g_wrong, 1, memory_order_relaxed);
      hc_free_buffer(buffer);
      break;
    }
    uint64_t cycle = atomic_fetch_add_explicit(&g_cycles, 1, memory_order_relaxed);
    /* Random masks and inputs (the default fill), answers checked. */
    uint32_t waves = 1 + (uint32_t)(device_sim_rand(&rng) % 4);
    uint32_t calls = 1 + (uint32_t)(device_sim_rand(&rng) % 40);
    uint64_t seed = device_sim_rand(&rng);
    device_sim_waves_result_t result;
    if (hc_run_waves(buffer, waves, calls, seed, HC_WAVES_TIMEOUT_NS, &result) != 0) {
      atomic_fetch_add_explicit(&g_wrong, 1, memory_order_relaxed);
      fprintf(stderr, "soak worker %u: %s\n", worker, result.first_failure);
    }
    atomic_fetch_add_explicit(&g_calls, result.calls, memory_order_relaxed);
    uint32_t lines = (uint32_t)(device_sim_rand(&rng) % 4);
    for (uint32_t i = 0; i < lines; ++i) {
      if (soak_printf(buffer, worker, cycle, device_sim_rand(&rng))) {
        atomic_fetch_add_explicit(&g_printf_lines, 1, memory_order_relaxed);
      } else {
        atomic_fetch_add_explicit(&g_wrong, 1, memory_order_relaxed);
      }
    }
    /* Now and then a fork while the other workers' waves are in flight
     * (not under ASan or TSan: their runtimes are not fork-safe with other
     * threads inside them; hc_process covers fork in those builds). */
    if (FORK_DURING_SOAK && worker == 0 && cycle % 64 == 0) {
      hc_child_result_t r;
      if (!hc_fork_child(fork_child_call, EXIT_DEADLINE_MS, &r) || !r.exited || r.exit_code != 0) {
        atomic_fetch_add_explicit(&g_fork_failures, 1, memory_order_relaxed);
        fprintf(stderr, "soak fork: %s\n", hc_child_describe(&r));
      }
      atomic_fetch_add_explicit(&g_forks, 1, memory_order_relaxed);
    }
    hc_disable_and_free(buffer);
  }
  return NULL;
}

static long rss_kib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof(line), f) != NULL) {
    if (strncmp(line, "VmRSS:", 6) == 0) kib = strtol(line + 6, NULL, 10);
  }
  fclose(f);
  return kib;
}

static void soak_report(const char* when, uint64_t elapsed_ms) {
  printf("soak %s %llu s: %llu enable/disable cycles, %llu calls, %llu printf lines, %llu forks "
         "(%llu failed), %llu wrong answers, RSS %ld KiB, %d threads\n",
         when, (unsigned long long)(elapsed_ms / 1000),
         (unsigned long long)atomic_load(&g_cycles), (unsigned long long)atomic_load(&g_calls),
         (unsigned long long)atomic_load(&g_printf_lines), (unsigned long long)atomic_load(&g_forks),
         (unsigned long long)atomic_load(&g_fork_failures), (unsigned long long)atomic_load(&g_wrong),
         rss_kib(), hc_thread_count());
  fflush(stdout);
}

static uint32_t g_soak_ms = 2000;
#define SOAK_WORKERS 3

static void test_enable_disable_soak(void) {
  /* printf output goes to /dev/null for the run (replies are still checked). */
  fflush(stdout);
  int saved_stdout = dup(1);
  int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  DROPIN_REQUIRE_MSG(saved_stdout >= 0 && null_fd >= 0, "redirect stdout");
  dup2(null_fd, 1);
  pthread_t workers[SOAK_WORKERS];
  for (uint32_t i = 0; i < SOAK_WORKERS; ++i) {
    DROPIN_REQUIRE_MSG(pthread_create(&workers[i], NULL, soak_worker, (void*)(uintptr_t)i) == 0, "worker");
  }
  uint64_t start = hc_now_ms();
  uint64_t next_report = start + 10000;
  while (hc_now_ms() - start < g_soak_ms) {
    hc_sleep_ms(50);
    if (hc_now_ms() >= next_report) {
      next_report += 10000;
      dup2(saved_stdout, 1);
      soak_report("after", hc_now_ms() - start);
      dup2(null_fd, 1);
    }
  }
  atomic_store(&g_soak_stop, 1);
  for (uint32_t i = 0; i < SOAK_WORKERS; ++i) pthread_join(workers[i], NULL);
  fflush(stdout);
  dup2(saved_stdout, 1);
  close(saved_stdout);
  close(null_fd);
  soak_report("done,", hc_now_ms() - start);
  DROPIN_CHECK_MSG(atomic_load(&g_wrong) == 0, "%llu wrong answers", (unsigned long long)atomic_load(&g_wrong));
  DROPIN_CHECK_MSG(atomic_load(&g_fork_failures) == 0, "%llu forked children failed",
           (unsigned long long)atomic_load(&g_fork_failures));
  DROPIN_CHECK_MSG(atomic_load(&g_cycles) >= SOAK_WORKERS, "the soak made progress");
  DROPIN_CHECK_MSG(atomic_load(&g_printf_lines) > 0, "printf lines were sent");
  /* Every buffer is disabled: no listener thread is left (counted by name:
   * a sanitizer runtime may have started a thread of its own meanwhile). */
  uint64_t deadline = hc_now_ms() + 5000;
  while (hc_listener_threads() != 0 && hc_now_ms() < deadline) hc_sleep_ms(5);
  DROPIN_CHECK_MSG(hc_listener_threads() == 0, "listener threads left after the soak: %d",
           hc_listener_threads());
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"exit_traffic", child_exit_traffic},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
  if (argc == 3 && strcmp(argv[1], "--soak") == 0) {
    g_soak_ms = (uint32_t)strtoul(argv[2], NULL, 10) * 1000u;
    g_exit_rounds = 25;
  }
  hc_hsa_init();
  HC_RUN(test_exit_during_traffic);
  HC_RUN(test_enable_disable_soak);
  return dropin_check_exit_code();
}
