/* hostcall_bench: FUNCTION_CALL round trips from simulated GPU waves (the
 * device simulator) through the hostcall listener, on the software HSA
 * runtime, measured for the product listener ("ours") and for the baseline
 * strategy ("baseline", a re-implementation of upstream's listener built into
 * the benchmark variant of the library with the `bench-baseline` feature).
 * Both run in the same process, one configuration after the other, so every
 * figure is printed as a ratio against the baseline of the same run.
 *
 * Per configuration (listener mode x wake delay x waves W x buffers B):
 * round trips per second, p50/p99/p99.9 round-trip latency, process CPU and
 * listener-thread CPU per round trip. Plus the idle listener CPU (buffers
 * enabled, no traffic, periodic re-check off) and the slow-buffer isolation
 * case. Output: a table on stdout, a JSON file, an SVG plot.
 *
 * Usage: hostcall_bench [--duration-ms N] [--warmup-ms N] [--idle-ms N]
 *                       [--json PATH] [--svg PATH] [--quick] [--no-isolation]
 *                       [--no-idle] [--modes baseline,ours] [--delays 0,20]
 *                       [--waves 1,4,16,64] [--buffers 1,8]
 *                       [--wave-sched idle|nice19|normal] [--pin] [--no-wave-yield] [--segments N]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "device_sim.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

/* ---- settings ------------------------------------------------------------ */

#define LISTENER_ENV "AMDGPU_DROPIN_HOSTCALL_LISTENER"
/* Thread names the library gives its listener threads (Linux comm, <= 15
 * chars): product listener, its helper for slow buffers, baseline. */
#define THREAD_PREFIX "amdgpu-h"
#define THREAD_OURS "amdgpu-hostcall"
#define THREAD_BASELINE "amdgpu-hc-base"

#define PACKETS_PER_BUFFER 64u
#define MAX_BUFFERS 8u
#define MAX_WAVES 64u
#define MAX_LIST 8
#define CALL_TIMEOUT_NS (30ull * 1000 * 1000 * 1000)
#define SLOW_FUNCTION_NS (1000ull * 1000) /* the slow host function: 1 ms */
#define ISOLATION_BUFFERS 8u
#define ISOLATION_NORMAL_WAVES 14u

enum { MODE_BASELINE = 0, MODE_OURS = 1, MODE_COUNT = 2 };
static const char* const kModeName[MODE_COUNT] = {"baseline", "ours"};

typedef struct {
  uint32_t duration_ms;
  uint32_t segments;
  uint32_t warmup_ms;
  uint32_t idle_ms;
  const char* json_path;
  const char* svg_path;
  bool isolation;
  bool idle;
  bool modes[MODE_COUNT];
  uint32_t delays[MAX_LIST];
  uint32_t delay_count;
  uint32_t waves[MAX_LIST];
  uint32_t wave_count;
  uint32_t buffers[MAX_LIST];
  uint32_t buffer_count;
} options_t;

/* ---- latency histogram (log-linear, 32 sub-buckets per power of two) ------- */

#define SUB_BITS 5u
#define SUB_COUNT (1u << SUB_BITS)
#define BUCKETS ((64u - SUB_BITS + 1u) * SUB_COUNT)

static uint32_t bucket_of(uint64_t v) {
  if (v < SUB_COUNT) return (uint32_t)v;
  uint32_t msb = 63u - (uint32_t)__builtin_clzll(v);
  return ((msb - SUB_BITS + 1u) << SUB_BITS) + (uint32_t)((v >> (msb - SUB_BITS)) & (SUB_COUNT - 1u));
}

/* Lowest value of bucket b, and its width. */
static void bucket_range(uint32_t b, uint64_t* low, uint64_t* width) {
  if (b < SUB_COUNT) {
    *low = b;
    *width = 1;
    return;
  }
  uint32_t msb = (b >> SUB_BITS) + SUB_BITS - 1u;
  uint64_t sub = b & (SUB_COUNT - 1u);
  *width = 1ull << (msb - SUB_BITS);
  *low = (1ull << msb) + sub * *width;
}

/* Value at quantile q (0..1): midpoint of the bucket holding it. */
static double hist_quantile(const uint64_t* hist, uint64_t total, double q) {
  if (total == 0) return 0.0;
  uint64_t rank = (uint64_t)ceil(q * (double)total);
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (uint32_t b = 0; b < BUCKETS; ++b) {
    seen += hist[b];
    if (seen >= rank) {
      uint64_t low, width;
      bucket_range(b, &low, &width);
      return (double)low + (double)(width - 1) / 2.0;
    }
  }
  return 0.0;
}

/* ---- per-wave state, host functions, fill/check hooks ---------------------- */

typedef struct {
  _Alignas(64) uint64_t t_start;
  bool sched_set;
  uint64_t count;
  uint64_t bad;
  uint64_t sum_ns;
  uint64_t* hist;
} wave_state_t;

typedef struct {
  wave_state_t* states;
  bool slow;
} group_t;

static _Atomic int g_measuring;

/* How wave threads are scheduled (--wave-sched). GPU waves spin on device
 * memory without taking host CPU; simulated waves spin on host cores. With
 * 64 always-runnable wave threads on 2 cores, a fair scheduler (EEVDF/CFS)
 * gives any host thread about 1/65 of the machine whatever it does, so
 * by default the wave threads run as SCHED_IDLE: their spinning only uses
 * CPU the host threads leave idle, as on a GPU. Both listener modes get the
 * same treatment. */
enum { WAVE_SCHED_IDLE = 0, WAVE_SCHED_NICE = 1, WAVE_SCHED_NORMAL = 2 };
static const char* const kWaveSchedName[] = {"idle", "nice19", "normal"};
static int g_wave_sched = WAVE_SCHED_NORMAL;

/* --pin: the library's listener threads run on CPU 0 and the wave threads
 * on the other CPUs, so simulated waves never take the listener's core (GPU
 * waves don't run on host cores). Off by default: on a 2-core machine shared
 * with other work, the waves' single core is then easily starved. */
static bool g_pin = false;

/* --no-wave-yield turns this off: each simulated wave yields the CPU once
 * before each call (in the fill hook, as if the wave computed between
 * calls). On 2 cores, a wave served within microseconds otherwise keeps its
 * core and calls again while other runnable waves wait for the scheduler's
 * time slice (milliseconds), which shows up as a p99 of the simulation's
 * scheduling, not of the listener. Same for both modes. */
static bool g_wave_yield = true;

static void pin_current_thread_to_waves(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (!g_pin || cpus < 2) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (long c = 1; c < cpus && c < CPU_SETSIZE; ++c) CPU_SET((int)c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    fprintf(stderr, "hostcall_bench: cannot pin a wave thread\n");
  }
}

