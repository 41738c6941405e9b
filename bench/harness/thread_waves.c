/* hostcall_bench: thread per wave (device_sim_waves: one host thread per
 * wave). With more wave threads than the machine has cores its figures
 * measure the host scheduler more than the listener (marked
 * scheduler-bound); kept for the W = 1 figure and the slow-buffer case. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"

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
const char* const kWaveSchedName[3] = {"idle", "nice19", "normal"};
int g_wave_sched = WAVE_SCHED_NORMAL;
/* --no-wave-yield turns this off: each simulated wave yields the CPU once
 * before each call (in the fill hook, as if the wave computed between
 * calls). On 2 cores, a wave served within microseconds otherwise keeps its
 * core and calls again while other runnable waves wait for the scheduler's
 * time slice (milliseconds), which shows up as a p99 of the simulation's
 * scheduling, not of the listener. Same for both modes. */
bool g_wave_yield = true;

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

int run_thread_section(const options_t* opt) {
  int failures = 0;
  g_pin_listener = g_pin;
  unpin_main_thread();
  for (uint32_t di = 0; di < opt->delay_count; ++di) {
    for (uint32_t wi = 0; wi < opt->wave_count; ++wi) {
      for (uint32_t bi = 0; bi < opt->buffer_count; ++bi) {
        result_t* pair[MODE_COUNT];
        new_result_pair(opt, KIND_THROUGHPUT, opt->delays[di], opt->waves[wi], opt->buffers[bi], 0,
                        pair);
        measure_pair(opt, pair);
        for (int m = 0; m < MODE_COUNT; ++m) {
          if (pair[m] == NULL) continue;
          failures += pair[m]->failed ? 1 : 0;
          print_result_line(pair[m]);
        }
      }
    }
  }
  if (opt->isolation) {
    for (int kind = KIND_ISOLATION_REF; kind <= KIND_ISOLATION_SLOW; ++kind) {
      result_t* pair[MODE_COUNT];
      new_result_pair(opt, kind, 20, ISOLATION_NORMAL_WAVES, ISOLATION_BUFFERS, 0, pair);
      measure_pair(opt, pair);
      for (int m = 0; m < MODE_COUNT; ++m) {
        if (pair[m] == NULL) continue;
        failures += pair[m]->failed ? 1 : 0;
        print_result_line(pair[m]);
      }
    }
  }
  return failures;
}
