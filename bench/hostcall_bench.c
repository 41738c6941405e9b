/* hostcall_bench: FUNCTION_CALL round trips from simulated GPU waves (the
 * device simulator) through the hostcall listener, on the software HSA
 * runtime, measured for the product listener ("ours", the product library)
 * and for the baseline strategy ("baseline", bench/baseline's
 * libhostcall_baseline.so, our C implementation of upstream's 2019-20
 * listener). Both libraries are dlopen'ed RTLD_LOCAL into the same process
 * and measured one after the other, so every figure is a ratio against the
 * baseline of the same run.
 *
 * Two ways to play the waves:
 *  * device model (the main figures): one host thread plays all W waves as a
 *    GPU does, each wave a non-blocking state machine (post, then poll), so
 *    the device costs one core whatever W is and the listener's own CPU time
 *    per round trip is measured apart; optionally paced (each wave pauses P
 *    us after each answer). Medians of alternating rounds.
 *  * thread per wave: one host thread per wave (device_sim_waves). With more
 *    wave threads than cores its figures measure the host scheduler more
 *    than the listener (marked "scheduler-bound"); kept for the W = 1 figure
 *    and the slow-buffer isolation case.
 * Plus the idle listener CPU. Output: tables on stdout, a JSON file, an SVG
 * plot. Options: see usage() and bench/README.md.
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
#include "device_sim_phase.h"
#include "hsa_sim.h"
#include "amdgpu_dropin_hostcall_constants.h"
#include <dlfcn.h>
#include <linux/futex.h>
#include <sys/syscall.h>

/* ---- settings ------------------------------------------------------------ */

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

/* "phasebit": the product listener serving the same waves through
 * phase-bit buffers (amdgpu_dropin_hostcall_enable with the phase-bit
 * protocol; the device side as device libraries built with
 * USE_NEW_HOSTCALL_IMPL); its ratios are against "ours" (classic). */
enum { MODE_BASELINE = 0, MODE_OURS = 1, MODE_PHASE = 2, MODE_COUNT = 3 };
static const char* const kModeName[MODE_COUNT] = {"baseline", "ours", "phasebit"};

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
  /* device-model mode */
  bool device;
  bool threads;
  uint32_t rounds;
  uint32_t device_ms;
  /* Round length of the paced runs: long enough for a p99 of a few thousand
   * requests (one wave, one request per 200 us: about 3500 per second). */
  uint32_t paced_ms;
  uint32_t device_waves[MAX_LIST];
  uint32_t device_wave_count;
  uint32_t paces[MAX_LIST];
  uint32_t pace_count;
  uint32_t paced_waves[MAX_LIST];
  uint32_t paced_wave_count;
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

/* Whether enable_buffers pins the listener threads to CPU 0: --pin in the
 * thread-per-wave mode; the default of the device-model mode. */
static bool g_pin_listener = false;

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

/* Pins the listener threads in `set` to CPU 0 when `pin` (see g_pin and the
 * device-model mode). */
static void pin_listener_threads(const thread_set_t* set, bool pin) {
  if (!pin || sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
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

/* The two listeners, each a shared library exporting the four hostcall
 * functions, dlopen'ed RTLD_LOCAL side by side: the product library and
 * bench/baseline's libhostcall_baseline.so. Paths from the build
 * (overridable with --ours-lib / --baseline-lib). */
typedef struct {
  void* handle;
  size_t (*size)(uint32_t);
  uint32_t (*alignment)(void);
  bool (*enable)(void*, uint32_t, const void*);
  void (*disable)(void*, const void*);
  /* The product's protocol choice (extension API), for MODE_PHASE. */
  size_t (*protocol_size)(uint32_t, uint32_t);
  int32_t (*protocol_enable)(void*, uint32_t, const void*, uint32_t, uint32_t*);
} hostcall_lib_t;

/* amdgpu_dropin_hostcall_protocol_t's phase-bit value. */
#define PROTOCOL_PHASE_BIT 1u

static hostcall_lib_t g_libs[MODE_COUNT];
static const char* g_lib_paths[MODE_COUNT] = {HOSTCALL_BENCH_BASELINE_LIB, HOSTCALL_BENCH_OURS_LIB,
                                              HOSTCALL_BENCH_OURS_LIB};
/* Occupancy bitmaps of the phase-bit buffers (64 packets: 2 words). */
static uint32_t g_bitmaps[MAX_BUFFERS][(PACKETS_PER_BUFFER + 31) / 32];
/* The mode whose library enabled the buffers currently enabled. */
static int g_mode;

static bool load_libraries(void) {
  for (int m = 0; m < MODE_COUNT; ++m) {
    hostcall_lib_t* lib = &g_libs[m];
    lib->handle = dlopen(g_lib_paths[m], RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == NULL) {
      fprintf(stderr, "hostcall_bench: cannot load the %s listener: %s\n", kModeName[m], dlerror());
      return false;
    }
    /* POSIX: a function's address round-trips through dlsym's void*
     * (copied, as ISO C has no cast between the two). */
    void* f[4] = {dlsym(lib->handle, "getHostcallBufferSize"),
                  dlsym(lib->handle, "getHostcallBufferAlignment"),
                  dlsym(lib->handle, "enableHostcalls"), dlsym(lib->handle, "disableHostcalls")};
    memcpy(&lib->size, &f[0], sizeof(f[0]));
    memcpy(&lib->alignment, &f[1], sizeof(f[1]));
    memcpy(&lib->enable, &f[2], sizeof(f[2]));
    memcpy(&lib->disable, &f[3], sizeof(f[3]));
    if (!lib->size || !lib->alignment || !lib->enable || !lib->disable) {
      fprintf(stderr, "hostcall_bench: %s lacks a hostcall function\n", g_lib_paths[m]);
      return false;
    }
    if (m == MODE_PHASE) {
      void* p[2] = {dlsym(lib->handle, "amdgpu_dropin_hostcall_buffer_size"),
                    dlsym(lib->handle, "amdgpu_dropin_hostcall_enable")};
      memcpy(&lib->protocol_size, &p[0], sizeof(p[0]));
      memcpy(&lib->protocol_enable, &p[1], sizeof(p[1]));
      if (!lib->protocol_size || !lib->protocol_enable) {
        fprintf(stderr, "hostcall_bench: %s lacks amdgpu_dropin_hostcall_enable\n", g_lib_paths[m]);
        return false;
      }
    }
  }
  if (g_libs[0].size(PACKETS_PER_BUFFER) != g_libs[1].size(PACKETS_PER_BUFFER) ||
      g_libs[0].alignment() != g_libs[1].alignment()) {
    fprintf(stderr, "hostcall_bench: the two libraries disagree on the buffer layout\n");
    return false;
  }
  return true;
}

static bool alloc_buffers(void) {
  size_t size = g_libs[MODE_OURS].size(PACKETS_PER_BUFFER);
  size_t phase_size = g_libs[MODE_PHASE].protocol_size(PROTOCOL_PHASE_BIT, PACKETS_PER_BUFFER);
  if (phase_size > size) size = phase_size;
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
  g_mode = mode;
  for (uint32_t i = 0; i < count; ++i) {
    bool enabled;
    if (mode == MODE_PHASE) {
      memset(g_bitmaps[i], 0, sizeof(g_bitmaps[i]));
      enabled = device_sim_phase_attach(g_buffers[i]) &&
                g_libs[mode].protocol_enable(g_buffers[i], PACKETS_PER_BUFFER, g_buffers[i],
                                             PROTOCOL_PHASE_BIT, g_bitmaps[i]) == 0;
    } else {
      enabled = g_libs[mode].enable(g_buffers[i], PACKETS_PER_BUFFER, g_buffers[i]);
    }
    if (!enabled) {
      fprintf(stderr, "hostcall_bench: %s enableHostcalls failed (AMD_LOG_LEVEL=1 says why)\n",
              kModeName[mode]);
      disable_buffers(i);
      return false;
    }
  }
  /* The new thread names itself when it starts running: give it a moment. */
  thread_set_t set;
  const char* want = mode == MODE_BASELINE ? THREAD_BASELINE : THREAD_OURS;
  for (int attempt = 0; attempt < 1000; ++attempt) { /* up to 5 s on a busy machine */
    listener_threads(&set);
    if (has_thread(&set, want)) break;
    sleep_ms(5);
  }
  pin_listener_threads(&set, g_pin_listener);
  if (!has_thread(&set, want)) {
    disable_buffers(count);
    fprintf(stderr, "hostcall_bench: no listener thread named \"%s\" after enabling buffers\n",
            want);
    return false;
  }
  return true;
}

static void disable_buffers(uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    /* disableHostcalls disables either protocol. */
    g_libs[g_mode].disable(g_buffers[i], g_buffers[i]);
    device_sim_phase_detach(g_buffers[i]);
  }
}

/* ---- one measured configuration ---------------------------------------- */

enum {
  KIND_THROUGHPUT = 0,     /* thread-per-wave mode */
  KIND_ISOLATION_REF = 1,  /* thread-per-wave, slow-buffer case without the slow wave */
  KIND_ISOLATION_SLOW = 2, /* ... with it */
  KIND_DEVICE = 3,         /* device-model mode, every wave calling again at once */
  KIND_PACED = 4,          /* device-model mode, each wave waiting pace_us after an answer */
};
#define MAX_ROUNDS 15

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
  /* device-model mode: the pace, and the figures of each round (the
   * reported figures are their medians) */
  uint32_t pace_us;
  uint32_t rounds;
  double round_rts[MAX_ROUNDS], round_p50[MAX_ROUNDS], round_p99[MAX_ROUNDS],
      round_p999[MAX_ROUNDS], round_lcpu[MAX_ROUNDS], round_dcpu[MAX_ROUNDS];
  double device_cpu_us_per_rt; /* the device thread's own CPU per round trip */
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
  pin_listener_threads(&before, g_pin_listener); /* helpers started during the warm-up */
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

/* ---- device-model mode --------------------------------------------------------- */

/* One host thread plays every wave, as a GPU runs them: each wave is a state
 * machine that pops a free packet, fills it (64 active lanes, the trivial
 * host function), pushes it on the ready stack, rings the doorbell, then
 * polls its READY bit; when answered it checks the 64 answers, returns the
 * packet and (paced) waits pace_us before its next call. The device thread
 * never blocks and never yields, so it costs one core whatever W is, and the
 * listener's own CPU time per round trip (its threads' clocks) is the figure
 * that matters: on a GPU the waves cost the host nothing. By default the
 * device thread runs on CPU 1 and the listener threads on CPU 0 (--no-pin:
 * no pinning). */

#define DEVICE_CPU 1

typedef struct {
  void* buffer;
  uint64_t ptr; /* classic: the tagged packet pointer; phase-bit: the packet index */
  uint64_t t_post;
  uint64_t ready_at;
  uint32_t call;
  bool posted;
  uint64_t lanes[64][8];
} sim_wave_t;

typedef struct {
  uint32_t waves;
  uint64_t pace_ns;
  bool pin;
  bool phase; /* the waves speak the phase-bit protocol */
  sim_wave_t* wave;
  _Atomic int stop;
  _Atomic int measuring;
  /* Written by the device thread only; read after it is joined. */
  uint64_t count;
  uint64_t answered; /* all answered calls, warm-up included */
  bool failed;
  char failure[160];
  uint64_t hist[BUCKETS];
} device_t;

static bool g_device_pin = true;

static void pin_current_thread_to(int cpu) {
  if (sysconf(_SC_NPROCESSORS_ONLN) <= cpu) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    fprintf(stderr, "hostcall_bench: cannot pin the device thread\n");
  }
}