static void set_wave_scheduling(void) {
  if (g_wave_sched == WAVE_SCHED_IDLE) {
    struct sched_param param = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) != 0) {
      fprintf(stderr, "hostcall_bench: cannot make a wave thread SCHED_IDLE\n");
    }
  } else if (g_wave_sched == WAVE_SCHED_NICE) {
    /* Linux nice values are per thread. */
    if (setpriority(PRIO_PROCESS, (id_t)gettid(), 19) != 0) {
      fprintf(stderr, "hostcall_bench: cannot renice a wave thread\n");
    }
  }
}

/* The trivial host function of every normal request. */
static void bench_function(uint64_t out[2], const uint64_t in[7]) {
  out[0] = in[0] + 1;
  out[1] = in[1] ^ 0x5A5A5A5A5A5A5A5Aull;
}

/* The slow buffer's host function: 1 ms (sleeping, like a blocked write). */
static void slow_function(uint64_t out[2], const uint64_t in[7]) {
  struct timespec ts = {0, (long)SLOW_FUNCTION_NS};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  bench_function(out, in);
}

static void fill_hook(void* user, uint32_t wave, uint32_t call, uint64_t* rng, uint32_t* service,
                      uint64_t* activemask, uint64_t lanes[64][8]) {
  (void)rng;
  group_t* group = (group_t*)user;
  if (!group->states[wave].sched_set) {
    group->states[wave].sched_set = true;
    set_wave_scheduling();
    pin_current_thread_to_waves();
  }
  if (g_wave_yield) sched_yield();
  *service = DEVICE_SIM_SERVICE_FUNCTION_CALL;
  *activemask = ~0ull;
  for (uint32_t lane = 0; lane < 64; ++lane) {
    bool slow = group->slow && lane == 0;
    lanes[lane][0] = (uint64_t)(uintptr_t)(slow ? &slow_function : &bench_function);
    lanes[lane][1] = ((uint64_t)wave << 40) ^ ((uint64_t)call << 8) ^ lane;
    lanes[lane][2] = (uint64_t)lane * 0x9E3779B97F4A7C15ull;
  }
  group->states[wave].t_start = device_sim_now_ns();
}

static int check_hook(void* user, uint32_t wave, uint32_t call, uint32_t service,
                      uint64_t activemask, const uint64_t in[64][8], const uint64_t out[64][8]) {
  (void)call;
  (void)service;
  (void)activemask;
  uint64_t now = device_sim_now_ns();
  group_t* group = (group_t*)user;
  wave_state_t* state = &group->states[wave];
  uint64_t latency = now - state->t_start;
  int bad = 0;
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (out[lane][0] != in[lane][1] + 1 || out[lane][1] != (in[lane][2] ^ 0x5A5A5A5A5A5A5A5Aull)) {
      bad = 1;
    }
  }
  /* Relaxed: the main thread flips it between windows; a call at the edge
   * lands in either window, which does not matter. */
  if (atomic_load_explicit(&g_measuring, memory_order_relaxed)) {
    state->count++;
    state->sum_ns += latency;
    state->hist[bucket_of(latency)]++;
  }
  if (bad) state->bad++;
  return bad;
}

/* ---- CPU accounting ------------------------------------------------------ */

static uint64_t timespec_ns(const struct timespec* ts) {
  return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

/* Busy CPU time of the whole machine (all processes), from /proc/stat. */
static uint64_t machine_busy_ns(void) {
  FILE* f = fopen("/proc/stat", "r");
  if (f == NULL) return 0;
  unsigned long long v[8] = {0};
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n < 5) return 0;
  /* user nice system idle iowait irq softirq steal: busy = all but idle+iowait */
  unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  long hz = sysconf(_SC_CLK_TCK);
  return hz > 0 ? (uint64_t)(busy * (1000000000ull / (unsigned long long)hz)) : 0;
}

static uint64_t process_cpu_ns(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ull +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ull;
}

/* CPU time of another thread of this process, in ns: its per-thread CPU
 * clock (Linux encodes the tid in the clock id), else its schedstat. */
static bool thread_cpu_ns(int tid, uint64_t* out) {
  clockid_t clock = (clockid_t)((~(unsigned)tid) << 3) | 6; /* per-thread, scheduler clock */
  struct timespec ts;
  if (clock_gettime(clock, &ts) == 0) {
    *out = timespec_ns(&ts);
    return true;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", tid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return false;
  unsigned long long ns = 0;
  bool ok = fscanf(f, "%llu", &ns) == 1;
  fclose(f);
  *out = ns;
  return ok;
}

#define MAX_TRACKED 16
typedef struct {
  int tids[MAX_TRACKED];
  uint64_t cpu[MAX_TRACKED];
  char names[MAX_TRACKED][16];
  int count;
} thread_set_t;

/* The library's listener threads (names starting with THREAD_PREFIX). */
static void listener_threads(thread_set_t* set) {
  set->count = 0;
  DIR* dir = opendir("/proc/self/task");
  if (dir == NULL) return;
  struct dirent* e;
  while ((e = readdir(dir)) != NULL && set->count < MAX_TRACKED) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300];
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE* f = fopen(path, "r");
    if (f == NULL) continue;
    char name[32] = {0};
    if (fgets(name, sizeof(name), f) != NULL) {
      name[strcspn(name, "\n")] = '\0';
      if (strncmp(name, THREAD_PREFIX, strlen(THREAD_PREFIX)) == 0) {
        int tid = atoi(e->d_name);
        uint64_t cpu = 0;
        if (thread_cpu_ns(tid, &cpu)) {
          set->tids[set->count] = tid;
          set->cpu[set->count] = cpu;
          /* Thread names are at most 15 characters (TASK_COMM_LEN 16). */
          snprintf(set->names[set->count], sizeof(set->names[0]), "%.*s",
                   (int)sizeof(set->names[0]) - 1, name);
          set->count++;
        }
      }
    }
    fclose(f);
  }
  closedir(dir);
}

/* CPU the listener threads used between two snapshots (a thread that
 * appeared in between counts from 0). */
static uint64_t listener_cpu_delta(const thread_set_t* before, const thread_set_t* after) {
  uint64_t total = 0;
  for (int i = 0; i < after->count; ++i) {
    uint64_t start = 0;
    for (int j = 0; j < before->count; ++j) {
      if (before->tids[j] == after->tids[i]) start = before->cpu[j];
    }
    total += after->cpu[i] >= start ? after->cpu[i] - start : 0;
  }
  return total;
}

