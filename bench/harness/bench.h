/* hostcall_bench: what the measuring half's files share (bench/README.md).
 * The C half measures and writes JSON; bench/report/ computes the targets,
 * tables and plots from it. */
#ifndef HOSTCALL_BENCH_H
#define HOSTCALL_BENCH_H


#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "device_sim.h"
#include "device_sim_phase.h"
#include "hsa_sim.h"

/* ---- settings ------------------------------------------------------------ */

/* Thread names the listeners give their threads (Linux comm, <= 15 chars)
 * start with this: the product's listener and helper, every reference. */
#define THREAD_PREFIX "amdgpu-h"

#define PACKETS_PER_BUFFER 64u
#define MAX_BUFFERS 8u
#define MAX_WAVES 64u
#define MAX_LIST 8
#define MAX_ROUNDS 15
#define CALL_TIMEOUT_NS (30ull * 1000 * 1000 * 1000)
#define SLOW_FUNCTION_NS (1000ull * 1000) /* the slow host function: 1 ms */
#define ISOLATION_BUFFERS 8u
#define ISOLATION_NORMAL_WAVES 14u
/* A full-warp printf packet's work on the host (issue 27 item 6: about
 * 25 us on a real GPU's host); the heavy case's host function spins this
 * long per packet, spread over its 64 lanes. */
#define HEAVY_PACKET_NS 25000ull

/* The listeners, each measured in the same alternating rounds:
 *  * "baseline": bench/baseline's 2019-20 strategy (classic protocol);
 *  * "ours": the product library, classic buffers;
 *  * "phasebit": the product library serving the same waves through
 *    phase-bit buffers;
 *  * "classic2026", "phase2026": bench/baseline's 2026 strategies;
 *  * "floor-db", "floor-st": the spinning floor, polling the doorbell value
 *    or the ready stacks (classic protocol). */
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
extern const char* const kModeName[MODE_COUNT];
extern const char* const kModeThread[MODE_COUNT];
static inline bool mode_is_phase(int mode) { return mode == MODE_PHASE || mode == MODE_P2026; }
static inline bool mode_is_ours(int mode) { return mode == MODE_OURS || mode == MODE_PHASE; }

/* The sections of a run (--sections): a full run is all of them, and a
 * long one can be split over several processes (bench/report/merge_runs.py
 * joins their JSON). */
enum {
  SECTION_DEVICE = 1u << 0, /* device model, back to back */
  SECTION_PACED = 1u << 1,  /* device model, paced */
  SECTION_WAKEUP = 1u << 2, /* the bare wake-up yardstick */
  SECTION_THREADS = 1u << 3,
  SECTION_IDLE = 1u << 4,
  SECTION_LOST = 1u << 5,
  SECTION_HEAVY = 1u << 6,  /* one buffer, 64 waves of heavy (printf-like) packets */
  SECTION_HARNESS = 1u << 7, /* the earlier, kinder harness, for the comparison */
  SECTION_ALL = (1u << 8) - 1u
};

typedef struct {
  uint32_t sections;
  uint32_t duration_ms;
  uint32_t segments;
  uint32_t warmup_ms;
  uint32_t idle_ms;
  const char* json_path;
  bool isolation;
  bool modes[MODE_COUNT];
  uint32_t delays[MAX_LIST];
  uint32_t delay_count;
  uint32_t waves[MAX_LIST];
  uint32_t wave_count;
  uint32_t buffers[MAX_LIST];
  uint32_t buffer_count;
  /* device-model mode */
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
  /* the lost rings */
  uint32_t lost_gaps[MAX_LIST];
  uint32_t lost_gap_count;
  uint32_t lost_rescue_ms;
} options_t;

/* The harness's model of the GPU and of ROCr (--harness): faithful (the
 * default: ROCr's waits, waves ring as a GPU does) or the earlier, kinder
 * one (bench/README.md says what differs). */
enum { HARNESS_FAITHFUL = 0, HARNESS_LEGACY = 1 };
extern int g_harness;
void apply_harness(int harness);

/* ---- one measured configuration ---------------------------------------- */

enum {
  KIND_THROUGHPUT = 0,     /* thread-per-wave mode */
  KIND_ISOLATION_REF = 1,  /* thread-per-wave, slow-buffer case without the slow wave */
  KIND_ISOLATION_SLOW = 2, /* ... with it */
  KIND_DEVICE = 3,         /* device-model mode, every wave calling again at once */
  KIND_PACED = 4,          /* device-model mode, each wave waiting pace_us after an answer */
  KIND_HEAVY = 5,          /* device-model mode, heavy packets */
};

