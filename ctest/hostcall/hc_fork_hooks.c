/* fork at the library's delicate moments, made deterministic by the pause
 * points of the test-hook build (src/test_hooks.rs): a thread is held inside
 * a once-only initializer while the test forks, and the child must not wait
 * for a thread it does not have. Linked only with the hook build.
 *
 * - exit_after_fork_in_idle_wait: a child forked while the parent's listener
 *   was inside its blocked doorbell wait starts as a process that never used
 *   the hostcall half: its exit() waits for no listener (checked with the
 *   library's count of such waits, not with a clock).
 * - fork_in_process_hooks: a fork while another thread is inside the process
 *   hooks of the first listener start (pin, exit handler); the child's own
 *   first enable must not wait for them.
 * - fork_in_status_allocator: a fork while another thread looks up IREE's
 *   status allocator for the first vmem status; the child's vmem calls must
 *   not wait for it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amdgpu_dropin_hostcall_constants.h"
#include "device_sim.h"
#include "hc_test.h"
#include "hsa_sim.h"
#include "iree/hal/drivers/amdgpu/util/vmem.h"
#include "rochostcall.hpp"

/* The hook build's exports (src/ffi/test_hooks.rs); no public header. */
void amdgpu_dropin_test_pause_arm(uint32_t point);
bool amdgpu_dropin_test_pause_reached(uint32_t point);
void amdgpu_dropin_test_pause_release(uint32_t point);
uint64_t amdgpu_dropin_test_exit_hsa_waits(void);

/* Polls `done` for up to 10 s. */
static bool wait_for(bool (*done)(void)) {
  for (int i = 0; i < 10000; ++i) {
    if (done()) return true;
    hc_sleep_ms(1);
  }
  return done();
}

/* ---- exit of a child forked during the parent's idle wait ----------------- */

/* Registered before the first enable, so it runs after the library's exit
 * handler (registered at the first listener start): it turns the library's
 * count into the exit code of a child that asked for it. */
static volatile int report_exit_waits;

static void report_exit_waits_at_exit(void) {
  if (!report_exit_waits) return;
  uint64_t waits = amdgpu_dropin_test_exit_hsa_waits();
  if (waits != 0) fprintf(stderr, "exit waited %llu time(s) for a listener in the HSA wait\n",
                          (unsigned long long)waits);
  _exit(waits == 0 ? 46 : 47);
}

static int child_exits(void) {
  /* The runtime's state is the parent's at the fork: its listener was inside
   * the blocked wait then. */
  if (hsa_sim_blocked_waits() != 1) {
    fprintf(stderr, "forked with %u blocked waits in progress (want 1)\n", hsa_sim_blocked_waits());
    return 3;
  }
  report_exit_waits = 1;
  exit(0);
}

static bool one_blocked_wait(void) { return hsa_sim_blocked_waits() == 1; }

static void test_exit_after_fork_in_idle_wait(void) {
  void* buffer = hc_alloc_buffer(4);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 4, NULL), "enable");
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 1) == 0, "call");
  DROPIN_REQUIRE_MSG(wait_for(one_blocked_wait), "the listener never entered its blocked wait");
  for (int round = 0; round < 3; ++round) {
    hc_child_result_t r;
    DROPIN_REQUIRE_MSG(hc_fork_child(child_exits, HC_CHILD_TIMEOUT_MS, &r), "fork");
    DROPIN_CHECK_MSG(r.exited && r.exit_code == 46,
                     "round %d: want exit 46 (no wait for a listener of the parent); child %s", round,
                     hc_child_describe(&r));
  }
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 2) == 0, "parent call after the forks");
  hc_disable_and_free(buffer);
}

/* ---- fork inside a once-only initializer ---------------------------------- */

static uint32_t g_point;
static bool point_reached(void) { return amdgpu_dropin_test_pause_reached(g_point); }

/* Arms pause point `point`, runs `held(arg)` on a thread until it waits
 * there, forks a child running `in_child` (which must exit 0), releases the
 * thread and joins it. Returns the failures counted (and said on stderr);
 * `*held_result` is what `held` returned. */
