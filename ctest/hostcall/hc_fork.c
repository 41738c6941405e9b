/* Process-wide state against fork and broken pipes.
 *
 * fork_churn: forks at random points while other threads churn every
 * process-wide lock of the library: handlers registered and unregistered
 * (the handler table's locks), DEVMEM allocations and frees (a DEVMEM book's
 * lock), printf traffic, buffers enabled and disabled (the registry's lock).
 * Each child does real work within a bounded time: registers a handler,
 * enables a buffer of its own (with a DEVMEM service), is served (its
 * handler, a DEVMEM allocation and free, a function call), unregisters,
 * disables and exits 0. The parent reaps each child with a timeout and fails
 * on any hang. HC_FORKS sets the number of forks (default 1000; 600 in
 * sanitizer builds).
 *
 * sigpipe: stderr is a pipe whose reader is gone; SANITIZER reports (written
 * by the listener thread), a printf to stderr and log lines (written by the
 * caller's thread) must not kill the process with SIGPIPE, whose disposition
 * stays the default; the EPIPE is logged once (the write attempts to fd 2
 * are counted by an interposed write). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim.h"
#include "device_sim_services.h"
#include "hc_test.h"
#include "hsa_sim.h"
#include "pf_device.h"
#include "rochostcall.hpp"

#define DEVMEM AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM
#define CHURN_SERVICE 60u
#define CHILD_SERVICE 61u

/* GCC's ASan allocator is not fork-safe while other threads allocate (a
 * child can inherit its lock held): under ASan the churn threads pause
 * outside the library for each fork and the listener threads are let fall
 * asleep, so only the child's own work is checked there; the plain build
 * forks in the middle of the churn. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FORK_IN_CHURN 0
#else
#define FORK_IN_CHURN 1
#endif

static hsa_agent_t g_gpu;
static hsa_amd_memory_pool_t g_vram;

static bool find_device(void) { return hc_find_gpu_pools(&g_gpu.handle, &g_vram.handle, NULL); }

static amdgpu_dropin_hostcall_status_t enable_devmem(void* buffer) {
  uint64_t agent = g_gpu.handle;
  return amdgpu_dropin_hostcall_devmem_enable(buffer, g_vram.handle, &agent, 1);
}

static int32_t lane_times_3(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  (void)user, (void)buffer, (void)service;
  slot[0] = slot[0] * 3 + lane;
  return 0;
}

/* ---- fork under churn ------------------------------------------------------ */

static _Atomic int g_stop;
static _Atomic int g_pause_requested; /* ASan mode: churn threads park */
static _Atomic int g_parked;
static _Atomic uint64_t g_churn_ops, g_churn_errors;

static void churn_checkpoint(void) {
  /* seq_cst: a rendezvous between the forking thread and the churn threads. */
  if (!atomic_load(&g_pause_requested)) return;
  atomic_fetch_add(&g_parked, 1);
  while (atomic_load(&g_pause_requested) && !atomic_load(&g_stop)) sched_yield();
  atomic_fetch_sub(&g_parked, 1);
}

static void churn_error(const char* what) {
  atomic_fetch_add_explicit(&g_churn_errors, 1, memory_order_relaxed);
  fprintf(stderr, "churn: %s\n", what);
}

/* Handlers registered and unregistered, globally and for a buffer. */
static void* churn_handlers(void* arg) {
  (void)arg;
  void* const scope = (void*)(uintptr_t)0x7000;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    churn_checkpoint();
    if (amdgpu_dropin_hostcall_register_lane_handler(CHURN_SERVICE, NULL, lane_times_3, NULL) !=
            AMDGPU_DROPIN_HOSTCALL_OK ||
        amdgpu_dropin_hostcall_register_lane_handler(CHURN_SERVICE, scope, lane_times_3, NULL) !=
            AMDGPU_DROPIN_HOSTCALL_OK ||
        amdgpu_dropin_hostcall_unregister_handler(CHURN_SERVICE, scope) != AMDGPU_DROPIN_HOSTCALL_OK ||
        amdgpu_dropin_hostcall_unregister_handler(CHURN_SERVICE, NULL) != AMDGPU_DROPIN_HOSTCALL_OK) {
      churn_error("register/unregister");
    }
    atomic_fetch_add_explicit(&g_churn_ops, 1, memory_order_relaxed);
  }
  return NULL;
}