static void device_fail(device_t* d, uint32_t w, const char* what) {
  if (!d->failed) {
    snprintf(d->failure, sizeof(d->failure), "wave %u call %u: %s", w, d->wave[w].call, what);
  }
  d->failed = true;
}

/* Posts wave w's next call into the packet it popped. */
static void device_post(sim_wave_t* wave, uint32_t w, bool phase) {
  for (uint32_t lane = 0; lane < 64; ++lane) {
    wave->lanes[lane][1] = ((uint64_t)w << 40) ^ ((uint64_t)wave->call << 8) ^ lane;
  }
  wave->t_post = device_sim_now_ns();
  if (phase) {
    uint32_t index = (uint32_t)wave->ptr;
    device_sim_phase_fill(wave->buffer, index, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull,
                          (const uint64_t(*)[8])wave->lanes);
    device_sim_phase_flip(wave->buffer, index);
    device_sim_phase_ring_throttled(wave->buffer);
    wave->posted = true;
    return;
  }
  device_sim_fill(wave->buffer, wave->ptr, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull,
                  (const uint64_t(*)[8])wave->lanes);
  device_sim_push_ready(wave->buffer, wave->ptr);
  device_sim_ring_doorbell(wave->buffer);
  wave->posted = true;
}

/* Collects wave w's answer; false when an answer is wrong. */
static bool device_collect(device_t* d, sim_wave_t* wave, uint64_t now) {
  static _Thread_local uint64_t out[64][8];
  if (d->phase) {
    device_sim_phase_read_results(wave->buffer, (uint32_t)wave->ptr, ~0ull, out);
    device_sim_phase_clear_bit(wave->buffer, (uint32_t)wave->ptr);
  } else {
    device_sim_read_results(wave->buffer, wave->ptr, ~0ull, out);
    device_sim_push_free(wave->buffer, wave->ptr);
  }
  wave->posted = false;
  bool good = true;
  for (uint32_t lane = 0; lane < 64; ++lane) {
    good &= out[lane][0] == wave->lanes[lane][1] + 1 &&
            out[lane][1] == (wave->lanes[lane][2] ^ 0x5A5A5A5A5A5A5A5Aull);
  }
  /* Relaxed: the main thread flips it between windows; a call at the edge
   * lands in either window. */
  if (atomic_load_explicit(&d->measuring, memory_order_relaxed)) {
    d->count++;
    d->hist[bucket_of(now - wave->t_post)]++;
  }
  d->answered++;
  wave->call++;
  wave->ready_at = now + d->pace_ns;
  return good;
}

/* Step 1 without waiting, in the device's protocol. */
static bool device_try_take(const device_t* d, sim_wave_t* wave) {
  if (!d->phase) return device_sim_try_pop_free(wave->buffer, &wave->ptr);
  uint32_t index = 0;
  if (!device_sim_phase_try_claim(wave->buffer, &index)) return false;
  wave->ptr = index;
  return true;
}

/* Step 5 without waiting, in the device's protocol. */
static bool device_answered(const device_t* d, const sim_wave_t* wave) {
  return d->phase ? device_sim_phase_is_answered(wave->buffer, (uint32_t)wave->ptr)
                  : device_sim_is_served(wave->buffer, wave->ptr);
}