/* Pins the listener threads in `set` to CPU 0 (see g_pin). */
static void pin_listener_threads(const thread_set_t* set) {
  if (!g_pin || sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(0, &cpus);
  for (int i = 0; i < set->count; ++i) {
    if (sched_setaffinity((pid_t)set->tids[i], sizeof(cpus), &cpus) != 0) {
      fprintf(stderr, "hostcall_bench: cannot pin listener thread %d\n", set->tids[i]);
    }
  }
}

static bool has_thread(const thread_set_t* set, const char* name) {
  for (int i = 0; i < set->count; ++i) {
    if (strcmp(set->names[i], name) == 0) return true;
  }
  return false;
}

static void sleep_ms(uint32_t ms) {
  struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- buffers and listener mode ------------------------------------------- */

static void* g_buffers[MAX_BUFFERS];

static bool alloc_buffers(void) {
  size_t size = getHostcallBufferSize(PACKETS_PER_BUFFER);
  size_t rounded = (size + 4095u) & ~(size_t)4095u;
  for (uint32_t i = 0; i < MAX_BUFFERS; ++i) {
    g_buffers[i] = aligned_alloc(4096, rounded);
    if (g_buffers[i] == NULL) return false;
    memset(g_buffers[i], 0, rounded);
  }
  return true;
}

static void disable_buffers(uint32_t count);

/* Enables `count` buffers with the listener of `mode` (the listener starts
 * with the first enable and reads the mode then) and checks that the
 * library really runs that listener. */
static bool enable_buffers(int mode, uint32_t count) {
  if (mode == MODE_BASELINE) {
    setenv(LISTENER_ENV, "baseline", 1);
  } else {
    unsetenv(LISTENER_ENV);
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (!enableHostcalls(g_buffers[i], PACKETS_PER_BUFFER, g_buffers[i])) {
      fprintf(stderr, "hostcall_bench: enableHostcalls failed (AMD_LOG_LEVEL=1 says why)\n");
      disable_buffers(i);
      return false;
    }
  }
  /* The new thread names itself when it starts running: give it a moment. */
  thread_set_t set;
  const char* want = mode == MODE_BASELINE ? THREAD_BASELINE : THREAD_OURS;
  for (int attempt = 0; attempt < 200; ++attempt) {
    listener_threads(&set);
    if (has_thread(&set, want)) break;
    sleep_ms(5);
  }
  pin_listener_threads(&set);
  if (!has_thread(&set, want)) {
    disable_buffers(count);
    fprintf(stderr,
            "hostcall_bench: no listener thread named \"%s\" after enabling buffers%s\n", want,
            mode == MODE_BASELINE
                ? " (the library was built without the bench-baseline feature?)"
                : "");
    return false;
  }
  return true;
}

static void disable_buffers(uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) disableHostcalls(g_buffers[i], g_buffers[i]);
}

/* ---- one measured configuration ---------------------------------------- */

enum { KIND_THROUGHPUT = 0, KIND_ISOLATION_REF = 1, KIND_ISOLATION_SLOW = 2 };

typedef struct {
  int kind;
  int mode;
  uint32_t delay_us;
  uint32_t waves;
  uint32_t buffers;
  /* results */
  bool ok;
  uint64_t calls;
  double seconds;
  double rts;
  double mean_us, p50_us, p99_us, p999_us, max_us;
  double process_cpu_us_per_rt;
  double listener_cpu_us_per_rt;
  double listener_cpu_pct; /* of one core, over the window */
  double other_load_cores; /* CPU used by other processes during the window */
  int listener_thread_count; /* listener threads (main + helper) at the end */
  /* accumulated over the segments */
  uint32_t segments;
  bool failed;
  uint64_t acc_sum_ns, acc_window_ns, acc_proc_ns, acc_listener_ns, acc_other_ns;
  uint64_t hist[BUCKETS];
  uint64_t slow_calls;     /* isolation: calls of the slow wave in the window */
} result_t;

static wave_state_t g_states[MAX_WAVES + 1];
static uint64_t g_hist_storage[(MAX_WAVES + 1) * BUCKETS];

static void reset_states(void) {
  memset(g_hist_storage, 0, sizeof(g_hist_storage));
  for (uint32_t i = 0; i < MAX_WAVES + 1; ++i) {
    memset(&g_states[i], 0, sizeof(g_states[i]));
    g_states[i].hist = &g_hist_storage[(size_t)i * BUCKETS];
  }
}

/* Runs one segment of configuration `r` (warm-up, then `duration_ms` of
 * measurement) and adds it to r's accumulators; `finish_result` derives the
 * figures. The main loop alternates baseline and ours segment by segment, so
 * a change in the machine's background load hits both modes alike. */
static bool run_segment(const options_t* opt, result_t* r, uint32_t duration_ms) {
  hsa_sim_set_wait_wake_delay_us(r->delay_us);
  hsa_sim_set_periodic_recheck(false, 1000);
  reset_states();
  if (!enable_buffers(r->mode, r->buffers)) return false;

  /* Normal waves: states[0..waves); on the isolation runs they use buffers
   * 1..B-1 and the slow wave (states[MAX_WAVES]) uses buffer 0. */
  group_t normal = {g_states, false};
  group_t slow = {&g_states[MAX_WAVES], true};
  bool isolation = r->kind != KIND_THROUGHPUT;
  void* const* buffers = isolation ? (void* const*)&g_buffers[1] : (void* const*)g_buffers;
  uint32_t buffer_count = isolation ? r->buffers - 1 : r->buffers;
  device_sim_waves_config_t config =
      device_sim_waves_config(buffers, buffer_count, r->waves, 0, 4, CALL_TIMEOUT_NS);
  config.fill = fill_hook;
  config.check = check_hook;
  config.user = &normal;
  device_sim_waves_config_t slow_config = config;
  slow_config.buffers = (void* const*)g_buffers;
  slow_config.buffer_count = 1;
  slow_config.waves = 1;
  slow_config.user = &slow;

  device_sim_waves_t* slow_waves = NULL;
  if (r->kind == KIND_ISOLATION_SLOW) slow_waves = device_sim_waves_start(&slow_config);
  device_sim_waves_t* waves = device_sim_waves_start(&config);
  if (waves == NULL || (r->kind == KIND_ISOLATION_SLOW && slow_waves == NULL)) {
    fprintf(stderr, "hostcall_bench: cannot start the wave threads\n");
    return false;
  }
  sleep_ms(opt->warmup_ms);

  thread_set_t before, after;
  listener_threads(&before);
  pin_listener_threads(&before); /* helpers started during the warm-up */
  uint64_t busy0 = machine_busy_ns();
  uint64_t cpu0 = process_cpu_ns();
  uint64_t t0 = device_sim_now_ns();
  /* Relaxed: see check_hook. */
  atomic_store_explicit(&g_measuring, 1, memory_order_relaxed);
  sleep_ms(duration_ms);
  atomic_store_explicit(&g_measuring, 0, memory_order_relaxed);
  uint64_t t1 = device_sim_now_ns();
  uint64_t cpu1 = process_cpu_ns();
  uint64_t busy1 = machine_busy_ns();
  listener_threads(&after);

  device_sim_waves_stop(waves);
  if (slow_waves != NULL) device_sim_waves_stop(slow_waves);
  device_sim_waves_result_t wr, sr;
  int rc = device_sim_waves_join(waves, &wr);
  int src = slow_waves != NULL ? device_sim_waves_join(slow_waves, &sr) : 0;
  disable_buffers(r->buffers);
  if (rc != 0 || src != 0) {
    fprintf(stderr, "hostcall_bench: %s W=%u B=%u: wave failure: %s\n", kModeName[r->mode],
            r->waves, r->buffers, rc != 0 ? wr.first_failure : sr.first_failure);
    return false;
  }

  for (uint32_t w = 0; w < r->waves; ++w) {
    r->calls += g_states[w].count;
    r->acc_sum_ns += g_states[w].sum_ns;
    for (uint32_t b = 0; b < BUCKETS; ++b) r->hist[b] += g_states[w].hist[b];
  }
  r->slow_calls += g_states[MAX_WAVES].count;
  r->acc_window_ns += t1 - t0;
  r->acc_proc_ns += cpu1 - cpu0;
  r->acc_listener_ns += listener_cpu_delta(&before, &after);
  uint64_t busy = busy1 - busy0, mine = cpu1 - cpu0;
  r->acc_other_ns += busy > mine ? busy - mine : 0;
  if (after.count > r->listener_thread_count) r->listener_thread_count = after.count;
  r->segments++;
  return true;
}

static void finish_result(result_t* r) {
  r->ok = !r->failed && r->calls > 0 && r->acc_window_ns > 0;
  if (!r->ok) return;
  uint64_t calls = r->calls, all_calls = r->calls + r->slow_calls;
  r->seconds = (double)r->acc_window_ns / 1e9;
  r->rts = (double)calls / r->seconds;
  r->mean_us = (double)r->acc_sum_ns / (double)calls / 1e3;
  r->p50_us = hist_quantile(r->hist, calls, 0.50) / 1e3;
  r->p99_us = hist_quantile(r->hist, calls, 0.99) / 1e3;
  r->p999_us = hist_quantile(r->hist, calls, 0.999) / 1e3;
  r->max_us = hist_quantile(r->hist, calls, 1.0) / 1e3;
  r->process_cpu_us_per_rt = (double)r->acc_proc_ns / (double)all_calls / 1e3;
  r->listener_cpu_us_per_rt = (double)r->acc_listener_ns / (double)all_calls / 1e3;
  r->listener_cpu_pct = 100.0 * (double)r->acc_listener_ns / (double)r->acc_window_ns;
  r->other_load_cores = (double)r->acc_other_ns / (double)r->acc_window_ns;
}

/* Measures one configuration in both modes: `segments` alternating
 * segments per mode (baseline, ours, baseline, ours, ...). */
static void measure_pair(const options_t* opt, result_t* pair[MODE_COUNT]) {
  uint32_t segments = opt->segments;
  uint32_t per = opt->duration_ms / segments;
  if (per == 0) per = 1;
  for (uint32_t seg = 0; seg < segments; ++seg) {
    for (int m = 0; m < MODE_COUNT; ++m) {
      if (pair[m] == NULL || pair[m]->failed) continue;
      if (!run_segment(opt, pair[m], per)) pair[m]->failed = true;
    }
  }
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (pair[m] != NULL) finish_result(pair[m]);
  }
}