/* DEVMEM allocations and frees, and calls to the churning handler. */
static void* churn_devmem(void* arg) {
  void* buffer = arg;
  uint64_t zero[64] = {0}, sizes[64], blocks[64], answers[64];
  for (int i = 0; i < 64; ++i) sizes[i] = 256u + 64u * (uint64_t)i;
  uint64_t rng = 99;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    churn_checkpoint();
    uint64_t mask = device_sim_random_mask(&rng) | 1u;
    if (device_sim_devmem_request(buffer, mask, zero, sizes, blocks, HC_CALL_TIMEOUT_NS) != DEVICE_SIM_OK ||
        device_sim_devmem_request(buffer, mask, blocks, zero, answers, HC_CALL_TIMEOUT_NS) != DEVICE_SIM_OK) {
      churn_error("devmem request");
    }
    uint64_t lanes[64][8] = {{0}};
    if (device_sim_hostcall(buffer, CHURN_SERVICE, 1u, lanes, HC_CALL_TIMEOUT_NS) != DEVICE_SIM_OK) {
      churn_error("churn service call");
    }
    atomic_fetch_add_explicit(&g_churn_ops, 1, memory_order_relaxed);
  }
  return NULL;
}

/* Buffers enabled and disabled, with printf traffic (to stdout). */
static void* churn_buffers(void* arg) {
  (void)arg;
  static _Thread_local pf_message_t message;
  uint64_t cycle = 0;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    churn_checkpoint();
    void* buffer = hc_alloc_buffer(4);
    if (!hc_enable(buffer, 4, NULL)) {
      churn_error("enable");
      hc_free_buffer(buffer);
      continue;
    }
    pf_arg_t args[1] = {pf_u64(cycle++)};
    uint64_t result = 0;
    if (!pf_encode(&message, PF_PACKED, 0, "fork churn %llu\n", args, 1) ||
        pf_send(buffer, &message, &result) != 0 || result == 0) {
      churn_error("printf");
    }
    if (device_sim_fc_checked_call(buffer, ~0ull, cycle, HC_CALL_TIMEOUT_NS) != 0) churn_error("function call");
    hc_disable_and_free(buffer);
    atomic_fetch_add_explicit(&g_churn_ops, 1, memory_order_relaxed);
  }
  return NULL;
}