static void* device_main(void* arg) {
  device_t* d = (device_t*)arg;
  pthread_setname_np(pthread_self(), "bench-device");
  if (d->pin) pin_current_thread_to(DEVICE_CPU);
  /* Relaxed: a stop request only needs to be seen eventually. */
  while (!atomic_load_explicit(&d->stop, memory_order_relaxed) && !d->failed) {
    uint64_t now = device_sim_now_ns();
    for (uint32_t w = 0; w < d->waves; ++w) {
      sim_wave_t* wave = &d->wave[w];
      if (!wave->posted) {
        if (now >= wave->ready_at && device_try_take(d, wave)) {
          device_post(wave, w, d->phase);
        }
      } else if (device_answered(d, wave)) {
        if (!device_collect(d, wave, device_sim_now_ns())) device_fail(d, w, "wrong answer");
      } else if (now - wave->t_post > CALL_TIMEOUT_NS) {
        device_fail(d, w, "no answer within 30 s");
      }
    }
  }
  /* Let every posted call finish, so the buffers can be disabled with no
   * packet left with the host. */
  uint64_t deadline = device_sim_now_ns() + CALL_TIMEOUT_NS;
  for (uint32_t w = 0; w < d->waves; ++w) {
    sim_wave_t* wave = &d->wave[w];
    while (wave->posted && !device_answered(d, wave)) {
      if (device_sim_now_ns() > deadline) {
        device_fail(d, w, "no answer while stopping");
        return NULL;
      }
    }
    if (wave->posted && !device_collect(d, wave, device_sim_now_ns())) {
      device_fail(d, w, "wrong answer");
    }
  }
  return NULL;
}