/* ---- idle ---------------------------------------------------------------- */

typedef struct {
  int mode;
  uint32_t buffers;
  bool ok;
  double seconds;
  double listener_cpu_ms;
  double listener_cpu_pct;
  double process_cpu_ms;
} idle_t;

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
  sleep_ms(200);
  thread_set_t before, after;
  listener_threads(&before);
  uint64_t cpu0 = process_cpu_ns();
  uint64_t t0 = device_sim_now_ns();
  sleep_ms(opt->idle_ms);
  uint64_t t1 = device_sim_now_ns();
  uint64_t cpu1 = process_cpu_ns();
  listener_threads(&after);
  disable_buffers(r->buffers);
  uint64_t lcpu = listener_cpu_delta(&before, &after);
  r->seconds = (double)(t1 - t0) / 1e9;
  r->listener_cpu_ms = (double)lcpu / 1e6;
  r->listener_cpu_pct = 100.0 * (double)lcpu / (double)(t1 - t0);
  r->process_cpu_ms = (double)(cpu1 - cpu0) / 1e6;
  r->ok = true;
  return true;
}

/* ---- reporting ------------------------------------------------------------ */

#define MAX_RESULTS 256
static result_t g_results[MAX_RESULTS];
static size_t g_result_count;

/* The results of one configuration, one per enabled mode (NULL for the others). */
static void new_result_pair(const options_t* opt, int kind, uint32_t delay_us, uint32_t waves,
                            uint32_t buffers, result_t* pair[MODE_COUNT]) {
  for (int m = 0; m < MODE_COUNT; ++m) {
    pair[m] = NULL;
    if (!opt->modes[m]) continue;
    result_t* r = &g_results[g_result_count++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->mode = m;
    r->delay_us = delay_us;
    r->waves = waves;
    r->buffers = buffers;
    pair[m] = r;
  }
}
static idle_t g_idle[MODE_COUNT];
static bool g_have_idle;

static const result_t* find_result(int kind, int mode, uint32_t delay, uint32_t waves,
                                   uint32_t buffers) {
  for (size_t i = 0; i < g_result_count; ++i) {
    const result_t* r = &g_results[i];
    if (r->ok && r->kind == kind && r->mode == mode && r->delay_us == delay &&
        r->waves == waves && r->buffers == buffers) {
      return r;
    }
  }
  return NULL;
}

static void print_header(uint32_t delay) {
  printf("\nwake delay %u us (periodic re-check off); W waves x 64 lanes, B buffers of %u packets\n",
         delay, PACKETS_PER_BUFFER);
  printf("%-8s %3s %2s | %10s %8s %8s %8s | %9s %9s | %7s %7s %7s | %5s %s\n", "mode", "W",
         "B", "rt/s", "p50 us", "p99 us", "p99.9 us", "cpu us/rt", "lst us/rt", "rt/s x", "p99 /",
         "p99.9 /", "other", "thr");
}

static void print_row(const result_t* r, const result_t* base) {
  printf("%-8s %3u %2u | %10.0f %8.1f %8.1f %8.1f | %9.2f %9.2f |", kModeName[r->mode], r->waves,
         r->buffers, r->rts, r->p50_us, r->p99_us, r->p999_us, r->process_cpu_us_per_rt,
         r->listener_cpu_us_per_rt);
  if (base != NULL && base != r) {
    printf(" %7.2f %7.2f %7.2f |", r->rts / base->rts, base->p99_us / r->p99_us,
           base->p999_us / r->p999_us);
  } else {
    printf(" %7s %7s %7s |", "-", "-", "-");
  }
  printf(" %5.2f %d\n", r->other_load_cores, r->listener_thread_count);
}

/* ---- targets (issue 4 item 5) ---------------------------------------------- */

typedef struct {
  char name[96];
  char detail[256];
  double value;     /* the measured figure */
  double threshold; /* the target */
  const char* unit;
  bool higher_is_better;
  bool pass;
  bool measured;
} target_t;

static target_t g_targets[32];
static size_t g_target_count;

static void add_target(const char* name, double value, double threshold, const char* unit,
                       bool higher_is_better, const char* detail) {
  if (g_target_count >= sizeof(g_targets) / sizeof(g_targets[0])) return;
  target_t* t = &g_targets[g_target_count++];
  snprintf(t->name, sizeof(t->name), "%s", name);
  snprintf(t->detail, sizeof(t->detail), "%s", detail);
  t->value = value;
  t->threshold = threshold;
  t->unit = unit;
  t->higher_is_better = higher_is_better;
  t->measured = !isnan(value);
  t->pass = t->measured && (higher_is_better ? value >= threshold : value <= threshold);
}

static void evaluate_targets(const options_t* opt) {
  char name[96], detail[256];
  const uint32_t d = 20;
  for (uint32_t bi = 0; bi < opt->buffer_count; ++bi) {
    uint32_t b = opt->buffers[bi];
    const result_t* base = find_result(KIND_THROUGHPUT, MODE_BASELINE, d, 1, b);
    const result_t* ours = find_result(KIND_THROUGHPUT, MODE_OURS, d, 1, b);
    if (base && ours) {
      snprintf(name, sizeof(name), "W=1 B=%u round trips/s vs baseline (20 us)", b);
      snprintf(detail, sizeof(detail), "ours %.0f/s, baseline %.0f/s", ours->rts, base->rts);
      add_target(name, ours->rts / base->rts, 5.0, "x", true, detail);
    }
  }
  uint32_t p99_waves[2] = {16, 64};
  for (int wi = 0; wi < 2; ++wi) {
    for (uint32_t bi = 0; bi < opt->buffer_count; ++bi) {
      uint32_t b = opt->buffers[bi];
      const result_t* base = find_result(KIND_THROUGHPUT, MODE_BASELINE, d, p99_waves[wi], b);
      const result_t* ours = find_result(KIND_THROUGHPUT, MODE_OURS, d, p99_waves[wi], b);
      if (base && ours) {
        snprintf(name, sizeof(name), "W=%u B=%u p99 lower than baseline (20 us)", p99_waves[wi], b);
        snprintf(detail, sizeof(detail), "ours %.1f us, baseline %.1f us", ours->p99_us,
                 base->p99_us);
        add_target(name, base->p99_us / ours->p99_us, 5.0, "x", true, detail);
      }
    }
  }
  {
    const result_t* base = find_result(KIND_THROUGHPUT, MODE_BASELINE, d, 16, 8);
    const result_t* ours = find_result(KIND_THROUGHPUT, MODE_OURS, d, 16, 8);
    if (base && ours) {
      snprintf(detail, sizeof(detail), "ours %.0f/s, baseline %.0f/s", ours->rts, base->rts);
      add_target("W=16 B=8 throughput vs baseline (20 us)", ours->rts / base->rts, 2.0, "x", true,
                 detail);
    }
  }
  if (g_have_idle && g_idle[MODE_OURS].ok) {
    const idle_t* idle = &g_idle[MODE_OURS];
    snprintf(detail, sizeof(detail),
             "%.3f ms of listener CPU in %.2f s = %.4f%% of one core (%u buffers; baseline %.3f ms)",
             idle->listener_cpu_ms, idle->seconds, idle->listener_cpu_pct, idle->buffers,
             g_idle[MODE_BASELINE].ok ? g_idle[MODE_BASELINE].listener_cpu_ms : NAN);
    add_target("idle listener CPU, % of one core", idle->listener_cpu_pct, 0.1, "%", false,
               detail);
  }
  {
    /* At 0 us: the worst throughput ratio over all configurations. */
    double worst = NAN;
    char worst_cfg[64] = "";
    for (uint32_t wi = 0; wi < opt->wave_count; ++wi) {
      for (uint32_t bi = 0; bi < opt->buffer_count; ++bi) {
        const result_t* base =
            find_result(KIND_THROUGHPUT, MODE_BASELINE, 0, opt->waves[wi], opt->buffers[bi]);
        const result_t* ours =
            find_result(KIND_THROUGHPUT, MODE_OURS, 0, opt->waves[wi], opt->buffers[bi]);
        if (base && ours) {
          double ratio = ours->rts / base->rts;
          if (isnan(worst) || ratio < worst) {
            worst = ratio;
            snprintf(worst_cfg, sizeof(worst_cfg), "W=%u B=%u", opt->waves[wi], opt->buffers[bi]);
          }
        }
      }
    }
    if (!isnan(worst)) {
      snprintf(detail, sizeof(detail), "lowest throughput ratio at 0 us delay: %s", worst_cfg);
      add_target("0 us delay: no configuration slower than baseline", worst, 1.0, "x", true,
                 detail);
    }
  }
  {
    const result_t* ref = find_result(KIND_ISOLATION_REF, MODE_OURS, d, ISOLATION_NORMAL_WAVES,
                                      ISOLATION_BUFFERS);
    const result_t* slow = find_result(KIND_ISOLATION_SLOW, MODE_OURS, d, ISOLATION_NORMAL_WAVES,
                                       ISOLATION_BUFFERS);
    if (ref && slow) {
      const result_t* bslow = find_result(KIND_ISOLATION_SLOW, MODE_BASELINE, d,
                                          ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS);
      snprintf(detail, sizeof(detail),
               "other buffers' p99 %.1f us with a 1 ms function on buffer 0, %.1f us without "
               "(baseline with it: %.1f us)",
               slow->p99_us, ref->p99_us, bslow ? bslow->p99_us : NAN);
      add_target("slow buffer: other buffers' p99 within 2x", slow->p99_us / ref->p99_us, 2.0,
                 "x", false, detail);
    }
  }
}

/* ---- JSON ------------------------------------------------------------------- */

static void json_number(FILE* f, double v) {
  if (isnan(v) || isinf(v)) {
    fputs("null", f);
  } else {
    fprintf(f, "%.6g", v);
  }
}

static const char* kind_name(int kind) {
  switch (kind) {
    case KIND_THROUGHPUT: return "throughput";
    case KIND_ISOLATION_REF: return "isolation_reference";
    default: return "isolation_slow_buffer";
  }
}

static bool write_json(const options_t* opt, const char* path) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "hostcall_bench: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  struct utsname u;
  uname(&u);
  fprintf(f, "{\n  \"benchmark\": \"hostcall_bench\",\n");
  fprintf(f, "  \"machine\": {\"cpus_online\": %ld, \"kernel\": \"%s %s\", \"arch\": \"%s\"},\n",
          sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, u.machine);
  fprintf(f,
          "  \"settings\": {\"duration_ms\": %u, \"warmup_ms\": %u, \"idle_ms\": %u, "
          "\"packets_per_buffer\": %u, \"lanes_per_call\": 64, \"periodic_recheck\": false, "
          "\"slow_function_us\": %llu, \"wave_sched\": \"%s\", \"pinned\": %s, \"wave_yield_per_call\": %s},\n",
          opt->duration_ms, opt->warmup_ms, opt->idle_ms, PACKETS_PER_BUFFER,
          (unsigned long long)(SLOW_FUNCTION_NS / 1000), kWaveSchedName[g_wave_sched],
          g_pin ? "true" : "false", g_wave_yield ? "true" : "false");
  fprintf(f, "  \"results\": [\n");
  for (size_t i = 0; i < g_result_count; ++i) {
    const result_t* r = &g_results[i];
    const result_t* base =
        find_result(r->kind, MODE_BASELINE, r->delay_us, r->waves, r->buffers);
    fprintf(f,
            "    {\"kind\": \"%s\", \"mode\": \"%s\", \"wake_delay_us\": %u, \"waves\": %u, "
            "\"buffers\": %u, \"ok\": %s, \"calls\": %" PRIu64 ", \"seconds\": ",
            kind_name(r->kind), kModeName[r->mode], r->delay_us, r->waves, r->buffers,
            r->ok ? "true" : "false", r->calls);
    json_number(f, r->seconds);
    fputs(", \"round_trips_per_s\": ", f);
    json_number(f, r->rts);
    fputs(", \"mean_us\": ", f);
    json_number(f, r->mean_us);
    fputs(", \"p50_us\": ", f);
    json_number(f, r->p50_us);
    fputs(", \"p99_us\": ", f);
    json_number(f, r->p99_us);
    fputs(", \"p999_us\": ", f);
    json_number(f, r->p999_us);
    fputs(", \"max_us\": ", f);
    json_number(f, r->max_us);
    fputs(", \"process_cpu_us_per_rt\": ", f);
    json_number(f, r->process_cpu_us_per_rt);
    fputs(", \"listener_cpu_us_per_rt\": ", f);
    json_number(f, r->listener_cpu_us_per_rt);
    fputs(", \"listener_cpu_pct\": ", f);
    json_number(f, r->listener_cpu_pct);
    fputs(", \"other_processes_cpu_cores\": ", f);
    json_number(f, r->other_load_cores);
    fprintf(f, ", \"listener_threads\": %d", r->listener_thread_count);
    if (r->kind == KIND_ISOLATION_SLOW) fprintf(f, ", \"slow_calls\": %" PRIu64, r->slow_calls);
    if (base != NULL && r->ok && base->ok) {
      fputs(", \"vs_baseline\": {\"round_trips_per_s\": ", f);
      json_number(f, r->rts / base->rts);
      fputs(", \"p50_lower_by\": ", f);
      json_number(f, base->p50_us / r->p50_us);
      fputs(", \"p99_lower_by\": ", f);
      json_number(f, base->p99_us / r->p99_us);
      fputs(", \"p999_lower_by\": ", f);
      json_number(f, base->p999_us / r->p999_us);
      fputs("}", f);
    }
    fprintf(f, "}%s\n", i + 1 < g_result_count ? "," : "");
  }
  fprintf(f, "  ],\n  \"idle\": [\n");
  bool first = true;
  for (int m = 0; m < MODE_COUNT && g_have_idle; ++m) {
    const idle_t* idle = &g_idle[m];
    if (!idle->ok) continue;
    fprintf(f, "%s    {\"mode\": \"%s\", \"buffers\": %u, \"seconds\": ", first ? "" : ",\n",
            kModeName[m], idle->buffers);
    json_number(f, idle->seconds);
    fputs(", \"listener_cpu_ms\": ", f);
    json_number(f, idle->listener_cpu_ms);
    fputs(", \"listener_cpu_pct\": ", f);
    json_number(f, idle->listener_cpu_pct);
    fputs(", \"process_cpu_ms\": ", f);
    json_number(f, idle->process_cpu_ms);
    fputs("}", f);
    first = false;
  }
  fprintf(f, "\n  ],\n  \"targets\": [\n");
  for (size_t i = 0; i < g_target_count; ++i) {
    const target_t* t = &g_targets[i];
    fprintf(f, "    {\"name\": \"%s\", \"value\": ", t->name);
    json_number(f, t->value);
    fprintf(f, ", \"unit\": \"%s\", \"target\": \"%s %g\", \"pass\": %s, \"detail\": \"%s\"}%s\n",
            t->unit, t->higher_is_better ? ">=" : "<=", t->threshold, t->pass ? "true" : "false",
            t->detail, i + 1 < g_target_count ? "," : "");
  }
  fprintf(f, "  ]\n}\n");
  bool ok = fclose(f) == 0;
  return ok;
}

