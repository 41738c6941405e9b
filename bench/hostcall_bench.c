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

#define PACKETS_PER_BUFFER 64u
#define MAX_BUFFERS 8u
#define MAX_WAVES 64u
#define MAX_LIST 8
#define CALL_TIMEOUT_NS (30ull * 1000 * 1000 * 1000)
#define SLOW_FUNCTION_NS (1000ull * 1000) /* the slow host function: 1 ms */
#define ISOLATION_BUFFERS 8u
#define ISOLATION_NORMAL_WAVES 14u

/* The listeners, each measured in the same alternating rounds:
 *  * "baseline": bench/baseline's 2019-20 strategy (classic protocol);
 *  * "ours": the product library, classic buffers;
 *  * "phasebit": the product library serving the same waves through
 *    phase-bit buffers (amdgpu_dropin_hostcall_enable with the phase-bit
 *    protocol; the device side as device libraries built with
 *    USE_NEW_HOSTCALL_IMPL);
 *  * "classic2026", "phase2026": bench/baseline's 2026 strategies, each on
 *    its own protocol;
 *  * "floor-db", "floor-st": the spinning floor, polling the doorbell value
 *    or the ready stacks (classic protocol).
 * Ours is compared with every reference in the same protocol as itself
 * where the target says so (ours vs baseline and classic2026, phasebit vs
 * phase2026), and with every reference in the tables. */
enum {
  MODE_BASELINE = 0,
  MODE_OURS = 1,
  MODE_PHASE = 2,
  MODE_C2026 = 3,
  MODE_P2026 = 4,
  MODE_FLOOR_DB = 5,
  MODE_FLOOR_ST = 6,
  MODE_COUNT = 7
};
static const char* const kModeName[MODE_COUNT] = {"baseline",  "ours",     "phasebit", "classic2026",
                                                  "phase2026", "floor-db", "floor-st"};
/* The name each listener gives its (main) thread. */
static const char* const kModeThread[MODE_COUNT] = {
    "amdgpu-hc-base",  "amdgpu-hostcall", "amdgpu-hostcall", "amdgpu-hc-c2026",
    "amdgpu-hc-p2026", "amdgpu-hc-fldb",  "amdgpu-hc-flst"};
static bool mode_is_phase(int mode) { return mode == MODE_PHASE || mode == MODE_P2026; }
static bool mode_is_ours(int mode) { return mode == MODE_OURS || mode == MODE_PHASE; }

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
  /* the bare wake-up yardstick and the lost rings */
  bool wakeup;
  bool lost_rings;
  uint32_t lost_gaps[MAX_LIST];
  uint32_t lost_gap_count;
  uint32_t lost_rescue_ms;
} options_t;

/* --host LABEL: which host the figures come from, kept in the JSON. */
static const char* g_host_label = "unnamed";

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

/* Where the device-model threads run (chosen once in main, choose_cpus):
 * the bench's main thread, the listener's main thread, its helper, and the
 * device thread each on a core of its own (distinct physical cores where
 * the topology says so), the same for every listener. With fewer than four
 * cores: the listener threads on CPU 0, the device on CPU 1 and the main
 * thread unpinned (it sleeps while a round is measured). -1: unpinned. */
static int g_cpu_main = -1, g_cpu_listener = 0, g_cpu_helper = 0, g_cpu_device = 1;

static int read_int_file(const char* path, int fallback) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return fallback;
  int v = fallback;
  if (fscanf(f, "%d", &v) != 1) v = fallback;
  fclose(f);
  return v;
}

/* The CPUs the process may use, as it started. */
static cpu_set_t g_allowed_cpus;
static bool g_have_allowed_cpus;

/* Threads inherit their creator's CPUs: before the runs whose threads are
 * not pinned (thread per wave, idle), the main thread gives its pin up. */
static void unpin_main_thread(void) {
  if (g_have_allowed_cpus) sched_setaffinity(0, sizeof(g_allowed_cpus), &g_allowed_cpus);
}

static void choose_cpus(void) {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return;
  g_allowed_cpus = allowed;
  g_have_allowed_cpus = true;
  int chosen[4], n = 0, core_of[4], pkg_of[4];
  for (int c = 0; c < CPU_SETSIZE && n < 4; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    char path[96];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
    int core = read_int_file(path, c);
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
    int pkg = read_int_file(path, 0);
    bool sibling = false;
    for (int i = 0; i < n; ++i) sibling |= core_of[i] == core && pkg_of[i] == pkg;
    if (sibling) continue;
    core_of[n] = core;
    pkg_of[n] = pkg;
    chosen[n++] = c;
  }
  if (n >= 4) {
    g_cpu_main = chosen[0];
    g_cpu_listener = chosen[1];
    g_cpu_helper = chosen[2];
    g_cpu_device = chosen[3];
  } else if (n >= 2) {
    g_cpu_main = -1;
    g_cpu_listener = g_cpu_helper = chosen[0];
    g_cpu_device = chosen[1];
  }
}

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

/* Pins the listener threads in `set` when `pin` (see g_pin and the
 * device-model mode): a main listener thread to g_cpu_listener, a helper
 * (any other listener thread) to g_cpu_helper. */