/* The child: its own handler, buffer and DEVMEM service, served. */
static int fork_child_work(void) {
  int failures = 0;
  if (amdgpu_dropin_hostcall_register_lane_handler(CHILD_SERVICE, NULL, lane_times_3, NULL) !=
      AMDGPU_DROPIN_HOSTCALL_OK) {
    return 2;
  }
  void* buffer = hc_alloc_buffer(4);
  if (!hc_enable(buffer, 4, NULL)) return 3;
  if (enable_devmem(buffer) != AMDGPU_DROPIN_HOSTCALL_OK) return 4;
  uint64_t lanes[64][8] = {{0}};
  for (int i = 0; i < 64; ++i) lanes[i][0] = (uint64_t)i + 10;
  if (device_sim_hostcall(buffer, CHILD_SERVICE, ~0ull, lanes, HC_CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return 5;
  for (uint32_t i = 0; i < 64; ++i) DROPIN_CHECK_INTO(failures, lanes[i][0] == (i + 10) * 3 + i, "lane %u", i);
  uint64_t zero[64] = {0}, sizes[64], blocks[64], answers[64];
  for (int i = 0; i < 64; ++i) sizes[i] = 4096;
  if (device_sim_devmem_request(buffer, 0xFull, zero, sizes, blocks, HC_CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return 6;
  for (int i = 0; i < 4; ++i) DROPIN_CHECK_INTO(failures, blocks[i] != 0, "block %d", i);
  if (device_sim_devmem_request(buffer, 0xFull, blocks, zero, answers, HC_CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return 7;
  if (device_sim_fc_checked_call(buffer, ~0ull, 5, HC_CALL_TIMEOUT_NS) != 0) return 8;
  if (amdgpu_dropin_hostcall_unregister_handler(CHILD_SERVICE, NULL) != AMDGPU_DROPIN_HOSTCALL_OK) return 9;
  if (amdgpu_dropin_hostcall_unregister_handler(DEVMEM, buffer) != AMDGPU_DROPIN_HOSTCALL_OK) return 10;
  hc_disable_and_free(buffer);
  return failures == 0 ? 0 : 11;
}

static void test_fork_churn(void) {
  const char* n = getenv("HC_FORKS");
  /* Sanitizer builds fork more slowly: fewer forks there keep the test
   * within CI's time (the plain build makes the 1000 in the churn). */
  const int forks = n ? atoi(n) : (FORK_IN_CHURN ? 1000 : 600);
  DROPIN_REQUIRE_MSG(find_device(), "GPU and its VRAM pool");
  void* devmem_buffer = hc_alloc_buffer(8);
  DROPIN_REQUIRE_MSG(hc_enable(devmem_buffer, 8, NULL), "enable");
  DROPIN_REQUIRE_MSG(enable_devmem(NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "devmem for every buffer");
  /* stdout (the churn's printf) to /dev/null for the duration. */
  fflush(stdout);
  int saved_stdout = dup(1);
  FILE* null_out = freopen("/dev/null", "w", stdout);
  (void)null_out;
  pthread_t threads[3];
  pthread_create(&threads[0], NULL, churn_handlers, NULL);
  pthread_create(&threads[1], NULL, churn_devmem, devmem_buffer);
  pthread_create(&threads[2], NULL, churn_buffers, NULL);
  uint64_t rng = 1234;
  int hangs = 0, failed = 0, done = 0;
  for (int i = 0; i < forks; ++i) {
    /* A random point: spin for 0-255 us of the churn. */
    uint64_t until = hc_now_us() + device_sim_rand(&rng) % 256;
    while (hc_now_us() < until) {
    }
    if (!FORK_IN_CHURN) {
      atomic_store(&g_pause_requested, 1);
      while (atomic_load(&g_parked) < 3) sched_yield();
      for (int tries = 0; tries < 1000 && !hc_listeners_asleep(); ++tries) hc_sleep_ms(1);
    }
    hc_child_result_t r;
    bool started = hc_fork_child(fork_child_work, HC_CHILD_TIMEOUT_MS, &r);
    if (!FORK_IN_CHURN) atomic_store(&g_pause_requested, 0);
    if (!started) {
      failed++;
      continue;
    }
    done++;
    if (r.timed_out) {
      if (hangs++ < 3) fprintf(stderr, "fork %d: child hung: %s\n", i, hc_child_describe(&r));
    } else if (!r.exited || r.exit_code != 0) {
      if (failed++ < 3) fprintf(stderr, "fork %d: child failed: %s\n", i, hc_child_describe(&r));
    }
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < 3; ++i) pthread_join(threads[i], NULL);
  fflush(stdout);
  dup2(saved_stdout, 1);
  close(saved_stdout);
  printf("  %d forks (%s), %d hangs, %d failed children; %llu churn operations, %llu churn errors\n",
         done, FORK_IN_CHURN ? "in the middle of the churn" : "churn paused (sanitizer build)", hangs,
         failed, (unsigned long long)atomic_load(&g_churn_ops),
         (unsigned long long)atomic_load(&g_churn_errors));
  DROPIN_CHECK_MSG(done == forks, "%d of %d forks done", done, forks);
  DROPIN_CHECK_MSG(hangs == 0, "%d children hung", hangs);
  DROPIN_CHECK_MSG(failed == 0, "%d children failed", failed);
  DROPIN_CHECK_MSG(atomic_load(&g_churn_errors) == 0, "churn errors");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(DEVMEM, NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "unregister");
  hc_disable_and_free(devmem_buffer);
}

/* ---- SIGPIPE ---------------------------------------------------------------- */

/* Write attempts to fd 2 that failed with EPIPE, and how many of those were
 * the library's note about it. */
static _Atomic int g_epipe_writes, g_epipe_notes;

/* Interposes write(2) (the library's writes resolve to the executable's
 * definition first) to count what was written to a broken stderr. */
ssize_t write(int fd, const void* data, size_t size) {
  ssize_t n = (ssize_t)syscall(SYS_write, fd, data, size);
  if (fd == 2 && n < 0 && errno == EPIPE) {
    int saved = errno;
    atomic_fetch_add(&g_epipe_writes, 1);
    if (memmem(data, size, "EPIPE", 5) != NULL) atomic_fetch_add(&g_epipe_notes, 1);
    errno = saved;
  }
  return n;
}

static int child_broken_stderr(void) {
  int failures = 0;
  hc_hsa_init();
  int fds[2];
  if (pipe(fds) != 0) return 2;
  close(fds[0]); /* the reader is gone */
  dup2(fds[1], 2);
  close(fds[1]);
  void* buffer = hc_alloc_buffer(4);
  if (!hc_enable(buffer, 4, NULL)) return 3; /* logs on the caller's thread (level 3) */
  uint64_t addresses[64];
  for (int i = 0; i < 64; ++i) addresses[i] = 0x1000u * (uint64_t)i;
  const uint64_t workgroup[3] = {1, 2, 3};
  for (int i = 0; i < 3; ++i) {
    if (device_sim_sanitizer_report(buffer, ~0ull, addresses, 0x1234, workgroup, true, true, 4,
                                    HC_CALL_TIMEOUT_NS) != DEVICE_SIM_OK) {
      return 4;
    }
  }
  static pf_message_t message;
  uint64_t result = 0;
  if (!pf_encode(&message, PF_PACKED, 1 /* stderr */, "to a broken stderr\n", NULL, 0) ||
      pf_send(buffer, &message, &result) != 0) {
    return 5;
  }
  /* Still alive and served. */
  if (device_sim_fc_checked_call(buffer, ~0ull, 9, HC_CALL_TIMEOUT_NS) != 0) return 6;
  hc_disable_and_free(buffer); /* more log lines from this thread */
  struct sigaction now;
  sigaction(SIGPIPE, NULL, &now);
  DROPIN_CHECK_INTO(failures, now.sa_handler == SIG_DFL, "SIGPIPE disposition changed");
  sigset_t pending;
  sigpending(&pending);
  DROPIN_CHECK_INTO(failures, !sigismember(&pending, SIGPIPE), "a SIGPIPE is left pending on the caller's thread");
  /* Report on stdout (stderr is gone). */
  printf("broken stderr: %d writes failed with EPIPE, %d of them the note\n", atomic_load(&g_epipe_writes),
         atomic_load(&g_epipe_notes));
  DROPIN_CHECK_INTO(failures, atomic_load(&g_epipe_writes) >= 5, "%d EPIPE writes", atomic_load(&g_epipe_writes));
  DROPIN_CHECK_INTO(failures, atomic_load(&g_epipe_notes) == 1, "EPIPE noted %d times (want once)",
                 atomic_load(&g_epipe_notes));
  if (failures) printf("broken stderr: %d failed checks\n", failures);
  fflush(stdout);
  return failures == 0 ? 0 : 7;
}

static void test_sigpipe(void) {
  const char* const env[] = {"AMD_LOG_LEVEL=3", NULL};
  hc_child_result_t r;
  HC_CHILD_OK("broken_stderr", env, HC_CHILD_TIMEOUT_MS, &r);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {{"broken_stderr", child_broken_stderr}, {NULL, NULL}};
  hc_child_main(argc, argv, cases);
  hc_hsa_init();
  const char* only = argc > 1 ? argv[1] : NULL;
  if (only == NULL || strcmp(only, "sigpipe") == 0) HC_RUN(test_sigpipe);
  if (only == NULL || strcmp(only, "fork") == 0) {
#if defined(__SANITIZE_THREAD__)
    /* In the child of a multi-threaded fork glibc hands the parent's thread
     * stacks to new threads; TSan's copied thread registry then sees a
     * "dup thread with used id" and ends the child. */
    printf("skip test_fork_churn: ThreadSanitizer cannot follow threads started in the child of a "
           "multi-threaded fork\n");
    (void)test_fork_churn;
    if (only != NULL) return dropin_failures == 0 ? 77 : 1;
#else
    HC_RUN(test_fork_churn);
#endif
  }
  return dropin_check_exit_code();
}