/* ---- SVG plot ---------------------------------------------------------------- */

/* One panel per wake delay (plus one for the isolation runs): for each
 * configuration, the baseline and ours side by side, each a vertical bar from
 * p50 to p99.9 with marks at p50 (circle), p99 (square) and p99.9 (dash), on a
 * log scale. */
static bool write_svg(const options_t* opt, const char* path) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "hostcall_bench: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  double lo = 1e9, hi = 0;
  for (size_t i = 0; i < g_result_count; ++i) {
    const result_t* r = &g_results[i];
    if (!r->ok) continue;
    if (r->p50_us > 0 && r->p50_us < lo) lo = r->p50_us;
    if (r->p999_us > hi) hi = r->p999_us;
  }
  if (hi <= 0) {
    lo = 1;
    hi = 10;
  }
  double log_lo = floor(log10(lo)), log_hi = ceil(log10(hi));
  if (log_hi <= log_lo) log_hi = log_lo + 1;

  uint32_t panels = opt->delay_count + (opt->isolation ? 1u : 0u);
  const double left = 70, panel_h = 260, top = 50, gap = 70, right = 20;
  uint32_t max_groups = opt->wave_count * opt->buffer_count;
  if (max_groups < 2) max_groups = 2;
  const double group_w = 70;
  double width = left + right + group_w * max_groups + 150;
  double height = top + panels * (panel_h + gap) + 10;
  const char* color[MODE_COUNT] = {"#c0392b", "#1f77b4"};

  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
          "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n",
          width, height, width, height);
  fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
  fprintf(f,
          "<text x=\"%.0f\" y=\"22\" font-size=\"15\" font-weight=\"bold\">Hostcall round-trip "
          "latency (64-lane FUNCTION_CALL), baseline vs ours</text>\n",
          left);
  fprintf(f,
          "<text x=\"%.0f\" y=\"38\" fill=\"#555\">bar: p50 (circle) to p99.9 (dash), square = "
          "p99; log scale, microseconds; software HSA runtime + device simulator</text>\n",
          left);

  for (uint32_t p = 0; p < panels; ++p) {
    bool iso_panel = p == opt->delay_count;
    double y0 = top + p * (panel_h + gap) + 20;
    double plot_w = group_w * (iso_panel ? 2 : opt->wave_count * opt->buffer_count);
    if (iso_panel) {
      fprintf(f,
              "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">Isolation: %u waves on %u "
              "buffers, 20 us wake delay, without / with a 1 ms host function on one more "
              "buffer</text>\n",
              left, y0 - 8, ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS - 1);
    } else {
      fprintf(f,
              "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">Wake delay %u us</text>\n", left,
              y0 - 8, opt->delays[p]);
    }
    /* Axis and grid. */
    for (double e = log_lo; e <= log_hi + 1e-9; e += 1) {
      double y = y0 + panel_h - (e - log_lo) / (log_hi - log_lo) * panel_h;
      fprintf(f,
              "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
              "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g us</text>\n",
              left, y, left + plot_w, y, left - 6, y + 4, pow(10, e));
    }
    fprintf(f,
            "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, y0,
            left, y0 + panel_h);
    uint32_t groups = iso_panel ? 2 : opt->wave_count * opt->buffer_count;
    for (uint32_t g = 0; g < groups; ++g) {
      double gx = left + g * group_w;
      char label[32];
      for (int m = 0; m < MODE_COUNT; ++m) {
        const result_t* r;
        if (iso_panel) {
          r = find_result(g == 0 ? KIND_ISOLATION_REF : KIND_ISOLATION_SLOW, m, 20,
                          ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS);
          snprintf(label, sizeof(label), "%s", g == 0 ? "without" : "with slow");
        } else {
          uint32_t w = opt->waves[g / opt->buffer_count];
          uint32_t b = opt->buffers[g % opt->buffer_count];
          r = find_result(KIND_THROUGHPUT, m, opt->delays[p], w, b);
          snprintf(label, sizeof(label), "W=%u B=%u", w, b);
        }
        if (m == 0) {
          fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n",
                  gx + group_w / 2, y0 + panel_h + 16, label);
        }
        if (r == NULL || !r->ok) continue;
        double x = gx + group_w * (m == 0 ? 0.35 : 0.65);
#define YOF(v) (y0 + panel_h - (log10((v) > 0 ? (v) : pow(10, log_lo)) - log_lo) / (log_hi - log_lo) * panel_h)
        double y50 = YOF(r->p50_us), y99 = YOF(r->p99_us), y999 = YOF(r->p999_us);
#undef YOF
        fprintf(f,
                "<g><title>%s %s: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, %.0f rt/s</title>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n"
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n"
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"/>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"/></g>\n",
                label, kModeName[m], r->p50_us, r->p99_us, r->p999_us, r->rts, x, y50, x, y999,
                color[m], x, y50, color[m], x - 4, y99 - 4, color[m], x - 7, y999, x + 7, y999,
                color[m]);
      }
    }
  }
  /* Legend. */
  double lx = width - 140;
  for (int m = 0; m < MODE_COUNT; ++m) {
    fprintf(f,
            "<rect x=\"%.0f\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>"
            "<text x=\"%.0f\" y=\"%d\">%s</text>\n",
            lx, 60 + m * 18, color[m], lx + 18, 70 + m * 18, kModeName[m]);
  }
  fprintf(f, "</svg>\n");
  return fclose(f) == 0;
}

