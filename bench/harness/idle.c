/* hostcall_bench: the idle listener's CPU. */
#include <linux/futex.h>
#include <math.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amdgpu_dropin_hostcall_constants.h"
#include "bench.h"

idle_t g_idle[MODE_COUNT];
bool g_have_idle;

/* The controls for the idle figure: threads that wait on a futex nobody
 * wakes, so the idle figure can be read against what its wake-ups alone
 * cost on this machine (on a virtual machine a timed wake-up costs far more
 * CPU than on bare metal). One sleeps on the product listener's idle
 * schedule (first timeout WAIT_TIMEOUT_MS, each next one IDLE_WAIT_GROWTH
 * times longer up to IDLE_WAIT_MAX_MS), the other every LOST_RING_WATCH_MS,
 * as the lost-ring watch looks. */
typedef struct {
  _Atomic uint32_t stop; /* futex word */
  uint64_t period_ms;    /* 0: the listener's idle schedule */
  pthread_t thread;
  bool running;
} bare_sleeper_t;

static void* bare_sleeper_main(void* arg) {
  bare_sleeper_t* b = arg;
  uint64_t timeout_ms = b->period_ms ? b->period_ms : AMDGPU_DROPIN_HOSTCALL_WAIT_TIMEOUT_MS;
  while (atomic_load_explicit(&b->stop, memory_order_relaxed) == 0) {
    struct timespec ts = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L};
    syscall(SYS_futex, &b->stop, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    if (b->period_ms) continue;
    timeout_ms *= AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_GROWTH;
    if (timeout_ms > AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS) {
      timeout_ms = AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS;
    }
  }
  return NULL;
}

static void bare_sleeper_start(bare_sleeper_t* b, uint64_t period_ms) {
  atomic_init(&b->stop, 0);
  b->period_ms = period_ms;
  b->running = pthread_create(&b->thread, NULL, bare_sleeper_main, b) == 0;
}

static void bare_sleeper_stop(bare_sleeper_t* b) {
  if (!b->running) return;
  atomic_store_explicit(&b->stop, 1, memory_order_relaxed);
  syscall(SYS_futex, &b->stop, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  pthread_join(b->thread, NULL);
}

static uint64_t pthread_cpu_ns(pthread_t thread) {
  clockid_t clock;
  struct timespec ts;
  if (pthread_getcpuclockid(thread, &clock) != 0 || clock_gettime(clock, &ts) != 0) return 0;
  return timespec_ns(&ts);
}

static uint64_t bare_sleeper_cpu_ns(const bare_sleeper_t* b) {
  return b->running ? pthread_cpu_ns(b->thread) : 0;
}

/* CPU (ms) between two readings; NAN when the control never ran. */
static double bare_sleeper_cpu_ms(const bare_sleeper_t* b, uint64_t from_ns, uint64_t to_ns) {
  return b->running ? (double)(to_ns - from_ns) / 1e6 : NAN;
}

static bool run_idle(const options_t* opt, idle_t* r) {
  r->ok = false;
  hsa_sim_set_wait_wake_delay_us(20);
  hsa_sim_set_periodic_recheck(false, 1000);
  if (!enable_buffers(r->mode, r->buffers)) return false;
  /* One call per buffer first, so the listener has just been active (its
   * poll window, if any, must end by itself), then settle. */
  uint64_t lanes[64][8];
  for (uint32_t i = 0; i < r->buffers; ++i) {
    memset(lanes, 0, sizeof(lanes));
    lanes[0][0] = (uint64_t)(uintptr_t)&bench_function;
    if (device_sim_hostcall(g_buffers[i], DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, lanes,
                            CALL_TIMEOUT_NS) != DEVICE_SIM_OK) {
      fprintf(stderr, "hostcall_bench: idle warm-up call failed\n");
      disable_buffers(r->buffers);
      return false;
    }
  }
  /* The controls start their schedules when the listener last had work. */
  bare_sleeper_t sleeper, watcher;
  bare_sleeper_start(&sleeper, 0);
  bare_sleeper_start(&watcher, AMDGPU_DROPIN_HOSTCALL_LOST_RING_WATCH_MS);
  sleep_ms(200);
  thread_set_t before, after;
  listener_threads(&before);
  uint64_t sleeper0 = bare_sleeper_cpu_ns(&sleeper);
  uint64_t watcher0 = bare_sleeper_cpu_ns(&watcher);
  uint64_t cpu0 = process_cpu_ns();
  uint64_t t0 = device_sim_now_ns();
  sleep_ms(opt->idle_ms);
  uint64_t t1 = device_sim_now_ns();
  uint64_t cpu1 = process_cpu_ns();
  uint64_t sleeper1 = bare_sleeper_cpu_ns(&sleeper);
  uint64_t watcher1 = bare_sleeper_cpu_ns(&watcher);
  listener_threads(&after);
  bare_sleeper_stop(&sleeper);
  bare_sleeper_stop(&watcher);
  r->bare_sleeper_cpu_ms = bare_sleeper_cpu_ms(&sleeper, sleeper0, sleeper1);
  r->bare_watch_period_cpu_ms = bare_sleeper_cpu_ms(&watcher, watcher0, watcher1);
  add_buffer_counters(r->buffers, &r->counters);
  disable_buffers(r->buffers);
  uint64_t lcpu = listener_cpu_delta(&before, &after);
  r->seconds = (double)(t1 - t0) / 1e9;
  r->listener_cpu_ms = (double)lcpu / 1e6;
  r->listener_cpu_pct = 100.0 * (double)lcpu / (double)(t1 - t0);
  r->process_cpu_ms = (double)(cpu1 - cpu0) / 1e6;
  r->ok = true;
  return true;
}


int run_idle_section(const options_t* opt) {
  int failures = 0;
  g_pin_listener = false;
  unpin_main_thread();
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (!opt->modes[m]) continue;
    idle_t* idle = &g_idle[m];
    memset(idle, 0, sizeof(*idle));
    idle->mode = m;
    idle->buffers = 8;
    if (!run_idle(opt, idle)) {
      ++failures;
      printf("idle           %-11s FAILED\n", kModeName[m]);
      continue;
    }
    g_have_idle = true;
    printf("idle           %-11s listener CPU %.3f ms in %.2f s; bare threads sleeping on ours' idle "
           "schedule %.3f ms, every %d ms %.3f ms\n",
           kModeName[m], idle->listener_cpu_ms, idle->seconds, idle->bare_sleeper_cpu_ms,
           AMDGPU_DROPIN_HOSTCALL_LOST_RING_WATCH_MS, idle->bare_watch_period_cpu_ms);
  }
  return failures;
}