static int fork_while_held(uint32_t point, const char* where, void* (*held)(void*), void* arg,
                           hc_child_fn in_child, void** held_result) {
  g_point = point;
  amdgpu_dropin_test_pause_arm(point);
  pthread_t thread;
  if (pthread_create(&thread, NULL, held, arg) != 0) return 1;
  if (!wait_for(point_reached)) {
    fprintf(stderr, "never reached %s\n", where);
    amdgpu_dropin_test_pause_release(point);
    pthread_join(thread, held_result);
    return 1;
  }
  hc_child_result_t r;
  bool forked = hc_fork_child(in_child, HC_CHILD_TIMEOUT_MS, &r);
  amdgpu_dropin_test_pause_release(point);
  pthread_join(thread, held_result);
  if (!forked || !(r.exited && r.exit_code == 0)) {
    fprintf(stderr, "forked while a thread was held in %s: child %s\n", where,
            forked ? hc_child_describe(&r) : "not started");
    return 1;
  }
  return 0;
}

/* The child of a fork while the first enable's thread is held in the process
 * hooks: a fresh buffer is served and the process exits normally. */
static int grandchild_enables(void) {
  void* fresh = hc_alloc_buffer(4);
  if (!enableHostcalls(fresh, 4, NULL)) {
    fprintf(stderr, "child: enable failed\n");
    return 2;
  }
  int rc = hc_call_ok(fresh, 7);
  if (rc != 0) {
    fprintf(stderr, "child: call: %d\n", rc);
    return 3;
  }
  hc_disable_and_free(fresh);
  return 0;
}

static void* first_enable(void* buffer) { return (void*)(uintptr_t)enableHostcalls(buffer, 4, NULL); }

static int child_fork_in_process_hooks(void) {
  hc_hsa_init();
  void* buffer = hc_alloc_buffer(4);
  void* enabled = NULL;
  int failures = fork_while_held(AMDGPU_DROPIN_HOSTCALL_TEST_PAUSE_PROCESS_HOOKS, "the process hooks",
                                 first_enable, buffer, grandchild_enables, &enabled);
  if (!enabled || hc_call_ok(buffer, 1) != 0) {
    fprintf(stderr, "the held first enable did not finish well\n");
    failures++;
  }
  hc_disable_and_free(buffer);
  return failures ? 1 : 0;
}

static void test_fork_in_process_hooks(void) {
  hc_child_result_t r;
  HC_CHILD_OK("fork_in_process_hooks", NULL, 2 * HC_CHILD_TIMEOUT_MS, &r);
}

/* Any failing vmem call makes a status; the first one looks up IREE's status
 * allocator. Returns the status code (code-only: no IREE here). */
static uintptr_t failing_vmem_call(void) {
  hsa_agent_t agent = {0};
  hsa_amd_memory_pool_t pool;
  iree_status_t status = iree_hal_amdgpu_find_coarse_global_memory_pool(NULL, agent, &pool);
  return (uintptr_t)status & IREE_STATUS_CODE_MASK;
}

static void* first_status(void* unused) {
  (void)unused;
  return (void*)failing_vmem_call();
}

static int grandchild_vmem_status(void) {
  uintptr_t code = failing_vmem_call();
  if (code != IREE_STATUS_INVALID_ARGUMENT) {
    fprintf(stderr, "child: status code %lu (want INVALID_ARGUMENT)\n", (unsigned long)code);
    return 2;
  }
  return 0;
}

static int child_fork_in_status_allocator(void) {
  void* code = NULL;
  int failures = fork_while_held(AMDGPU_DROPIN_HOSTCALL_TEST_PAUSE_STATUS_ALLOCATOR,
                                 "the status allocator lookup", first_status, NULL, grandchild_vmem_status, &code);
  if ((uintptr_t)code != IREE_STATUS_INVALID_ARGUMENT) {
    fprintf(stderr, "the held call returned code %lu\n", (unsigned long)(uintptr_t)code);
    failures++;
  }
  return failures ? 1 : 0;
}

static void test_fork_in_status_allocator(void) {
  hc_child_result_t r;
  HC_CHILD_OK("fork_in_status_allocator", NULL, 2 * HC_CHILD_TIMEOUT_MS, &r);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"fork_in_process_hooks", child_fork_in_process_hooks},
      {"fork_in_status_allocator", child_fork_in_status_allocator},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
#if defined(__SANITIZE_THREAD__)
  printf("skipped: ThreadSanitizer cannot follow the threads a child of a multi-threaded fork starts\n");
  return 77;
#endif
  atexit(report_exit_waits_at_exit);
  hc_hsa_init();
  HC_RUN(test_exit_after_fork_in_idle_wait);
  HC_RUN(test_fork_in_process_hooks);
  HC_RUN(test_fork_in_status_allocator);
  return dropin_check_exit_code();
}