/* ---- options ------------------------------------------------------------------ */

static uint32_t parse_list(const char* text, uint32_t* out, uint32_t max) {
  uint32_t n = 0;
  char* copy = strdup(text);
  for (char* tok = strtok(copy, ","); tok != NULL && n < max; tok = strtok(NULL, ",")) {
    out[n++] = (uint32_t)strtoul(tok, NULL, 10);
  }
  free(copy);
  return n;
}

static void usage(void) {
  fprintf(stderr,
          "usage: hostcall_bench [--duration-ms N] [--warmup-ms N] [--idle-ms N] [--json PATH]\n"
          "                      [--svg PATH] [--quick] [--no-isolation] [--no-idle]\n"
          "                      [--modes baseline,ours] [--delays 0,20] [--waves 1,4,16,64]\n"
          "                      [--buffers 1,8] [--wave-sched idle|nice19|normal] [--pin] [--no-wave-yield] [--segments N]\n");
}

static bool parse_options(int argc, char** argv, options_t* opt) {
  memset(opt, 0, sizeof(*opt));
  opt->duration_ms = 2000;
  opt->segments = 4;
  opt->warmup_ms = 150;
  opt->idle_ms = 2000;
  opt->json_path = "hostcall_bench.json";
  opt->svg_path = "hostcall_bench.svg";
  opt->isolation = true;
  opt->idle = true;
  opt->modes[MODE_BASELINE] = opt->modes[MODE_OURS] = true;
  opt->delay_count = parse_list("20,0", opt->delays, MAX_LIST);
  opt->wave_count = parse_list("1,4,16,64", opt->waves, MAX_LIST);
  opt->buffer_count = parse_list("1,8", opt->buffers, MAX_LIST);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      opt->duration_ms = 60;
      opt->segments = 1;
      opt->warmup_ms = 20;
      opt->idle_ms = 100;
    } else if (strcmp(a, "--no-isolation") == 0) {
      opt->isolation = false;
    } else if (strcmp(a, "--no-wave-yield") == 0) {
      g_wave_yield = false;
    } else if (strcmp(a, "--pin") == 0) {
      g_pin = true;
    } else if (strcmp(a, "--no-idle") == 0) {
      opt->idle = false;
    } else if (v == NULL) {
      usage();
      return false;
    } else if (strcmp(a, "--duration-ms") == 0) {
      opt->duration_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--segments") == 0) {
      opt->segments = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--warmup-ms") == 0) {
      opt->warmup_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--idle-ms") == 0) {
      opt->idle_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--json") == 0) {
      opt->json_path = v, ++i;
    } else if (strcmp(a, "--svg") == 0) {
      opt->svg_path = v, ++i;
    } else if (strcmp(a, "--modes") == 0) {
      opt->modes[MODE_BASELINE] = strstr(v, "baseline") != NULL;
      opt->modes[MODE_OURS] = strstr(v, "ours") != NULL;
      ++i;
    } else if (strcmp(a, "--delays") == 0) {
      opt->delay_count = parse_list(v, opt->delays, MAX_LIST), ++i;
    } else if (strcmp(a, "--waves") == 0) {
      opt->wave_count = parse_list(v, opt->waves, MAX_LIST), ++i;
    } else if (strcmp(a, "--wave-sched") == 0) {
      g_wave_sched = strcmp(v, "normal") == 0   ? WAVE_SCHED_NORMAL
                     : strcmp(v, "nice19") == 0 ? WAVE_SCHED_NICE
                                                : WAVE_SCHED_IDLE;
      ++i;
    } else if (strcmp(a, "--buffers") == 0) {
      opt->buffer_count = parse_list(v, opt->buffers, MAX_LIST), ++i;
    } else {
      usage();
      return false;
    }
  }
  for (uint32_t i = 0; i < opt->wave_count; ++i) {
    if (opt->waves[i] == 0 || opt->waves[i] > MAX_WAVES) {
      fprintf(stderr, "hostcall_bench: waves must be 1..%u\n", MAX_WAVES);
      return false;
    }
  }
  for (uint32_t i = 0; i < opt->buffer_count; ++i) {
    if (opt->buffers[i] == 0 || opt->buffers[i] > MAX_BUFFERS) {
      fprintf(stderr, "hostcall_bench: buffers must be 1..%u\n", MAX_BUFFERS);
      return false;
    }
  }
  if (opt->segments == 0) opt->segments = 1;
  if (opt->delay_count * opt->wave_count * opt->buffer_count * MODE_COUNT + 2 * MODE_COUNT >
      MAX_RESULTS) {
    fprintf(stderr, "hostcall_bench: too many configurations (at most %d results)\n", MAX_RESULTS);
    return false;
  }
  if (opt->duration_ms == 0 || opt->delay_count == 0 || opt->wave_count == 0 ||
      opt->buffer_count == 0 || !(opt->modes[0] || opt->modes[1])) {
    usage();
    return false;
  }
  return true;
}