static void pin_listener_threads(const thread_set_t* set, bool pin) {
  if (!pin || sysconf(_SC_NPROCESSORS_ONLN) < 2) return;
  for (int i = 0; i < set->count; ++i) {
    bool main_thread = false;
    for (int m = 0; m < MODE_COUNT; ++m) main_thread |= strcmp(set->names[i], kModeThread[m]) == 0;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(main_thread ? g_cpu_listener : g_cpu_helper, &cpus);
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
static const char* g_lib_paths[MODE_COUNT] = {
    HOSTCALL_BENCH_BASELINE_LIB,       HOSTCALL_BENCH_OURS_LIB,          HOSTCALL_BENCH_OURS_LIB,
    HOSTCALL_BENCH_CLASSIC2026_LIB,    HOSTCALL_BENCH_PHASE2026_LIB,     HOSTCALL_BENCH_FLOOR_DOORBELL_LIB,
    HOSTCALL_BENCH_FLOOR_STACK_LIB};
/* --lib-dir DIR: every library from DIR by its file name (a copied run). */
static char g_lib_storage[MODE_COUNT][512];
/* Occupancy bitmaps of the phase-bit buffers (64 packets: 2 words). */
static uint32_t g_bitmaps[MAX_BUFFERS][(PACKETS_PER_BUFFER + 31) / 32];
/* The mode whose library enabled the buffers currently enabled. */
static int g_mode;

static bool load_libraries(const bool* modes) {
  for (int m = 0; m < MODE_COUNT; ++m) {
    hostcall_lib_t* lib = &g_libs[m];
    /* The layout checks need ours and the 2019-20 baseline; the others only
     * when measured. */
    if (!modes[m] && m != MODE_OURS && m != MODE_BASELINE && m != MODE_PHASE) continue;
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
    if (mode_is_phase(m)) {
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
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (g_libs[m].handle == NULL) continue;
    if (g_libs[m].size(PACKETS_PER_BUFFER) != g_libs[MODE_OURS].size(PACKETS_PER_BUFFER) ||
        g_libs[m].alignment() != g_libs[MODE_OURS].alignment()) {
      fprintf(stderr, "hostcall_bench: %s and ours disagree on the buffer layout\n", kModeName[m]);
      return false;
    }
    if (mode_is_phase(m) && g_libs[m].protocol_size(PROTOCOL_PHASE_BIT, PACKETS_PER_BUFFER) !=
                                g_libs[MODE_PHASE].protocol_size(PROTOCOL_PHASE_BIT, PACKETS_PER_BUFFER)) {
      fprintf(stderr, "hostcall_bench: %s and ours disagree on the phase-bit layout\n", kModeName[m]);
      return false;
    }
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
    if (mode_is_phase(mode)) {
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
  const char* want = kModeThread[mode];
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
  if (d->pin) pin_current_thread_to(g_cpu_device);
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
  d->phase = mode_is_phase(r->mode);
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

/* ---- yardstick: a bare wake-up ---------------------------------------------- */

/* What waking a sleeping thread costs on this host, measured as the paced
 * runs measure a request: a "device" thread on the device's CPU posts every
 * pace_us (spinning in between) and a sleeper on the listener's CPU notes
 * how long after the post it runs again. Two ways to sleep:
 *  * futex: FUTEX_WAIT on the word the poster bumps and FUTEX_WAKEs (the
 *    bare kernel wake-up);
 *  * runtime: the software HSA runtime's blocked wait on a signal the
 *    poster stores to, as a listener waits (ROCr's poll of its first 200 us,
 *    then a futex sleep, plus the modelled 20 us interrupt latency). */
enum { WAKE_FUTEX = 0, WAKE_RUNTIME = 1, WAKE_KINDS = 2 };
static const char* const kWakeName[WAKE_KINDS] = {"futex", "runtime_wait"};

typedef struct {
  bool ok;
  uint32_t rounds;
  uint64_t count;
  double round_p50[MAX_ROUNDS], round_p99[MAX_ROUNDS];
  double p50_us, p99_us;
} wakeup_t;
static wakeup_t g_wakeup[WAKE_KINDS];
static bool g_have_wakeup;

typedef struct {
  int kind;
  uint64_t pace_ns;
  _Atomic uint32_t word;   /* futex word: the post's sequence number */
  _Atomic uint64_t t_post; /* when the latest post was made */
  _Atomic int stop;
  _Atomic int measuring;
  hsa_signal_t signal;
  uint64_t count;
  uint64_t hist[BUCKETS];
} wake_run_t;

static void* wake_sleeper_main(void* arg) {
  wake_run_t* w = arg;
  pthread_setname_np(pthread_self(), "bench-sleeper");
  if (g_device_pin) pin_current_thread_to(g_cpu_listener);
  uint32_t seen = 0;
  /* Relaxed: a stop request only needs to be seen eventually (the poster
   * posts once more after setting it). */
  while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
    if (w->kind == WAKE_FUTEX) {
      syscall(SYS_futex, &w->word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    } else {
      hsa_signal_wait_scacquire(w->signal, HSA_SIGNAL_CONDITION_NE, (hsa_signal_value_t)seen,
                                1000000000ull, HSA_WAIT_STATE_BLOCKED);
    }
    uint64_t now = device_sim_now_ns();
    /* Acquire: pairs with the poster's release store, so t_post is the
     * post's own time. */
    uint32_t value = atomic_load_explicit(&w->word, memory_order_acquire);
    if (value == seen) continue; /* spurious or timed out */
    seen = value;
    uint64_t t = atomic_load_explicit(&w->t_post, memory_order_relaxed);
    /* Relaxed: see device_collect. */
    if (atomic_load_explicit(&w->measuring, memory_order_relaxed) && now >= t) {
      w->count++;
      w->hist[bucket_of(now - t)]++;
    }
  }
  return NULL;
}

static void wake_post(wake_run_t* w, uint32_t seq) {
  atomic_store_explicit(&w->t_post, device_sim_now_ns(), memory_order_relaxed);
  /* Release: the sleeper's acquire load of the word sees t_post. */
  atomic_store_explicit(&w->word, seq, memory_order_release);
  if (w->kind == WAKE_FUTEX) {
    syscall(SYS_futex, &w->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  } else {
    hsa_signal_store_screlease(w->signal, (hsa_signal_value_t)seq);
  }
}

static void* wake_poster_main(void* arg) {
  wake_run_t* w = arg;
  pthread_setname_np(pthread_self(), "bench-device");
  if (g_device_pin) pin_current_thread_to(g_cpu_device);
  uint32_t seq = 0;
  uint64_t next = device_sim_now_ns() + w->pace_ns;
  /* Relaxed: see wake_sleeper_main. */
  while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
    if (device_sim_now_ns() < next) continue; /* spins, as the device thread */
    wake_post(w, ++seq);
    next = device_sim_now_ns() + w->pace_ns;
  }
  wake_post(w, ++seq); /* lets the sleeper see the stop */
  return NULL;
}

static bool run_wakeup_round(int kind, uint32_t pace_us, uint32_t duration_ms, wakeup_t* out) {
  hsa_sim_set_wait_wake_delay_us(20);
  hsa_sim_set_periodic_recheck(false, 1000);
  wake_run_t* w = calloc(1, sizeof(*w));
  if (w == NULL) return false;
  w->kind = kind;
  w->pace_ns = (uint64_t)pace_us * 1000u;
  if (kind == WAKE_RUNTIME && hsa_signal_create(0, 0, NULL, &w->signal) != HSA_STATUS_SUCCESS) {
    free(w);
    return false;
  }
  pthread_t sleeper, poster;
  bool ok = pthread_create(&sleeper, NULL, wake_sleeper_main, w) == 0;
  if (ok && pthread_create(&poster, NULL, wake_poster_main, w) != 0) {
    atomic_store_explicit(&w->stop, 1, memory_order_relaxed);
    wake_post(w, 0xFFFFFFFFu);
    pthread_join(sleeper, NULL);
    ok = false;
  }
  if (ok) {
    sleep_ms(g_device_warmup_ms);
    /* Relaxed: see device_collect. */
    atomic_store_explicit(&w->measuring, 1, memory_order_relaxed);
    sleep_ms(duration_ms);
    atomic_store_explicit(&w->measuring, 0, memory_order_relaxed);
    atomic_store_explicit(&w->stop, 1, memory_order_relaxed);
    pthread_join(poster, NULL);
    pthread_join(sleeper, NULL);
    if (w->count > 0 && out->rounds < MAX_ROUNDS) {
      uint32_t i = out->rounds++;
      out->round_p50[i] = hist_quantile(w->hist, w->count, 0.50) / 1e3;
      out->round_p99[i] = hist_quantile(w->hist, w->count, 0.99) / 1e3;
      out->count += w->count;
    }
  }
  if (kind == WAKE_RUNTIME) hsa_signal_destroy(w->signal);
  free(w);
  return ok;
}

/* ---- lost rings ---------------------------------------------------------------- */

/* A request whose doorbell ring was lost: the wave posts (classic: push on
 * the ready stack; phase-bit: flip its phase) and does not ring. The figure
 * is how long it waits for an answer. "first": the first lost ring a fresh
 * listener meets, after an idle gap; "later": lost rings after that one,
 * each after a gap. A request not answered within the rescue time is
 * rescued by a ring (recorded as not served). */
#define MAX_LOST 96
typedef struct {
  int mode;
  uint32_t gap_ms;
  bool first;
  bool served;
  double wait_ms;
} lost_t;
static lost_t g_lost[MAX_LOST];
static size_t g_lost_count;
static bool g_have_lost;
/* Listener CPU per 2 s of silence after lost rings (NAN: not measured). */
static double g_lost_idle_ms[MODE_COUNT];

static void lost_add(int mode, uint32_t gap_ms, bool first, bool served, double wait_ms) {
  if (g_lost_count >= MAX_LOST) return;
  g_lost[g_lost_count++] = (lost_t){mode, gap_ms, first, served, wait_ms};
}

/* One request without a ring on g_buffers[0]; returns false on a protocol
 * failure. */
static bool lost_call(int mode, uint32_t rescue_ms, bool* served, double* wait_ms) {
  void* buffer = g_buffers[0];
  bool phase = mode_is_phase(mode);
  static uint64_t lanes[64][8], out[64][8];
  for (uint32_t lane = 0; lane < 64; ++lane) {
    lanes[lane][0] = (uint64_t)(uintptr_t)&bench_function;
    lanes[lane][1] = lane * 3u + 1u;
    lanes[lane][2] = (uint64_t)lane * 0x9E3779B97F4A7C15ull;
  }
  uint64_t ptr = 0;
  uint32_t index = 0;
  if (phase) {
    if (device_sim_phase_claim(buffer, &index, CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return false;
    device_sim_phase_fill(buffer, index, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull,
                          (const uint64_t(*)[8])lanes);
  } else {
    if (device_sim_pop_free(buffer, &ptr, CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return false;
    device_sim_fill(buffer, ptr, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull, (const uint64_t(*)[8])lanes);
  }
  uint64_t t0 = device_sim_now_ns();
  if (phase) {
    device_sim_phase_flip(buffer, index);
  } else {
    device_sim_push_ready(buffer, ptr);
  }
  uint64_t deadline = t0 + (uint64_t)rescue_ms * 1000000u;
  bool answered = false;
  for (;;) {
    answered = phase ? device_sim_phase_is_answered(buffer, index) : device_sim_is_served(buffer, ptr);
    if (answered || device_sim_now_ns() >= deadline) break;
    struct timespec ts = {0, 20000}; /* 20 us: the figure is in milliseconds */
    nanosleep(&ts, NULL);
  }
  uint64_t t1 = device_sim_now_ns();
  *served = answered;
  *wait_ms = (double)(t1 - t0) / 1e6;
  if (!answered) { /* the rescue: a ring */
    if (phase) {
      hsa_signal_t doorbell = {device_sim_phase_prefix(buffer)->doorbell};
      hsa_signal_add_screlease(doorbell, 1);
      if (device_sim_phase_wait_answered(buffer, index, CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return false;
    } else {
      device_sim_ring_doorbell(buffer);
      if (device_sim_wait_served(buffer, ptr, CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return false;
    }
  }
  bool good = true;
  if (phase) {
    device_sim_phase_read_results(buffer, index, ~0ull, out);
    device_sim_phase_clear_bit(buffer, index);
  } else {
    device_sim_read_results(buffer, ptr, ~0ull, out);
    device_sim_push_free(buffer, ptr);
  }
  for (uint32_t lane = 0; lane < 64; ++lane) good &= out[lane][0] == lanes[lane][1] + 1;
  return good;
}

/* A fresh listener of `mode` on one buffer: one rung call, `first_gap_ms`
 * of silence, a lost ring; then, when `later` and it was served, one lost
 * ring after each gap of `gaps`, and (`idle_ms` > 0) the listener's CPU over
 * idle_ms of silence after them. */
static bool run_lost_rings(int mode, uint32_t first_gap_ms, bool later, const uint32_t* gaps,
                           uint32_t gap_count, uint32_t rescue_ms, uint32_t idle_ms) {
  hsa_sim_set_wait_wake_delay_us(20);
  hsa_sim_set_periodic_recheck(false, 1000);
  g_pin_listener = g_device_pin;
  if (!enable_buffers(mode, 1)) return false;
  bool ok = true;
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  lanes[0][0] = (uint64_t)(uintptr_t)&bench_function;
  if (device_sim_hostcall(g_buffers[0], DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, lanes,
                          CALL_TIMEOUT_NS) != DEVICE_SIM_OK) {
    ok = false;
  }
  bool served = false;
  double wait_ms = NAN;
  if (ok) {
    sleep_ms(first_gap_ms);
    ok = lost_call(mode, rescue_ms, &served, &wait_ms);
    if (ok) lost_add(mode, first_gap_ms, true, served, wait_ms);
  }
  if (ok && later && served) {
    for (uint32_t i = 0; i < gap_count && ok; ++i) {
      sleep_ms(gaps[i]);
      bool s2 = false;
      double w2 = NAN;
      ok = lost_call(mode, rescue_ms, &s2, &w2);
      if (ok) lost_add(mode, gaps[i], false, s2, w2);
    }
    if (ok && idle_ms > 0) {
      sleep_ms(50);
      thread_set_t before, after;
      listener_threads(&before);
      uint64_t t0 = device_sim_now_ns();
      sleep_ms(idle_ms);
      uint64_t t1 = device_sim_now_ns();
      listener_threads(&after);
      g_lost_idle_ms[mode] = (double)listener_cpu_delta(&before, &after) / 1e6 * 2e9 / (double)(t1 - t0);
    }
  }
  disable_buffers(1);
  if (!ok) fprintf(stderr, "hostcall_bench: lost-ring run of %s failed\n", kModeName[mode]);
  return ok;
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

/* The result r's ratios in the tables are against: the 2019-20 baseline
 * for ours, the 2026 phase-bit strategy for phasebit (ours when it was not
 * measured); the references have none. */
static const result_t* baseline_of(const result_t* r) {
  int against;
  if (r->mode == MODE_OURS) {
    against = MODE_BASELINE;
  } else if (r->mode == MODE_PHASE) {
    against = find_result(r->kind, MODE_P2026, r->delay_us, r->waves, r->buffers, r->pace_us)
                  ? MODE_P2026
                  : MODE_OURS;
  } else {
    return NULL;
  }
  return find_result(r->kind, against, r->delay_us, r->waves, r->buffers, r->pace_us);
}

/* The same configuration measured with listener `mode`. */
static const result_t* same_config(const result_t* r, int mode) {
  return find_result(r->kind, mode, r->delay_us, r->waves, r->buffers, r->pace_us);
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
         "each answer (paced; its rounds last %u ms); ratios are ours / baseline and phasebit / "
         "phase2026\n",
         g_device_pin ? ", pinned (see the CPU line above)" : ", no pinning", opt->rounds,
         opt->device_ms, opt->paced_ms);
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

static target_t g_targets[160];
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

enum { FIGURE_RTS, FIGURE_P99, FIGURE_P50, FIGURE_CPU };
static const char* const kFigureName[] = {"round trips/s", "p99", "p50", "listener CPU/rt"};

/* A device-model target on the ratio `mine` / `ref` of one figure. */
static void ratio_target(int kind, int mine, int ref, uint32_t w, uint32_t b, uint32_t pace,
                         int figure, double threshold) {
  const result_t* base = find_result(kind, ref, 20, w, b, pace);
  const result_t* ours = find_result(kind, mine, 20, w, b, pace);
  if (base == NULL || ours == NULL) return;
  char name[96], config[48], detail[256];
  if (kind == KIND_PACED) {
    snprintf(config, sizeof(config), "paced %u us W=%u B=%u", pace, w, b);
  } else {
    snprintf(config, sizeof(config), "W=%u B=%u", w, b);
  }
  double a, c;
  const char* unit = figure == FIGURE_RTS ? "/s" : " us";
  if (figure == FIGURE_RTS) {
    a = ours->rts, c = base->rts;
  } else if (figure == FIGURE_P99) {
    a = ours->p99_us, c = base->p99_us;
  } else if (figure == FIGURE_P50) {
    a = ours->p50_us, c = base->p50_us;
  } else {
    a = ours->listener_cpu_us_per_rt, c = base->listener_cpu_us_per_rt;
  }
  snprintf(name, sizeof(name), "device %s: %s %s/%s", config, kFigureName[figure], kModeName[mine],
           kModeName[ref]);
  snprintf(detail, sizeof(detail), "%s %.4g%s, %s %.4g%s", kModeName[mine], a, unit,
           kModeName[ref], c, unit);
  add_target(name, a / c, threshold, "x", figure == FIGURE_RTS, detail);
}

static double idle_per_2s(int mode) {
  const idle_t* idle = &g_idle[mode];
  return g_have_idle && idle->ok ? idle->listener_cpu_ms * 2.0 / idle->seconds : NAN;
}

static void evaluate_targets(const options_t* opt) {
  char detail[256], name[96];
  static const uint32_t kLoad[4][2] = {{4, 1}, {16, 1}, {64, 1}, {16, 8}};
  if (opt->device) {
    /* Against the spinning strategies, each in ours' same protocol: the
     * 2019-20 one (classic) and the 2026 phase-bit one. */
    const int pairs[2][2] = {{MODE_OURS, MODE_BASELINE}, {MODE_PHASE, MODE_P2026}};
    for (int p = 0; p < 2; ++p) {
      int mine = pairs[p][0], ref = pairs[p][1];
      ratio_target(KIND_DEVICE, mine, ref, 1, 1, 0, FIGURE_RTS, 1.0);
      ratio_target(KIND_DEVICE, mine, ref, 1, 1, 0, FIGURE_P99, 1.0);
      for (int i = 0; i < 4; ++i) {
        ratio_target(KIND_DEVICE, mine, ref, kLoad[i][0], kLoad[i][1], 0, FIGURE_RTS, 1.0);
        ratio_target(KIND_DEVICE, mine, ref, kLoad[i][0], kLoad[i][1], 0, FIGURE_P99, 1.0);
        ratio_target(KIND_DEVICE, mine, ref, kLoad[i][0], kLoad[i][1], 0, FIGURE_CPU, 1.0);
      }
      for (uint32_t j = 0; j < opt->paced_wave_count; ++j) {
        uint32_t w = opt->paced_waves[j];
        ratio_target(KIND_PACED, mine, ref, w, 1, 50, FIGURE_P99, 1.0);
        ratio_target(KIND_PACED, mine, ref, w, 1, 200, FIGURE_P99, 1.0);
        ratio_target(KIND_PACED, mine, ref, w, 1, 1000, FIGURE_CPU, 0.25);
      }
    }
    /* Against the 2026 classic strategy (it sleeps): every latency figure
     * and the CPU per request at every pace. */
    for (size_t i = 0; i < g_result_count; ++i) {
      const result_t* r = &g_results[i];
      if (r->mode != MODE_OURS || (r->kind != KIND_DEVICE && r->kind != KIND_PACED)) continue;
      ratio_target(r->kind, MODE_OURS, MODE_C2026, r->waves, r->buffers, r->pace_us, FIGURE_P50, 1.0);
      ratio_target(r->kind, MODE_OURS, MODE_C2026, r->waves, r->buffers, r->pace_us, FIGURE_P99, 1.0);
      if (r->kind == KIND_PACED) {
        ratio_target(r->kind, MODE_OURS, MODE_C2026, r->waves, r->buffers, r->pace_us, FIGURE_CPU, 1.0);
      }
    }
    /* The moonshot: one wave's round trips within 1.1x of the fastest floor. */
    const result_t* ours = find_result(KIND_DEVICE, MODE_OURS, 20, 1, 1, 0);
    const result_t* db = find_result(KIND_DEVICE, MODE_FLOOR_DB, 20, 1, 1, 0);
    const result_t* st = find_result(KIND_DEVICE, MODE_FLOOR_ST, 20, 1, 1, 0);
    const result_t* fast = db && st ? (db->rts >= st->rts ? db : st) : (db ? db : st);
    if (ours && fast) {
      snprintf(detail, sizeof(detail), "ours %.0f/s, fastest floor (%s) %.0f/s", ours->rts,
               kModeName[fast->mode], fast->rts);
      add_target("moonshot: device W=1 B=1 round trips/s ours/fastest floor", ours->rts / fast->rts,
                 1.0 / 1.1, "x", true, detail);
    }
  }
  /* Against the bare wake-up: the paced 1 ms p99 at most its p99 + 10 us. */
  if (g_have_wakeup && g_wakeup[WAKE_FUTEX].ok) {
    for (int k = 0; k < 2; ++k) {
      int mine = k == 0 ? MODE_OURS : MODE_PHASE;
      const result_t* r = find_result(KIND_PACED, mine, 20, 1, 1, 1000);
      if (r == NULL) continue;
      snprintf(name, sizeof(name), "paced 1000 us W=1 B=1: %s p99 - bare futex wake-up p99",
               kModeName[mine]);
      snprintf(detail, sizeof(detail),
               "%s %.1f us, futex wake-up %.1f us, runtime's blocked-wait wake-up %.1f us "
               "(the software runtime adds 20 us to every wake-up)",
               kModeName[mine], r->p99_us, g_wakeup[WAKE_FUTEX].p99_us, g_wakeup[WAKE_RUNTIME].p99_us);
      add_target(name, r->p99_us - g_wakeup[WAKE_FUTEX].p99_us, 10.0, " us", false, detail);
      if (g_wakeup[WAKE_RUNTIME].ok) {
        snprintf(name, sizeof(name), "paced 1000 us W=1 B=1: %s p99 - runtime wake-up p99",
                 kModeName[mine]);
        add_target(name, r->p99_us - g_wakeup[WAKE_RUNTIME].p99_us, 10.0, " us", false, detail);
      }
    }
  }
  for (int k = 0; k < 2; ++k) {
    int mine = k == 0 ? MODE_OURS : MODE_PHASE;
    double per_2s = idle_per_2s(mine);
    if (isnan(per_2s)) continue;
    const idle_t* idle = &g_idle[mine];
    snprintf(detail, sizeof(detail),
             "%.3f ms of listener CPU in %.2f s (%u buffers; a bare thread sleeping on the same "
             "schedule %.3f ms)",
             idle->listener_cpu_ms, idle->seconds, idle->buffers, idle->bare_sleeper_cpu_ms);
    snprintf(name, sizeof(name), "idle: %s listener CPU per 2 s", kModeName[mine]);
    add_target(name, per_2s, 1.0, " ms", false, detail);
    double c2026 = idle_per_2s(MODE_C2026);
    if (!isnan(c2026) && c2026 > 0) {
      snprintf(detail, sizeof(detail), "%s %.3f ms, classic2026 %.3f ms per 2 s", kModeName[mine],
               per_2s, c2026);
      snprintf(name, sizeof(name), "idle: %s/classic2026 listener CPU", kModeName[mine]);
      add_target(name, per_2s / c2026, 1.0 / 20.0, "x", false, detail);
    }
  }
  /* Lost rings: every later one within 20 ms, the first within the idle
   * timeout (at most IDLE_WAIT_MAX_MS, plus the wait's slack). */
  if (g_have_lost) {
    for (int k = 0; k < 2; ++k) {
      int mine = k == 0 ? MODE_OURS : MODE_PHASE;
      double first_max = -1, later_max = -1;
      bool first_all = true, later_all = true;
      for (size_t i = 0; i < g_lost_count; ++i) {
        const lost_t* l = &g_lost[i];
        if (l->mode != mine) continue;
        double v = l->served ? l->wait_ms : INFINITY;
        if (l->first) {
          first_max = fmax(first_max, v);
          first_all &= l->served;
        } else {
          later_max = fmax(later_max, v);
          later_all &= l->served;
        }
      }
      if (first_max >= 0) {
        snprintf(name, sizeof(name), "lost ring: %s first one's wait (worst gap)", kModeName[mine]);
        snprintf(detail, sizeof(detail), "%s; idle timeout at most %u ms",
                 first_all ? "all served" : "one not served", AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS);
        add_target(name, first_max, AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS + 50.0, " ms", false,
                   detail);
      }
      if (later_max >= 0) {
        snprintf(name, sizeof(name), "lost ring: %s later ones' wait (worst gap)", kModeName[mine]);
        snprintf(detail, sizeof(detail), "%s; after the first, timeouts are at most %u ms",
                 later_all ? "all served" : "one not served", AMDGPU_DROPIN_HOSTCALL_LOST_RING_WAIT_MS);
        add_target(name, later_max, 20.0, " ms", false, detail);
      }
    }
  }
  if (opt->threads) {
    const result_t* base = find_result(KIND_THROUGHPUT, MODE_BASELINE, 20, 1, 1, 0);
    const result_t* ours = find_result(KIND_THROUGHPUT, MODE_OURS, 20, 1, 1, 0);
    if (base && ours) {
      snprintf(detail, sizeof(detail), "ours %.0f/s, baseline %.0f/s", ours->rts, base->rts);
      add_target("thread-per-wave W=1 B=1: round trips/s ours/baseline", ours->rts / base->rts,
                 1.0, "x", true, detail);
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
      const result_t* cslow = find_result(KIND_ISOLATION_SLOW, MODE_C2026, 20,
                                          ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS, 0);
      snprintf(detail, sizeof(detail),
               "other buffers' p99 %.1f us with a 1 ms function on buffer 0, %.1f us without "
               "(with it: baseline %.1f us, classic2026 %.1f us)",
               slow->p99_us, ref->p99_us, bslow ? bslow->p99_us : NAN, cslow ? cslow->p99_us : NAN);
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
  fprintf(f,
          "  \"machine\": {\"cpus_online\": %ld, \"kernel\": \"%s %s\", \"arch\": \"%s\", "
          "\"host\": \"%s\", \"cpu_main\": %d, \"cpu_listener\": %d, \"cpu_helper\": %d, "
          "\"cpu_device\": %d},\n",
          sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, u.machine, g_host_label,
          g_device_pin ? g_cpu_main : -1, g_device_pin ? g_cpu_listener : -1,
          g_device_pin ? g_cpu_helper : -1, g_device_pin ? g_cpu_device : -1);
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
    /* Ratios against every other listener measured in this configuration. */
    fputs(", \"vs\": {", f);
    bool first_vs = true;
    for (int m = 0; m < MODE_COUNT && r->ok; ++m) {
      const result_t* o = m == r->mode ? NULL : same_config(r, m);
      if (o == NULL) continue;
      fprintf(f, "%s\"%s\": {\"round_trips_per_s\": ", first_vs ? "" : ", ", kModeName[m]);
      json_number(f, r->rts / o->rts);
      json_field(f, "p50", r->p50_us / o->p50_us);
      json_field(f, "p99", r->p99_us / o->p99_us);
      json_field(f, "listener_cpu_per_rt", r->listener_cpu_us_per_rt / o->listener_cpu_us_per_rt);
      fputs("}", f);
      first_vs = false;
    }
    fputs("}", f);
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
  fprintf(f, "\n  ],\n  \"wakeup\": [");
  for (int k = 0; k < WAKE_KINDS && g_have_wakeup; ++k) {
    const wakeup_t* w = &g_wakeup[k];
    if (!w->ok) continue;
    fprintf(f, "%s\n    {\"kind\": \"%s\", \"pace_us\": 1000, \"count\": %" PRIu64, k ? "," : "",
            kWakeName[k], w->count);
    json_field(f, "p50_us", w->p50_us);
    json_field(f, "p99_us", w->p99_us);
    fputs(", \"rounds\": {", f);
    json_array(f, "p50_us", w->round_p50, w->rounds);
    fputs(", ", f);
    json_array(f, "p99_us", w->round_p99, w->rounds);
    fputs("}}", f);
  }
  fprintf(f, "\n  ],\n  \"lost_rings\": [");
  for (size_t i = 0; i < g_lost_count; ++i) {
    const lost_t* l = &g_lost[i];
    fprintf(f, "%s\n    {\"mode\": \"%s\", \"gap_ms\": %u, \"which\": \"%s\", \"served\": %s",
            i ? "," : "", kModeName[l->mode], l->gap_ms, l->first ? "first" : "later",
            l->served ? "true" : "false");
    json_field(f, "wait_ms", l->wait_ms);
    fputs("}", f);
  }
  fprintf(f, "\n  ],\n  \"idle_after_lost_rings\": {");
  bool first_lost_idle = true;
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (isnan(g_lost_idle_ms[m])) continue;
    fprintf(f, "%s\"%s\": ", first_lost_idle ? "" : ", ", kModeName[m]);
    json_number(f, g_lost_idle_ms[m]);
    first_lost_idle = false;
  }
  fprintf(f, "},\n  \"targets\": [\n");
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
  const double left = 70, panel_h = 240, top = 50, gap = 110, right = 20, group_w = 120;
  double width = left + right + group_w * max_groups + 130;
  double height = top + panel_count * (panel_h + gap) + 10;
  const char* color[MODE_COUNT] = {"#c0392b", "#1f77b4", "#2ca02c", "#9467bd",
                                   "#ff7f0e", "#7f7f7f", "#bcbd22"};

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
        double x = gx + group_w * (0.12 + 0.76 * (double)m / (MODE_COUNT - 1));
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
          "  [--idle-ms N] [--modes baseline,ours,phasebit,classic2026,phase2026,floor-db,floor-st]\n"
          "  [--ours-lib PATH] [--baseline-lib PATH] [--lib-dir DIR] [--host LABEL]\n"
          "  [--no-wakeup] [--no-lost-rings] [--lost-gaps 5,50,200] [--lost-rescue-ms N]\n");
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
  for (int m = 0; m < MODE_COUNT; ++m) opt->modes[m] = true;
  opt->wakeup = true;
  opt->lost_rings = true;
  opt->lost_gap_count = parse_list("5,50,200", opt->lost_gaps, MAX_LIST);
  opt->lost_rescue_ms = 2000;
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
      opt->lost_gap_count = parse_list("5", opt->lost_gaps, MAX_LIST);
      opt->lost_rescue_ms = 150;
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
    } else if (strcmp(a, "--no-wakeup") == 0) {
      opt->wakeup = false;
    } else if (strcmp(a, "--no-lost-rings") == 0) {
      opt->lost_rings = false;
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
      for (int m = 0; m < MODE_COUNT; ++m) opt->modes[m] = false;
      char* copy = strdup(v);
      for (char* tok = strtok(copy, ","); tok != NULL; tok = strtok(NULL, ",")) {
        bool known = false;
        for (int m = 0; m < MODE_COUNT; ++m) {
          if (strcmp(tok, kModeName[m]) == 0) opt->modes[m] = known = true;
        }
        if (!known) {
          fprintf(stderr, "hostcall_bench: unknown mode %s\n", tok);
          free(copy);
          return false;
        }
      }
      free(copy);
      ++i;
    } else if (strcmp(a, "--lib-dir") == 0) {
      static const char* const kFile[MODE_COUNT] = {
          "libhostcall_baseline.so", "libamdgpu_dropin.so", "libamdgpu_dropin.so",
          "libhostcall_classic2026.so", "libhostcall_phase2026.so", "libhostcall_floor_doorbell.so",
          "libhostcall_floor_stack.so"};
      for (int m = 0; m < MODE_COUNT; ++m) {
        snprintf(g_lib_storage[m], sizeof(g_lib_storage[m]), "%s/%s", v, kFile[m]);
        g_lib_paths[m] = g_lib_storage[m];
      }
      ++i;
    } else if (strcmp(a, "--host") == 0) {
      g_host_label = v, ++i;
    } else if (strcmp(a, "--lost-gaps") == 0) {
      opt->lost_gap_count = parse_list(v, opt->lost_gaps, MAX_LIST), ++i;
    } else if (strcmp(a, "--lost-rescue-ms") == 0) {
      opt->lost_rescue_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
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
      !(opt->device || opt->threads)) {
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

/* Ours and phasebit against every reference listener, per configuration:
 * rt/s, p99 and listener CPU per round trip, each mine / reference. */
static void print_vs_matrix(void) {
  static const int refs[] = {MODE_BASELINE, MODE_C2026, MODE_P2026, MODE_FLOOR_DB, MODE_FLOOR_ST};
  printf("\nratios (listener / reference) of rt/s, p99 and listener CPU per round trip, medians\n");
  printf("%-8s %3s %2s %4s |", "mode", "W", "B", "P us");
  for (size_t k = 0; k < sizeof(refs) / sizeof(refs[0]); ++k) printf(" %-20s |", kModeName[refs[k]]);
  printf("\n");
  for (size_t i = 0; i < g_result_count; ++i) {
    const result_t* r = &g_results[i];
    if (!r->ok || !mode_is_ours(r->mode) || (r->kind != KIND_DEVICE && r->kind != KIND_PACED)) continue;
    printf("%-8s %3u %2u %4u |", kModeName[r->mode], r->waves, r->buffers, r->pace_us);
    for (size_t k = 0; k < sizeof(refs) / sizeof(refs[0]); ++k) {
      const result_t* o = same_config(r, refs[k]);
      if (o == NULL) {
        printf(" %-20s |", "-");
      } else {
        printf(" %6.2f %6.2f %6.2f |", r->rts / o->rts, r->p99_us / o->p99_us,
               r->listener_cpu_us_per_rt / o->listener_cpu_us_per_rt);
      }
    }
    printf("\n");
  }
}

static void run_wakeups(const options_t* opt) {
  printf("\nbare wake-up, one post per 1000 us, poster on the device's CPU, sleeper on the "
         "listener's; medians of %u rounds of %u ms\n", opt->rounds, opt->paced_ms);
  for (uint32_t round = 0; round < opt->rounds; ++round) {
    for (int k = 0; k < WAKE_KINDS; ++k) {
      if (!run_wakeup_round(k, 1000, opt->paced_ms, &g_wakeup[k])) {
        fprintf(stderr, "hostcall_bench: wake-up yardstick %s failed\n", kWakeName[k]);
      }
    }
  }
  for (int k = 0; k < WAKE_KINDS; ++k) {
    wakeup_t* w = &g_wakeup[k];
    w->ok = w->rounds > 0;
    if (!w->ok) continue;
    g_have_wakeup = true;
    w->p50_us = median_of(w->round_p50, w->rounds);
    w->p99_us = median_of(w->round_p99, w->rounds);
    printf("%-13s p50 %8.1f us  p99 %8.1f us  (%" PRIu64 " wake-ups)\n", kWakeName[k], w->p50_us,
           w->p99_us, w->count);
  }
}

static int run_lost_ring_mode(const options_t* opt) {
  int failures = 0;
  printf("\nlost rings: a request posted without a ring after an idle gap; wait until answered "
         "(ms; not answered within %u ms: rescued by a ring, shown as >); 'first' on a fresh "
         "listener, 'later' after it\n", opt->lost_rescue_ms);
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (!opt->modes[m]) continue;
    size_t start = g_lost_count;
    for (uint32_t i = 0; i < opt->lost_gap_count; ++i) {
      bool later = i == 0;
      bool idle = later && (mode_is_ours(m) || m == MODE_C2026);
      if (!run_lost_rings(m, opt->lost_gaps[i], later, opt->lost_gaps, opt->lost_gap_count,
                          opt->lost_rescue_ms, idle ? opt->idle_ms : 0)) {
        ++failures;
        break;
      }
    }
    g_have_lost = true;
    printf("%-11s", kModeName[m]);
    for (size_t i = start; i < g_lost_count; ++i) {
      const lost_t* l = &g_lost[i];
      printf(" %s %ums:%s%.1f", l->first ? "first" : "later", l->gap_ms, l->served ? "" : ">",
             l->wait_ms);
    }
    if (!isnan(g_lost_idle_ms[m])) printf("; idle after them %.2f ms CPU per 2 s", g_lost_idle_ms[m]);
    printf("\n");
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
  for (int m = 0; m < MODE_COUNT; ++m) g_lost_idle_ms[m] = NAN;
  if (!load_libraries(opt.modes)) return 1;
  if (!alloc_buffers()) {
    fprintf(stderr, "hostcall_bench: out of memory\n");
    return 1;
  }
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) g_pin = g_device_pin = false;
  choose_cpus();
  if (g_device_pin && g_cpu_main >= 0) pin_current_thread_to(g_cpu_main);
  const char* ours_name = strrchr(g_lib_paths[MODE_OURS], '/');
  const char* base_name = strrchr(g_lib_paths[MODE_BASELINE], '/');
  printf("hostcall_bench: %ld CPUs online; ours = %s, baseline = %s\n",
         sysconf(_SC_NPROCESSORS_ONLN), ours_name ? ours_name + 1 : g_lib_paths[MODE_OURS],
         base_name ? base_name + 1 : g_lib_paths[MODE_BASELINE]);
  if (g_device_pin) {
    printf("device-model pinning: main thread %s%d, listener CPU %d, its helper CPU %d, device "
           "thread CPU %d (host: %s)\n", g_cpu_main < 0 ? "unpinned " : "CPU ",
           g_cpu_main < 0 ? -1 : g_cpu_main, g_cpu_listener, g_cpu_helper, g_cpu_device,
           g_host_label);
  }
  int failures = 0;
  if (opt.device) {
    failures += run_device_mode(&opt);
    print_vs_matrix();
  }
  if (opt.wakeup) run_wakeups(&opt);
  unpin_main_thread();
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

  if (opt.lost_rings) failures += run_lost_ring_mode(&opt);

  evaluate_targets(&opt);
  if (g_target_count > 0) {
    printf("\ntargets (ratios listener/reference; 20 us wake delay; blocked waits poll their first "
           "200 us, as ROCr's)\n");
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