static double median_of(const double* values, uint32_t n) {
  double sorted[MAX_ROUNDS];
  memcpy(sorted, values, n * sizeof(double));
  for (uint32_t i = 1; i < n; ++i) {
    for (uint32_t j = i; j > 0 && sorted[j - 1] > sorted[j]; --j) {
      double t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  }
  if (n == 0) return NAN;
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}

static uint32_t g_device_warmup_ms = 50;

/* One round of configuration `r` in its mode: enable, run the device thread,
 * measure `duration_ms`, stop, disable. Adds one value per figure to r's
 * rounds. */
static bool run_device_round(result_t* r, uint32_t duration_ms) {
  hsa_sim_set_wait_wake_delay_us(r->delay_us);
  hsa_sim_set_periodic_recheck(false, 1000);
  g_pin_listener = g_device_pin;
  if (!enable_buffers(r->mode, r->buffers)) return false;
  device_t* d = calloc(1, sizeof(*d));
  sim_wave_t* waves = calloc(r->waves, sizeof(*waves));
  if (d == NULL || waves == NULL) {
    fprintf(stderr, "hostcall_bench: out of memory\n");
    free(d);
    free(waves);
    disable_buffers(r->buffers);
    return false;
  }
  d->waves = r->waves;
  d->pace_ns = (uint64_t)r->pace_us * 1000u;
  d->pin = g_device_pin;
  d->phase = r->mode == MODE_PHASE;
  d->wave = waves;
  for (uint32_t w = 0; w < r->waves; ++w) {
    waves[w].buffer = g_buffers[w % r->buffers];
    for (uint32_t lane = 0; lane < 64; ++lane) {
      waves[w].lanes[lane][0] = (uint64_t)(uintptr_t)&bench_function;
      waves[w].lanes[lane][2] = (uint64_t)lane * 0x9E3779B97F4A7C15ull ^ w;
    }
  }
  pthread_t thread;
  if (pthread_create(&thread, NULL, device_main, d) != 0) {
    fprintf(stderr, "hostcall_bench: cannot start the device thread\n");
    free(d);
    free(waves);
    disable_buffers(r->buffers);
    return false;
  }
  clockid_t device_clock;
  bool have_device_clock = pthread_getcpuclockid(thread, &device_clock) == 0;
  sleep_ms(g_device_warmup_ms);

  thread_set_t before, after;
  struct timespec dc0 = {0, 0}, dc1 = {0, 0};
  listener_threads(&before);
  pin_listener_threads(&before, g_device_pin); /* helpers started during the warm-up */
  uint64_t busy0 = machine_busy_ns();
  uint64_t cpu0 = process_cpu_ns();
  if (have_device_clock) clock_gettime(device_clock, &dc0);
  uint64_t t0 = device_sim_now_ns();
  /* Relaxed: see device_collect. */
  atomic_store_explicit(&d->measuring, 1, memory_order_relaxed);
  sleep_ms(duration_ms);
  atomic_store_explicit(&d->measuring, 0, memory_order_relaxed);
  uint64_t t1 = device_sim_now_ns();
  if (have_device_clock) clock_gettime(device_clock, &dc1);
  uint64_t cpu1 = process_cpu_ns();
  uint64_t busy1 = machine_busy_ns();
  listener_threads(&after);
  /* Relaxed: see device_main. */
  atomic_store_explicit(&d->stop, 1, memory_order_relaxed);
  pthread_join(thread, NULL);
  disable_buffers(r->buffers);

  /* A wrong or missing answer fails the configuration. A round in which no
   * call completed (a machine so busy that the device or the listener thread
   * did not run for the whole window) only has no figures. */
  bool ok = !d->failed;
  if (d->failed) {
    fprintf(stderr, "hostcall_bench: device model %s W=%u B=%u P=%u: %s\n", kModeName[r->mode],
            r->waves, r->buffers, r->pace_us, d->failure);
  } else if (d->count == 0) {
    fprintf(stderr,
            "hostcall_bench: device model %s W=%u B=%u P=%u: no call completed in the measured "
            "window (machine too busy); round without figures\n",
            kModeName[r->mode], r->waves, r->buffers, r->pace_us);
  }
  if (ok && d->count > 0 && r->rounds < MAX_ROUNDS) {
    uint64_t window = t1 - t0, calls = d->count;
    uint32_t i = r->rounds++;
    r->round_rts[i] = (double)calls / ((double)window / 1e9);
    r->round_p50[i] = hist_quantile(d->hist, calls, 0.50) / 1e3;
    r->round_p99[i] = hist_quantile(d->hist, calls, 0.99) / 1e3;
    r->round_p999[i] = hist_quantile(d->hist, calls, 0.999) / 1e3;
    r->round_lcpu[i] = (double)listener_cpu_delta(&before, &after) / (double)calls / 1e3;
    r->round_dcpu[i] = (double)(timespec_ns(&dc1) - timespec_ns(&dc0)) / (double)calls / 1e3;
    r->calls += calls;
    r->acc_window_ns += window;
    r->acc_proc_ns += cpu1 - cpu0;
    r->acc_listener_ns += listener_cpu_delta(&before, &after);
    uint64_t busy = busy1 - busy0, mine = cpu1 - cpu0;
    r->acc_other_ns += busy > mine ? busy - mine : 0;
    for (uint32_t b = 0; b < BUCKETS; ++b) r->hist[b] += d->hist[b];
    if (after.count > r->listener_thread_count) r->listener_thread_count = after.count;
  }
  free(waves);
  free(d);
  return ok;
}

/* The reported figures of a device-model result: medians over its rounds. */
static void finish_device_result(result_t* r) {
  r->ok = !r->failed && r->rounds > 0;
  if (!r->ok) return;
  r->seconds = (double)r->acc_window_ns / 1e9;
  r->rts = median_of(r->round_rts, r->rounds);
  r->p50_us = median_of(r->round_p50, r->rounds);
  r->p99_us = median_of(r->round_p99, r->rounds);
  r->p999_us = median_of(r->round_p999, r->rounds);
  r->max_us = hist_quantile(r->hist, r->calls, 1.0) / 1e3;
  r->listener_cpu_us_per_rt = median_of(r->round_lcpu, r->rounds);
  r->device_cpu_us_per_rt = median_of(r->round_dcpu, r->rounds);
  r->process_cpu_us_per_rt = (double)r->acc_proc_ns / (double)r->calls / 1e3;
  r->listener_cpu_pct = 100.0 * (double)r->acc_listener_ns / (double)r->acc_window_ns;
  r->other_load_cores = (double)r->acc_other_ns / (double)r->acc_window_ns;
}

/* `rounds` alternating rounds (baseline, ours, baseline, ours, ...). */
static void measure_device_pair(uint32_t rounds, uint32_t duration_ms, result_t* pair[MODE_COUNT]) {
  for (uint32_t round = 0; round < rounds; ++round) {
    for (int m = 0; m < MODE_COUNT; ++m) {
      if (pair[m] == NULL || pair[m]->failed) continue;
      if (!run_device_round(pair[m], duration_ms)) pair[m]->failed = true;
    }
  }
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (pair[m] != NULL) finish_device_result(pair[m]);
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
  /* A thread that does nothing but sleep with the product listener's idle
   * timeouts, over the same window: what the wake-ups alone cost here. */
  double bare_sleeper_cpu_ms;
} idle_t;

/* The control for the idle figure: a thread that waits on a futex nobody
 * wakes, with the product listener's idle schedule (first timeout
 * WAIT_TIMEOUT_MS, each next one IDLE_WAIT_GROWTH times longer up to
 * IDLE_WAIT_MAX_MS), so the idle figure can be read against what a wake-up
 * costs on this machine (on a virtual machine a wake-up after a long sleep
 * costs far more CPU than on bare metal). */
typedef struct {
  _Atomic uint32_t stop; /* futex word */
  pthread_t thread;
} bare_sleeper_t;

static void* bare_sleeper_main(void* arg) {
  bare_sleeper_t* b = arg;
  uint64_t timeout_ms = AMDGPU_DROPIN_HOSTCALL_WAIT_TIMEOUT_MS;
  while (atomic_load_explicit(&b->stop, memory_order_relaxed) == 0) {
    struct timespec ts = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L};
    syscall(SYS_futex, &b->stop, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    timeout_ms *= AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_GROWTH;
    if (timeout_ms > AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS) {
      timeout_ms = AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS;
    }
  }
  return NULL;
}

static uint64_t pthread_cpu_ns(pthread_t thread) {
  clockid_t clock;
  struct timespec ts;
  if (pthread_getcpuclockid(thread, &clock) != 0 || clock_gettime(clock, &ts) != 0) return 0;
  return timespec_ns(&ts);
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
  /* The control starts its schedule when the listener last had work. */
  bare_sleeper_t sleeper;
  atomic_init(&sleeper.stop, 0);
  bool have_sleeper = pthread_create(&sleeper.thread, NULL, bare_sleeper_main, &sleeper) == 0;
  sleep_ms(200);
  thread_set_t before, after;
  listener_threads(&before);
  uint64_t sleeper0 = have_sleeper ? pthread_cpu_ns(sleeper.thread) : 0;
  uint64_t cpu0 = process_cpu_ns();
  uint64_t t0 = device_sim_now_ns();
  sleep_ms(opt->idle_ms);
  uint64_t t1 = device_sim_now_ns();
  uint64_t cpu1 = process_cpu_ns();
  uint64_t sleeper1 = have_sleeper ? pthread_cpu_ns(sleeper.thread) : 0;
  listener_threads(&after);
  if (have_sleeper) {
    atomic_store_explicit(&sleeper.stop, 1, memory_order_relaxed);
    syscall(SYS_futex, &sleeper.stop, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(sleeper.thread, NULL);
  }
  r->bare_sleeper_cpu_ms = have_sleeper ? (double)(sleeper1 - sleeper0) / 1e6 : NAN;
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
                            uint32_t buffers, uint32_t pace_us, result_t* pair[MODE_COUNT]) {
  for (int m = 0; m < MODE_COUNT; ++m) {
    pair[m] = NULL;
    if (!opt->modes[m] || g_result_count >= MAX_RESULTS) continue;
    result_t* r = &g_results[g_result_count++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->mode = m;
    r->delay_us = delay_us;
    r->waves = waves;
    r->buffers = buffers;
    r->pace_us = pace_us;
    pair[m] = r;
  }
}
static idle_t g_idle[MODE_COUNT];
static bool g_have_idle;

static const result_t* find_result(int kind, int mode, uint32_t delay, uint32_t waves,
                                   uint32_t buffers, uint32_t pace_us) {
  for (size_t i = 0; i < g_result_count; ++i) {
    const result_t* r = &g_results[i];
    if (r->ok && r->kind == kind && r->mode == mode && r->delay_us == delay &&
        r->waves == waves && r->buffers == buffers && r->pace_us == pace_us) {
      return r;
    }
  }
  return NULL;
}

/* The result r's ratios are against: baseline for ours (and baseline),
 * ours (classic) for phasebit. */
static const result_t* baseline_of(const result_t* r) {
  int against = r->mode == MODE_PHASE ? MODE_OURS : MODE_BASELINE;
  return find_result(r->kind, against, r->delay_us, r->waves, r->buffers, r->pace_us);
}

/* Thread-per-wave figures with 16 or more wave threads on this machine's
 * cores measure the host scheduler more than the listener. */
static bool scheduler_bound(const result_t* r) {
  return r->kind != KIND_DEVICE && r->kind != KIND_PACED &&
         r->waves + 1 > 8u * (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
}

static void print_header(uint32_t delay) {
  printf("\nthread-per-wave, wake delay %u us (periodic re-check off); W waves x 64 lanes, B "
         "buffers of %u packets; * = scheduler-bound (more wave threads than cores can run)\n",
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
  printf(" %5.2f %d%s\n", r->other_load_cores, r->listener_thread_count,
         scheduler_bound(r) ? " *" : "");
}

static void print_device_header(const options_t* opt) {
  printf("\ndevice model: one host thread plays all W waves (a non-blocking state machine per "
         "wave)%s; wake delay 20 us; medians of %u alternating rounds of %u ms; P = pause after "
         "each answer (paced; its rounds last %u ms); ratios are ours / baseline and phasebit / ours\n",
         g_device_pin ? ", device thread on CPU 1, listener threads on CPU 0" : ", no pinning",
         opt->rounds, opt->device_ms, opt->paced_ms);
  printf("%-8s %3s %2s %4s | %10s %8s %8s %8s | %9s %9s | %7s %7s %7s | %5s %s\n", "mode", "W",
         "B", "P us", "rt/s", "p50 us", "p99 us", "p99.9 us", "lst us/rt", "dev us/rt", "rt/s x",
         "p99 x", "lst x", "other", "thr");
}

static void print_device_row(const result_t* r) {
  const result_t* base = baseline_of(r);
  printf("%-8s %3u %2u %4u | %10.0f %8.1f %8.1f %8.1f | %9.2f %9.2f |", kModeName[r->mode],
         r->waves, r->buffers, r->pace_us, r->rts, r->p50_us, r->p99_us, r->p999_us,
         r->listener_cpu_us_per_rt, r->device_cpu_us_per_rt);
  if (base != NULL && base != r) {
    printf(" %7.2f %7.3f %7.2f |", r->rts / base->rts, r->p99_us / base->p99_us,
           r->listener_cpu_us_per_rt / base->listener_cpu_us_per_rt);
  } else {
    printf(" %7s %7s %7s |", "-", "-", "-");
  }
  printf(" %5.2f %d\n", r->other_load_cores, r->listener_thread_count);
}

/* ---- targets ------------------------------------------------------------------ */

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

static target_t g_targets[48];
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

enum { FIGURE_RTS, FIGURE_P99, FIGURE_CPU };

/* A device-model target on the ratio ours / baseline of one figure. */
static void device_target(int kind, uint32_t w, uint32_t b, uint32_t pace, int figure,
                          double threshold) {
  const result_t* base = find_result(kind, MODE_BASELINE, 20, w, b, pace);
  const result_t* ours = find_result(kind, MODE_OURS, 20, w, b, pace);
  if (base == NULL || ours == NULL) return;
  char name[96], config[48], detail[256];
  if (kind == KIND_PACED) {
    snprintf(config, sizeof(config), "paced %u us W=%u B=%u", pace, w, b);
  } else {
    snprintf(config, sizeof(config), "W=%u B=%u", w, b);
  }
  double ratio;
  if (figure == FIGURE_RTS) {
    ratio = ours->rts / base->rts;
    snprintf(name, sizeof(name), "device %s: round trips/s ours/baseline", config);
    snprintf(detail, sizeof(detail), "ours %.0f/s, baseline %.0f/s", ours->rts, base->rts);
  } else if (figure == FIGURE_P99) {
    ratio = ours->p99_us / base->p99_us;
    snprintf(name, sizeof(name), "device %s: p99 ours/baseline", config);
    snprintf(detail, sizeof(detail), "ours %.1f us, baseline %.1f us", ours->p99_us, base->p99_us);
  } else {
    ratio = ours->listener_cpu_us_per_rt / base->listener_cpu_us_per_rt;
    snprintf(name, sizeof(name), "device %s: listener CPU/rt ours/baseline", config);
    snprintf(detail, sizeof(detail), "ours %.2f us, baseline %.2f us", ours->listener_cpu_us_per_rt,
             base->listener_cpu_us_per_rt);
  }
  add_target(name, ratio, threshold, "x", figure == FIGURE_RTS, detail);
}

static void evaluate_targets(const options_t* opt) {
  char detail[256];
  if (opt->device) {
    for (uint32_t i = 0; i < opt->device_wave_count; ++i) {
      uint32_t w = opt->device_waves[i];
      if (w == 1 || w == 4 || w == 16) device_target(KIND_DEVICE, w, 1, 0, FIGURE_P99, 0.2);
      if (w == 64) device_target(KIND_DEVICE, w, 1, 0, FIGURE_P99, 0.5);
    }
    device_target(KIND_DEVICE, 16, 8, 0, FIGURE_P99, 0.5);
    for (uint32_t i = 0; i < opt->device_wave_count; ++i) {
      device_target(KIND_DEVICE, opt->device_waves[i], 1, 0, FIGURE_RTS, 1.2);
    }
    device_target(KIND_DEVICE, 16, 8, 0, FIGURE_RTS, 1.2);
    device_target(KIND_DEVICE, 16, 1, 0, FIGURE_CPU, 1.0);
    device_target(KIND_DEVICE, 64, 1, 0, FIGURE_CPU, 1.0);
    device_target(KIND_DEVICE, 16, 8, 0, FIGURE_CPU, 1.0);
    device_target(KIND_PACED, 1, 1, 200, FIGURE_CPU, 1.0);
    device_target(KIND_PACED, 1, 1, 200, FIGURE_P99, 1.0);
    device_target(KIND_PACED, 1, 1, 50, FIGURE_P99, 0.2);
    device_target(KIND_PACED, 1, 1, 50, FIGURE_CPU, 1.5);
  }
  if (g_have_idle && g_idle[MODE_OURS].ok) {
    const idle_t* idle = &g_idle[MODE_OURS];
    double per_2s = idle->listener_cpu_ms * 2.0 / idle->seconds;
    snprintf(detail, sizeof(detail),
             "%.3f ms of listener CPU in %.2f s (%u buffers; baseline %.3f ms; a bare thread "
             "sleeping on the same schedule %.3f ms)",
             idle->listener_cpu_ms, idle->seconds, idle->buffers,
             g_idle[MODE_BASELINE].ok ? g_idle[MODE_BASELINE].listener_cpu_ms : NAN,
             idle->bare_sleeper_cpu_ms);
    add_target("idle: listener CPU per 2 s", per_2s, 1.0, " ms", false, detail);
  }
  if (opt->threads) {
    const result_t* base = find_result(KIND_THROUGHPUT, MODE_BASELINE, 20, 1, 1, 0);
    const result_t* ours = find_result(KIND_THROUGHPUT, MODE_OURS, 20, 1, 1, 0);
    if (base && ours) {
      snprintf(detail, sizeof(detail), "ours %.0f/s, baseline %.0f/s", ours->rts, base->rts);
      add_target("thread-per-wave W=1 B=1: round trips/s ours/baseline", ours->rts / base->rts,
                 5.0, "x", true, detail);
    }
  }
  {
    const result_t* ref = find_result(KIND_ISOLATION_REF, MODE_OURS, 20, ISOLATION_NORMAL_WAVES,
                                      ISOLATION_BUFFERS, 0);
    const result_t* slow = find_result(KIND_ISOLATION_SLOW, MODE_OURS, 20,
                                       ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS, 0);
    if (ref && slow) {
      const result_t* bslow = find_result(KIND_ISOLATION_SLOW, MODE_BASELINE, 20,
                                          ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS, 0);
      snprintf(detail, sizeof(detail),
               "other buffers' p99 %.1f us with a 1 ms function on buffer 0, %.1f us without "
               "(baseline with it: %.1f us)",
               slow->p99_us, ref->p99_us, bslow ? bslow->p99_us : NAN);
      add_target("slow buffer: other buffers' p99 with/without", slow->p99_us / ref->p99_us, 2.0,
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

static void json_field(FILE* f, const char* name, double v) {
  fprintf(f, ", \"%s\": ", name);
  json_number(f, v);
}

static void json_array(FILE* f, const char* name, const double* v, uint32_t n) {
  fprintf(f, "\"%s\": [", name);
  for (uint32_t i = 0; i < n; ++i) {
    if (i) fputs(", ", f);
    json_number(f, v[i]);
  }
  fputs("]", f);
}

static const char* kind_name(int kind) {
  switch (kind) {
    case KIND_THROUGHPUT: return "threads";
    case KIND_ISOLATION_REF: return "threads_isolation_reference";
    case KIND_ISOLATION_SLOW: return "threads_isolation_slow_buffer";
    case KIND_DEVICE: return "device";
    default: return "device_paced";
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
          "\"device_rounds\": %u, \"device_round_ms\": %u, \"paced_round_ms\": %u, \"device_pinned\": %s, "
          "\"packets_per_buffer\": %u, \"lanes_per_call\": 64, \"periodic_recheck\": false, "
          "\"slow_function_us\": %llu, \"wave_sched\": \"%s\", \"pinned\": %s, "
          "\"wave_yield_per_call\": %s, \"ratios\": \"vs_baseline: ours/baseline, except "
          "*_lower_by = baseline/ours\"},\n",
          opt->duration_ms, opt->warmup_ms, opt->idle_ms, opt->rounds, opt->device_ms, opt->paced_ms,
          g_device_pin ? "true" : "false", PACKETS_PER_BUFFER,
          (unsigned long long)(SLOW_FUNCTION_NS / 1000), kWaveSchedName[g_wave_sched],
          g_pin ? "true" : "false", g_wave_yield ? "true" : "false");
  fprintf(f, "  \"results\": [\n");
  for (size_t i = 0; i < g_result_count; ++i) {
    const result_t* r = &g_results[i];
    const result_t* base = baseline_of(r);
    fprintf(f,
            "    {\"kind\": \"%s\", \"mode\": \"%s\", \"wake_delay_us\": %u, \"waves\": %u, "
            "\"buffers\": %u, \"pace_us\": %u, \"ok\": %s, \"scheduler_bound\": %s, "
            "\"calls\": %" PRIu64,
            kind_name(r->kind), kModeName[r->mode], r->delay_us, r->waves, r->buffers, r->pace_us,
            r->ok ? "true" : "false", scheduler_bound(r) ? "true" : "false", r->calls);
    json_field(f, "seconds", r->seconds);
    json_field(f, "round_trips_per_s", r->rts);
    json_field(f, "p50_us", r->p50_us);
    json_field(f, "p99_us", r->p99_us);
    json_field(f, "p999_us", r->p999_us);
    json_field(f, "max_us", r->max_us);
    json_field(f, "process_cpu_us_per_rt", r->process_cpu_us_per_rt);
    json_field(f, "listener_cpu_us_per_rt", r->listener_cpu_us_per_rt);
    json_field(f, "listener_cpu_pct", r->listener_cpu_pct);
    json_field(f, "other_processes_cpu_cores", r->other_load_cores);
    fprintf(f, ", \"listener_threads\": %d", r->listener_thread_count);
    if (r->kind == KIND_ISOLATION_SLOW) fprintf(f, ", \"slow_calls\": %" PRIu64, r->slow_calls);
    if (r->kind == KIND_DEVICE || r->kind == KIND_PACED) {
      json_field(f, "device_cpu_us_per_rt", r->device_cpu_us_per_rt);
      fputs(", \"rounds\": {", f);
      json_array(f, "round_trips_per_s", r->round_rts, r->rounds);
      fputs(", ", f);
      json_array(f, "p50_us", r->round_p50, r->rounds);
      fputs(", ", f);
      json_array(f, "p99_us", r->round_p99, r->rounds);
      fputs(", ", f);
      json_array(f, "p999_us", r->round_p999, r->rounds);
      fputs(", ", f);
      json_array(f, "listener_cpu_us_per_rt", r->round_lcpu, r->rounds);
      fputs("}", f);
    }
    if (base != NULL && r->ok && base->ok) {
      fputs(", \"vs_baseline\": {\"round_trips_per_s\": ", f);
      json_number(f, r->rts / base->rts);
      json_field(f, "p50", r->p50_us / base->p50_us);
      json_field(f, "p99", r->p99_us / base->p99_us);
      json_field(f, "p999", r->p999_us / base->p999_us);
      json_field(f, "listener_cpu_per_rt", r->listener_cpu_us_per_rt / base->listener_cpu_us_per_rt);
      json_field(f, "p99_lower_by", base->p99_us / r->p99_us);
      fputs("}", f);
    }
    fprintf(f, "}%s\n", i + 1 < g_result_count ? "," : "");
  }
  fprintf(f, "  ],\n  \"idle\": [\n");
  bool first = true;
  for (int m = 0; m < MODE_COUNT && g_have_idle; ++m) {
    const idle_t* idle = &g_idle[m];
    if (!idle->ok) continue;
    fprintf(f, "%s    {\"mode\": \"%s\", \"buffers\": %u", first ? "" : ",\n", kModeName[m],
            idle->buffers);
    json_field(f, "seconds", idle->seconds);
    json_field(f, "listener_cpu_ms", idle->listener_cpu_ms);
    json_field(f, "listener_cpu_pct", idle->listener_cpu_pct);
    json_field(f, "process_cpu_ms", idle->process_cpu_ms);
    json_field(f, "bare_sleeper_cpu_ms", idle->bare_sleeper_cpu_ms);
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
  return fclose(f) == 0;
}

/* ---- SVG plot ---------------------------------------------------------------- */

/* One panel per group of configurations: device model, device model paced,
 * thread-per-wave per wake delay, slow buffer. For each configuration the
 * baseline and ours side by side, each a vertical bar from p50 to p99.9 with
 * marks at p50 (circle), p99 (square) and p99.9 (dash), log scale; under it
 * the ratios ours/baseline of round trips/s, p99 and listener CPU per round
 * trip. */
#define MAX_GROUPS 16
typedef struct {
  char title[160];
  uint32_t count;
  char label[MAX_GROUPS][32];
  const result_t* r[MAX_GROUPS][MODE_COUNT];
} panel_t;

static void panel_add(panel_t* p, const char* label, int kind, uint32_t delay, uint32_t w,
                      uint32_t b, uint32_t pace) {
  if (p->count >= MAX_GROUPS) return;
  snprintf(p->label[p->count], sizeof(p->label[0]), "%s", label);
  for (int m = 0; m < MODE_COUNT; ++m) p->r[p->count][m] = find_result(kind, m, delay, w, b, pace);
  p->count++;
}

static uint32_t build_panels(const options_t* opt, panel_t* panels) {
  uint32_t n = 0;
  char label[32];
  if (opt->device) {
    panel_t* p = &panels[n++];
    memset(p, 0, sizeof(*p));
    snprintf(p->title, sizeof(p->title),
             "Device model (one thread plays all waves), 20 us wake delay, medians of %u rounds",
             opt->rounds);
    for (uint32_t i = 0; i < opt->device_wave_count; ++i) {
      snprintf(label, sizeof(label), "W=%u B=1", opt->device_waves[i]);
      panel_add(p, label, KIND_DEVICE, 20, opt->device_waves[i], 1, 0);
    }
    panel_add(p, "W=16 B=8", KIND_DEVICE, 20, 16, 8, 0);
    if (opt->pace_count > 0) {
      p = &panels[n++];
      memset(p, 0, sizeof(*p));
      snprintf(p->title, sizeof(p->title),
               "Device model, paced: each wave pauses P us after each answer");
      for (uint32_t i = 0; i < opt->pace_count; ++i) {
        for (uint32_t j = 0; j < opt->paced_wave_count; ++j) {
          snprintf(label, sizeof(label), "P=%u W=%u", opt->paces[i], opt->paced_waves[j]);
          panel_add(p, label, KIND_PACED, 20, opt->paced_waves[j], 1, opt->paces[i]);
        }
      }
    }
  }
  if (opt->threads) {
    for (uint32_t d = 0; d < opt->delay_count; ++d) {
      panel_t* p = &panels[n++];
      memset(p, 0, sizeof(*p));
      snprintf(p->title, sizeof(p->title),
               "Thread per wave, wake delay %u us (* scheduler-bound: W >= 16 on this machine)",
               opt->delays[d]);
      for (uint32_t wi = 0; wi < opt->wave_count; ++wi) {
        for (uint32_t bi = 0; bi < opt->buffer_count; ++bi) {
          uint32_t w = opt->waves[wi], b = opt->buffers[bi];
          result_t probe = {.kind = KIND_THROUGHPUT, .waves = w};
          snprintf(label, sizeof(label), "W=%u B=%u%s", w, b, scheduler_bound(&probe) ? "*" : "");
          panel_add(p, label, KIND_THROUGHPUT, opt->delays[d], w, b, 0);
        }
      }
    }
    if (opt->isolation) {
      panel_t* p = &panels[n++];
      memset(p, 0, sizeof(*p));
      snprintf(p->title, sizeof(p->title),
               "Thread per wave, %u waves on %u buffers, without / with a 1 ms host function on "
               "one more buffer",
               ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS - 1);
      panel_add(p, "without", KIND_ISOLATION_REF, 20, ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS, 0);
      panel_add(p, "with slow", KIND_ISOLATION_SLOW, 20, ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS,
                0);
    }
  }
  return n;
}

static bool write_svg(const options_t* opt, const char* path) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "hostcall_bench: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  static panel_t panels[MAX_LIST + 3];
  uint32_t panel_count = build_panels(opt, panels);
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
  uint32_t max_groups = 2;
  for (uint32_t p = 0; p < panel_count; ++p) {
    if (panels[p].count > max_groups) max_groups = panels[p].count;
  }
  const double left = 70, panel_h = 240, top = 50, gap = 110, right = 20, group_w = 92;
  double width = left + right + group_w * max_groups + 130;
  double height = top + panel_count * (panel_h + gap) + 10;
  const char* color[MODE_COUNT] = {"#c0392b", "#1f77b4", "#2ca02c"};

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
          "p99; log scale, microseconds; under each: ours/baseline of round trips/s, p99, "
          "listener CPU per round trip</text>\n",
          left);
  for (uint32_t p = 0; p < panel_count; ++p) {
    const panel_t* panel = &panels[p];
    double y0 = top + p * (panel_h + gap) + 20;
    double plot_w = group_w * panel->count;
    fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" font-weight=\"bold\">%s</text>\n", left, y0 - 8,
            panel->title);
    for (double e = log_lo; e <= log_hi + 1e-9; e += 1) {
      double y = y0 + panel_h - (e - log_lo) / (log_hi - log_lo) * panel_h;
      fprintf(f,
              "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
              "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%g us</text>\n",
              left, y, left + plot_w, y, left - 6, y + 4, pow(10, e));
    }
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left,
            y0, left, y0 + panel_h);
    for (uint32_t g = 0; g < panel->count; ++g) {
      double gx = left + g * group_w, cx = gx + group_w / 2;
      fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%s</text>\n", cx,
              y0 + panel_h + 16, panel->label[g]);
      const result_t* base = panel->r[g][MODE_BASELINE];
      const result_t* ours = panel->r[g][MODE_OURS];
      if (base != NULL && ours != NULL) {
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#333\">rt/s x%.2f</text>\n"
                "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#333\">p99 x%.3g</text>\n"
                "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"#333\">cpu x%.2f</text>\n",
                cx, y0 + panel_h + 30, ours->rts / base->rts, cx, y0 + panel_h + 43,
                ours->p99_us / base->p99_us, cx, y0 + panel_h + 56,
                ours->listener_cpu_us_per_rt / base->listener_cpu_us_per_rt);
      }
      for (int m = 0; m < MODE_COUNT; ++m) {
        const result_t* r = panel->r[g][m];
        if (r == NULL) continue;
        double x = gx + group_w * (m == 0 ? 0.35 : 0.65);
#define YOF(v) (y0 + panel_h - (log10((v) > 0 ? (v) : pow(10, log_lo)) - log_lo) / (log_hi - log_lo) * panel_h)
        double y50 = YOF(r->p50_us), y99 = YOF(r->p99_us), y999 = YOF(r->p999_us);
#undef YOF
        fprintf(f,
                "<g><title>%s %s: p50 %.1f us, p99 %.1f us, p99.9 %.1f us, %.0f rt/s, listener "
                "%.2f us/rt</title>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"3\"/>\n"
                "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"/>\n"
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"8\" height=\"8\" fill=\"%s\"/>\n"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"/></g>\n",
                panel->label[g], kModeName[m], r->p50_us, r->p99_us, r->p999_us, r->rts,
                r->listener_cpu_us_per_rt, x, y50, x, y999, color[m], x, y50, color[m], x - 4,
                y99 - 4, color[m], x - 7, y999, x + 7, y999, color[m]);
      }
    }
  }
  double lx = width - 120;
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
          "usage: hostcall_bench [--json PATH] [--svg PATH] [--quick] [--no-idle]\n"
          "  device model: [--no-device] [--rounds N] [--device-ms N] [--paced-ms N]\n"
          "                [--device-waves 1,4,16,32,64]\n"
          "                [--paces 1000,200,50] [--paced-waves 1,16] [--no-pin]\n"
          "  thread per wave: [--no-threads] [--duration-ms N] [--segments N] [--warmup-ms N]\n"
          "                [--delays 20] [--waves 1,4,16,64] [--buffers 1,8] [--no-isolation]\n"
          "                [--wave-sched idle|nice19|normal] [--pin] [--no-wave-yield]\n"
          "  [--idle-ms N] [--modes baseline,ours,phasebit] [--ours-lib PATH] [--baseline-lib PATH]\n");
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
  opt->device = true;
  opt->threads = true;
  opt->rounds = 5;
  opt->device_ms = 300;
  opt->paced_ms = 1000;
  opt->modes[MODE_BASELINE] = opt->modes[MODE_OURS] = opt->modes[MODE_PHASE] = true;
  opt->delay_count = parse_list("20", opt->delays, MAX_LIST);
  opt->wave_count = parse_list("1,4,16,64", opt->waves, MAX_LIST);
  opt->buffer_count = parse_list("1,8", opt->buffers, MAX_LIST);
  opt->device_wave_count = parse_list("1,4,16,32,64", opt->device_waves, MAX_LIST);
  opt->pace_count = parse_list("1000,200,50", opt->paces, MAX_LIST);
  opt->paced_wave_count = parse_list("1,16", opt->paced_waves, MAX_LIST);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      opt->duration_ms = 60;
      opt->segments = 1;
      opt->warmup_ms = 20;
      opt->idle_ms = 100;
      opt->rounds = 1;
      opt->device_ms = 60;
      opt->paced_ms = 60;
      g_device_warmup_ms = 10;
    } else if (strcmp(a, "--no-isolation") == 0) {
      opt->isolation = false;
    } else if (strcmp(a, "--no-wave-yield") == 0) {
      g_wave_yield = false;
    } else if (strcmp(a, "--pin") == 0) {
      g_pin = true;
    } else if (strcmp(a, "--no-pin") == 0) {
      g_device_pin = false;
    } else if (strcmp(a, "--no-idle") == 0) {
      opt->idle = false;
    } else if (strcmp(a, "--no-device") == 0) {
      opt->device = false;
    } else if (strcmp(a, "--no-threads") == 0) {
      opt->threads = false;
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
    } else if (strcmp(a, "--rounds") == 0) {
      opt->rounds = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--device-ms") == 0) {
      opt->device_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--paced-ms") == 0) {
      opt->paced_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--json") == 0) {
      opt->json_path = v, ++i;
    } else if (strcmp(a, "--svg") == 0) {
      opt->svg_path = v, ++i;
    } else if (strcmp(a, "--ours-lib") == 0) {
      g_lib_paths[MODE_OURS] = g_lib_paths[MODE_PHASE] = v, ++i;
    } else if (strcmp(a, "--baseline-lib") == 0) {
      g_lib_paths[MODE_BASELINE] = v, ++i;
    } else if (strcmp(a, "--modes") == 0) {
      opt->modes[MODE_BASELINE] = strstr(v, "baseline") != NULL;
      opt->modes[MODE_OURS] = strstr(v, "ours") != NULL;
      opt->modes[MODE_PHASE] = strstr(v, "phasebit") != NULL;
      ++i;
    } else if (strcmp(a, "--delays") == 0) {
      opt->delay_count = parse_list(v, opt->delays, MAX_LIST), ++i;
    } else if (strcmp(a, "--waves") == 0) {
      opt->wave_count = parse_list(v, opt->waves, MAX_LIST), ++i;
    } else if (strcmp(a, "--device-waves") == 0) {
      opt->device_wave_count = parse_list(v, opt->device_waves, MAX_LIST), ++i;
    } else if (strcmp(a, "--paces") == 0) {
      opt->pace_count = strcmp(v, "none") == 0 ? 0 : parse_list(v, opt->paces, MAX_LIST), ++i;
    } else if (strcmp(a, "--paced-waves") == 0) {
      opt->paced_wave_count = parse_list(v, opt->paced_waves, MAX_LIST), ++i;
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
  const uint32_t* wave_lists[3] = {opt->waves, opt->device_waves, opt->paced_waves};
  const uint32_t wave_counts[3] = {opt->wave_count, opt->device_wave_count, opt->paced_wave_count};
  for (int l = 0; l < 3; ++l) {
    for (uint32_t i = 0; i < wave_counts[l]; ++i) {
      if (wave_lists[l][i] == 0 || wave_lists[l][i] > MAX_WAVES) {
        fprintf(stderr, "hostcall_bench: waves must be 1..%u\n", MAX_WAVES);
        return false;
      }
    }
  }
  for (uint32_t i = 0; i < opt->buffer_count; ++i) {
    if (opt->buffers[i] == 0 || opt->buffers[i] > MAX_BUFFERS) {
      fprintf(stderr, "hostcall_bench: buffers must be 1..%u\n", MAX_BUFFERS);
      return false;
    }
  }
  if (opt->segments == 0) opt->segments = 1;
  if (opt->rounds == 0) opt->rounds = 1;
  if (opt->rounds > MAX_ROUNDS) opt->rounds = MAX_ROUNDS;
  if (opt->duration_ms == 0 || opt->device_ms == 0 || opt->paced_ms == 0 || opt->delay_count == 0 ||
      opt->wave_count == 0 || opt->buffer_count == 0 || opt->device_wave_count == 0 ||
      !(opt->modes[0] || opt->modes[1] || opt->modes[2]) || !(opt->device || opt->threads)) {
    usage();
    return false;
  }
  return true;
}

/* ---- main ------------------------------------------------------------------------ */

static int run_device_mode(const options_t* opt) {
  int failures = 0;
  print_device_header(opt);
  /* Every W on one buffer, then W = 16 over 8 buffers, then the paced runs. */
  for (uint32_t i = 0; i <= opt->device_wave_count + opt->pace_count * opt->paced_wave_count; ++i) {
    int kind = KIND_DEVICE;
    uint32_t w, b = 1, pace = 0;
    if (i < opt->device_wave_count) {
      w = opt->device_waves[i];
    } else if (i == opt->device_wave_count) {
      w = 16;
      b = 8;
    } else {
      uint32_t j = i - opt->device_wave_count - 1;
      kind = KIND_PACED;
      pace = opt->paces[j / opt->paced_wave_count];
      w = opt->paced_waves[j % opt->paced_wave_count];
    }
    result_t* pair[MODE_COUNT];
    new_result_pair(opt, kind, 20, w, b, pace, pair);
    measure_device_pair(opt->rounds, kind == KIND_PACED ? opt->paced_ms : opt->device_ms, pair);
    for (int m = 0; m < MODE_COUNT; ++m) {
      if (pair[m] == NULL) continue;
      if (!pair[m]->ok) {
        failures += pair[m]->failed ? 1 : 0;
        printf("%-8s %3u %2u %4u | %s\n", kModeName[m], w, b, pace,
               pair[m]->failed ? "FAILED" : "no figures (machine too busy)");
      } else {
        print_device_row(pair[m]);
      }
    }
  }
  return failures;
}

static int run_thread_mode(const options_t* opt) {
  int failures = 0;
  g_pin_listener = g_pin;
  for (uint32_t di = 0; di < opt->delay_count; ++di) {
    uint32_t delay = opt->delays[di];
    print_header(delay);
    for (uint32_t wi = 0; wi < opt->wave_count; ++wi) {
      for (uint32_t bi = 0; bi < opt->buffer_count; ++bi) {
        result_t* pair[MODE_COUNT];
        new_result_pair(opt, KIND_THROUGHPUT, delay, opt->waves[wi], opt->buffers[bi], 0, pair);
        measure_pair(opt, pair);
        for (int m = 0; m < MODE_COUNT; ++m) {
          result_t* r = pair[m];
          if (r == NULL) continue;
          if (!r->ok) {
            failures += r->failed ? 1 : 0;
            printf("%-8s %3u %2u | %s\n", kModeName[m], r->waves, r->buffers,
                   r->failed ? "FAILED" : "no figures (machine too busy)");
            continue;
          }
          const result_t* base = baseline_of(r);
          print_row(r, base != NULL && base->ok ? base : NULL);
        }
      }
    }
  }
  if (opt->isolation) {
    printf("\nthread-per-wave isolation: %u waves on buffers 1..%u (trivial function), wake "
           "delay 20 us; \"slow\" adds 1 wave on buffer 0 whose lane-0 function takes 1 ms\n",
           ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS - 1);
    printf("%-8s %-5s | %10s %8s %8s %8s | %9s %9s | %10s | %5s %s\n", "mode", "slow", "rt/s",
           "p50 us", "p99 us", "p99.9 us", "cpu us/rt", "lst us/rt", "slow calls", "other",
           "thr");
    for (int kind = KIND_ISOLATION_REF; kind <= KIND_ISOLATION_SLOW; ++kind) {
      result_t* pair[MODE_COUNT];
      new_result_pair(opt, kind, 20, ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS, 0, pair);
      measure_pair(opt, pair);
      for (int m = 0; m < MODE_COUNT; ++m) {
        result_t* r = pair[m];
        if (r == NULL) continue;
        if (!r->ok) {
          failures += r->failed ? 1 : 0;
          printf("%-8s %-5s | %s\n", kModeName[m], kind == KIND_ISOLATION_SLOW ? "yes" : "no",
                 r->failed ? "FAILED" : "no figures (machine too busy)");
          continue;
        }
        printf("%-8s %-5s | %10.0f %8.1f %8.1f %8.1f | %9.2f %9.2f | %10" PRIu64 " | %5.2f %d\n",
               kModeName[m], kind == KIND_ISOLATION_SLOW ? "yes" : "no", r->rts, r->p50_us,
               r->p99_us, r->p999_us, r->process_cpu_us_per_rt, r->listener_cpu_us_per_rt,
               r->slow_calls, r->other_load_cores, r->listener_thread_count);
      }
    }
  }
  return failures;
}

int main(int argc, char** argv) {
  options_t opt;
  if (!parse_options(argc, argv, &opt)) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (hsa_init() != HSA_STATUS_SUCCESS) {
    fprintf(stderr, "hostcall_bench: hsa_init failed\n");
    return 1;
  }
  if (!load_libraries()) return 1;
  if (!alloc_buffers()) {
    fprintf(stderr, "hostcall_bench: out of memory\n");
    return 1;
  }
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) g_pin = g_device_pin = false;
  const char* ours_name = strrchr(g_lib_paths[MODE_OURS], '/');
  const char* base_name = strrchr(g_lib_paths[MODE_BASELINE], '/');
  printf("hostcall_bench: %ld CPUs online; ours = %s, baseline = %s\n",
         sysconf(_SC_NPROCESSORS_ONLN), ours_name ? ours_name + 1 : g_lib_paths[MODE_OURS],
         base_name ? base_name + 1 : g_lib_paths[MODE_BASELINE]);
  int failures = 0;
  if (opt.device) failures += run_device_mode(&opt);
  if (opt.threads) {
    printf("\nthread-per-wave mode: %u ms per configuration after %u ms warm-up, %u alternating "
           "segments; wave threads scheduled %s%s; %s\n"
           "columns: rt/s round trips per second; p50/p99/p99.9 round-trip latency; cpu us/rt "
           "process CPU (waves spin too) and lst us/rt listener-thread CPU per round trip; "
           "ratios vs the baseline (rt/s x = ours/baseline, p99 / = baseline/ours); other = CPU "
           "cores used by other processes meanwhile; thr = listener threads\n",
           opt.duration_ms, opt.warmup_ms, opt.segments, kWaveSchedName[g_wave_sched],
           g_wave_yield ? ", yielding once per call" : "",
           g_pin ? "listener threads pinned to CPU 0, waves to the others" : "no pinning");
    failures += run_thread_mode(&opt);
  }

  if (opt.idle) {
    printf("\nidle: 8 buffers enabled, no traffic, periodic re-check off, %u ms\n", opt.idle_ms);
    g_pin_listener = false;
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
      printf("%-8s listener CPU %.3f ms in %.2f s (%.4f%% of one core); process CPU %.3f ms; "
             "a bare thread sleeping on ours' idle schedule %.3f ms\n",
             kModeName[m], idle->listener_cpu_ms, idle->seconds, idle->listener_cpu_pct,
             idle->process_cpu_ms, idle->bare_sleeper_cpu_ms);
    }
  }

  evaluate_targets(&opt);
  if (g_target_count > 0) {
    printf("\ntargets (ratios ours/baseline; 20 us wake delay; blocked waits poll their first 200 us, as ROCr's)\n");
    for (size_t i = 0; i < g_target_count; ++i) {
      const target_t* t = &g_targets[i];
      printf("  [%s] %-58s %9.3f%s (target %s %g%s)  %s\n", t->pass ? "PASS" : "MISS", t->name,
             t->value, t->unit, t->higher_is_better ? ">=" : "<=", t->threshold, t->unit,
             t->detail);
    }
  }

  bool wrote = write_json(&opt, opt.json_path) && write_svg(&opt, opt.svg_path);
  if (wrote) printf("\nwrote %s and %s\n", opt.json_path, opt.svg_path);
  hsa_shut_down();
  return failures == 0 && wrote ? 0 : 1;
}