/* ---- latency histogram (log-linear, 32 sub-buckets per power of two) ---- */
#define SUB_BITS 5u
#define SUB_COUNT (1u << SUB_BITS)
#define BUCKETS ((64u - SUB_BITS + 1u) * SUB_COUNT)
uint32_t bucket_of(uint64_t v);
double hist_quantile(const uint64_t* hist, uint64_t total, double q);
double median_of(const double* values, uint32_t n);

/* What the library says it did for one buffer (its per-buffer counters,
 * amdgpu_dropin_hostcall_get_counters), summed over a result's buffers and
 * rounds; `have` is false for a listener without them. */
typedef struct {
  bool have;
  uint64_t packets, lanes, rings_seen, lost_rings, blocked_waits, wait_timeouts, handoffs;
  uint64_t longest_service_ns;
  /* Version 5 of the struct: the listener's other wake-ups. */
  uint64_t forecast_sleeps, watch_looks;
} lib_counters_t;

typedef struct {
  int kind;
  int mode;
  int harness;
  uint32_t delay_us;
  uint32_t waves;
  uint32_t buffers;
  uint32_t pace_us;
  /* results */
  bool ok;
  bool failed;
  uint64_t calls;
  double seconds;
  double rts;
  double mean_us, p50_us, p99_us, p999_us, max_us;
  double process_cpu_us_per_rt;
  double listener_cpu_us_per_rt;
  double listener_cpu_pct;   /* of one core, over the window */
  double other_load_cores;   /* CPU used by other processes during the window */
  int listener_thread_count; /* listener threads (main + helper) at the end */
  double device_cpu_us_per_rt; /* the device thread's own CPU per round trip */
  /* accumulated over the segments or rounds */
  uint32_t segments;
  uint64_t acc_sum_ns, acc_window_ns, acc_proc_ns, acc_listener_ns, acc_other_ns;
  uint64_t hist[BUCKETS];
  uint64_t slow_calls; /* isolation: calls of the slow wave in the window */
  /* device-model mode: the figures of each round (the reported figures are
   * their medians) */
  uint32_t rounds;
  double round_rts[MAX_ROUNDS], round_p50[MAX_ROUNDS], round_p99[MAX_ROUNDS],
      round_p999[MAX_ROUNDS], round_lcpu[MAX_ROUNDS], round_dcpu[MAX_ROUNDS],
      round_lpct[MAX_ROUNDS];
  lib_counters_t counters;
} result_t;

#define MAX_RESULTS 320
extern result_t g_results[MAX_RESULTS];
extern size_t g_result_count;
void new_result_pair(const options_t* opt, int kind, uint32_t delay_us, uint32_t waves,
                     uint32_t buffers, uint32_t pace_us, result_t* pair[MODE_COUNT]);
bool scheduler_bound(const result_t* r);
void print_result_line(const result_t* r);

/* ---- host CPUs: accounting and pinning (host_cpu.c) -------------------- */

#define MAX_TRACKED 16
typedef struct {
  int tids[MAX_TRACKED];
  uint64_t cpu[MAX_TRACKED];
  char names[MAX_TRACKED][16];
  int count;
} thread_set_t;

extern int g_cpu_main, g_cpu_listener, g_cpu_helper, g_cpu_device;
extern bool g_device_pin;   /* --no-pin turns it off */
extern bool g_pin_listener; /* whether enable_buffers pins the listener threads */
extern bool g_pin;          /* --pin: thread-per-wave pinning */
uint64_t timespec_ns(const struct timespec* ts);
uint64_t machine_busy_ns(void);
uint64_t process_cpu_ns(void);
void listener_threads(thread_set_t* set);
uint64_t listener_cpu_delta(const thread_set_t* before, const thread_set_t* after);
void pin_listener_threads(const thread_set_t* set, bool pin);
bool has_thread(const thread_set_t* set, const char* name);
void pin_current_thread_to(int cpu);
void choose_cpus(void);
void unpin_main_thread(void);
void sleep_ms(uint32_t ms);
const char* cpu_model_name(void);

/* ---- host functions the waves call (host_functions.c) ------------------ */