/* ---- main ------------------------------------------------------------------------ */

int main(int argc, char** argv) {
  options_t opt;
  if (!parse_options(argc, argv, &opt)) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (hsa_init() != HSA_STATUS_SUCCESS) {
    fprintf(stderr, "hostcall_bench: hsa_init failed\n");
    return 1;
  }
  if (!alloc_buffers()) {
    fprintf(stderr, "hostcall_bench: out of memory\n");
    return 1;
  }
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) g_pin = false;
  printf("hostcall_bench: %ld CPUs online; %u ms per configuration after %u ms warm-up; "
         "wave threads scheduled %s%s; %s\n",
         sysconf(_SC_NPROCESSORS_ONLN), opt.duration_ms, opt.warmup_ms,
         kWaveSchedName[g_wave_sched], g_wave_yield ? ", yielding once per call" : "",
         g_pin ? "listener threads pinned to CPU 0, waves to the others" : "no pinning");
  printf("columns: rt/s round trips per second; p50/p99/p99.9 round-trip latency; cpu us/rt "
         "process CPU (waves spin too) and lst us/rt listener-thread CPU per round trip; ratios "
         "vs the baseline of the same configuration (rt/s x = ours/baseline, p99 / = "
         "baseline/ours); other = CPU cores used by other processes meanwhile; thr = listener "
         "threads\n");
  int failures = 0;

  for (uint32_t di = 0; di < opt.delay_count; ++di) {
    uint32_t delay = opt.delays[di];
    print_header(delay);
    for (uint32_t wi = 0; wi < opt.wave_count; ++wi) {
      for (uint32_t bi = 0; bi < opt.buffer_count; ++bi) {
        result_t* pair[MODE_COUNT];
        new_result_pair(&opt, KIND_THROUGHPUT, delay, opt.waves[wi], opt.buffers[bi], pair);
        measure_pair(&opt, pair);
        for (int m = 0; m < MODE_COUNT; ++m) {
          result_t* r = pair[m];
          if (r == NULL) continue;
          if (!r->ok) {
            ++failures;
            printf("%-8s %3u %2u | FAILED\n", kModeName[m], r->waves, r->buffers);
            continue;
          }
          print_row(r, pair[MODE_BASELINE] != NULL && pair[MODE_BASELINE]->ok ? pair[MODE_BASELINE] : NULL);
        }
      }
    }
  }

  if (opt.isolation) {
    printf("\nisolation: %u waves on buffers 1..%u (trivial function), wake delay 20 us; "
           "\"slow\" adds 1 wave on buffer 0 whose lane-0 function takes 1 ms\n",
           ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS - 1);
    printf("%-8s %-5s | %10s %8s %8s %8s | %9s %9s | %10s | %5s %s\n", "mode", "slow", "rt/s",
           "p50 us", "p99 us", "p99.9 us", "cpu us/rt", "lst us/rt", "slow calls", "other",
           "thr");
    for (int kind = KIND_ISOLATION_REF; kind <= KIND_ISOLATION_SLOW; ++kind) {
      result_t* pair[MODE_COUNT];
      new_result_pair(&opt, kind, 20, ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS, pair);
      measure_pair(&opt, pair);
      for (int m = 0; m < MODE_COUNT; ++m) {
        result_t* r = pair[m];
        if (r == NULL) continue;
        if (!r->ok) {
          ++failures;
          printf("%-8s %-5s | FAILED\n", kModeName[m], kind == KIND_ISOLATION_SLOW ? "yes" : "no");
          continue;
        }
        printf("%-8s %-5s | %10.0f %8.1f %8.1f %8.1f | %9.2f %9.2f | %10" PRIu64 " | %5.2f %d\n",
               kModeName[m], kind == KIND_ISOLATION_SLOW ? "yes" : "no", r->rts, r->p50_us,
               r->p99_us, r->p999_us, r->process_cpu_us_per_rt, r->listener_cpu_us_per_rt,
               r->slow_calls, r->other_load_cores, r->listener_thread_count);
      }
    }
  }

  if (opt.idle) {
    printf("\nidle: 8 buffers enabled, no traffic, periodic re-check off, %u ms\n", opt.idle_ms);
    for (int m = 0; m < MODE_COUNT; ++m) {
      if (!opt.modes[m]) continue;
      idle_t* idle = &g_idle[m];
      memset(idle, 0, sizeof(*idle));
      idle->mode = m;
      idle->buffers = 8;
      if (!run_idle(&opt, idle)) {
        ++failures;
        printf("%-8s FAILED\n", kModeName[m]);
        continue;
      }
      g_have_idle = true;
      printf("%-8s listener CPU %.3f ms in %.2f s (%.4f%% of one core); process CPU %.3f ms\n",
             kModeName[m], idle->listener_cpu_ms, idle->seconds, idle->listener_cpu_pct,
             idle->process_cpu_ms);
    }
  }

  evaluate_targets(&opt);
  if (g_target_count > 0) {
    printf("\ntargets (issue 4; 20 us wake delay unless said otherwise)\n");
    for (size_t i = 0; i < g_target_count; ++i) {
      const target_t* t = &g_targets[i];
      printf("  [%s] %-52s %9.3f%s (target %s %g%s)  %s\n", t->pass ? "PASS" : "MISS", t->name,
             t->value, t->unit, t->higher_is_better ? ">=" : "<=", t->threshold, t->unit,
             t->detail);
    }
  }

  bool wrote = write_json(&opt, opt.json_path) && write_svg(&opt, opt.svg_path);
  if (wrote) printf("\nwrote %s and %s\n", opt.json_path, opt.svg_path);
  hsa_shut_down();
  return failures == 0 && wrote ? 0 : 1;
}