void bench_function(uint64_t out[2], const uint64_t in[7]);
void slow_function(uint64_t out[2], const uint64_t in[7]);
void heavy_function(uint64_t out[2], const uint64_t in[7]);

/* ---- the listeners and the buffers (listeners.c) ----------------------- */

extern void* g_buffers[MAX_BUFFERS];
extern const char* g_lib_paths[MODE_COUNT];
void set_lib_dir(const char* dir);
bool load_libraries(const bool* modes);
bool alloc_buffers(void);
bool enable_buffers(int mode, uint32_t count);
void disable_buffers(uint32_t count);
/* Adds the counters of the first `count` buffers (still enabled) to *sum:
 * each buffer's own counts, and the listener's (rings, waits), which every
 * buffer reports alike, once; leaves sum->have false when there are none. */
void add_buffer_counters(uint32_t count, lib_counters_t* sum);
/* The counters of buffer 0 now (have false when none). */
lib_counters_t buffer0_counters(void);

/* ---- the sections ------------------------------------------------------ */

int run_device_section(const options_t* opt, bool paced);
int run_heavy_section(const options_t* opt);
int run_harness_section(const options_t* opt);
int run_thread_section(const options_t* opt);
void run_wakeup_section(const options_t* opt);
int run_idle_section(const options_t* opt);
int run_lost_ring_section(const options_t* opt);
extern uint32_t g_device_warmup_ms;
enum { WAVE_SCHED_IDLE = 0, WAVE_SCHED_NICE = 1, WAVE_SCHED_NORMAL = 2 };
extern int g_wave_sched;
extern bool g_wave_yield;
extern const char* const kWaveSchedName[3];

/* ---- what the quiet sections found (idle.c, wakeup.c, lost_rings.c) ----- */

typedef struct {
  int mode;
  uint32_t buffers;
  bool ok;
  double seconds;
  double listener_cpu_ms;
  double listener_cpu_pct;
  double process_cpu_ms;
  /* Threads that do nothing but sleep, over the same window: with the
   * product listener's idle timeouts, and every LOST_RING_WATCH_MS as its
   * lost-ring watch; what those wake-ups alone cost here. */
  double bare_sleeper_cpu_ms;
  double bare_watch_period_cpu_ms;
  lib_counters_t counters;
} idle_t;
extern idle_t g_idle[MODE_COUNT];
extern bool g_have_idle;

enum { WAKE_FUTEX = 0, WAKE_RUNTIME = 1, WAKE_KINDS = 2 };
extern const char* const kWakeName[WAKE_KINDS];
typedef struct {
  bool ok;
  uint32_t rounds;
  uint64_t count;
  double round_p50[MAX_ROUNDS], round_p99[MAX_ROUNDS];
  double p50_us, p99_us;
} wakeup_t;
extern wakeup_t g_wakeup[WAKE_KINDS];
/* The same yardsticks measured again in the rounds of paced 1000 us, W=1
 * (device_model.c), one round of each after every round of the listeners:
 * the paced 1 ms target compares ours with the wake-up measured beside it. */
extern wakeup_t g_paced_wakeup[WAKE_KINDS];
bool run_wakeup_round(int kind, uint32_t pace_us, uint32_t duration_ms, wakeup_t* out);
/* Medians of the rounds and `ok` (a kind without rounds is left out of the
 * JSON); prints one line per kind that has rounds. */
void finish_wakeups(wakeup_t w[WAKE_KINDS], const char* where);

#define MAX_LOST 128
typedef struct {
  int mode;
  uint32_t gap_ms;
  bool first;
  bool served;
  double wait_ms;
  /* the library's own count of lost rings on the buffer went up by one */
  int counted; /* -1: no counters */
} lost_t;
extern lost_t g_lost[MAX_LOST];
extern size_t g_lost_count;
/* Listener CPU per 2 s of silence before the first lost ring and after the
 * later ones (NAN: not measured). */
extern double g_lost_idle_before_ms[MODE_COUNT];
extern double g_lost_idle_after_ms[MODE_COUNT];

/* ---- output (json_out.c) ------------------------------------------------ */

extern const char* g_host_label;
bool write_json(const options_t* opt, const char* path);

/* ---- options (options.c) ------------------------------------------------ */

bool parse_options(int argc, char** argv, options_t* opt);

#endif /* HOSTCALL_BENCH_H */
