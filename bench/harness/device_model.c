/* hostcall_bench: the device model (the main figures). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int g_harness = HARNESS_FAITHFUL;

/* The faithful harness is the software runtime's ROCr model and waves that
 * ring as a GPU's do (hsa_sim_signal_add_from_device, through the device
 * simulator); the legacy one is the runtime's earlier model, under which a
 * ring also notifies like a host write (bench/README.md). */
void apply_harness(int harness) {
  g_harness = harness;
  hsa_sim_set_wait_model(harness == HARNESS_LEGACY ? HSA_SIM_WAIT_LEGACY : HSA_SIM_WAIT_ROCR);
}


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


uint32_t g_device_warmup_ms = 50;

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
      waves[w].lanes[lane][0] =
          (uint64_t)(uintptr_t)(r->kind == KIND_HEAVY ? &heavy_function : &bench_function);
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
  add_buffer_counters(r->buffers, &r->counters);
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
    r->round_lpct[i] = 100.0 * (double)listener_cpu_delta(&before, &after) / (double)window;
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
  r->listener_cpu_pct = median_of(r->round_lpct, r->rounds);
  r->other_load_cores = (double)r->acc_other_ns / (double)r->acc_window_ns;
}

/* `rounds` alternating rounds (baseline, ours, baseline, ours, ...); with
 * `wakeups`, each round ends with one round of each bare wake-up yardstick
 * at the same pace, so that both see the same stretch of the host. */
static void measure_device_pair(uint32_t rounds, uint32_t duration_ms, result_t* pair[MODE_COUNT],
                                wakeup_t* wakeups, uint32_t pace_us) {
  for (uint32_t round = 0; round < rounds; ++round) {
    for (int m = 0; m < MODE_COUNT; ++m) {
      if (pair[m] == NULL || pair[m]->failed) continue;
      if (!run_device_round(pair[m], duration_ms)) pair[m]->failed = true;
    }
    for (int k = 0; wakeups != NULL && k < WAKE_KINDS; ++k) {
      if (!run_wakeup_round(k, pace_us, duration_ms, &wakeups[k])) {
        fprintf(stderr, "hostcall_bench: wake-up yardstick %s failed\n", kWakeName[k]);
      }
    }
  }
  if (wakeups != NULL) finish_wakeups(wakeups, "paced");
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (pair[m] != NULL) finish_device_result(pair[m]);
  }
}


/* One configuration of the device model in every listener, measured and
 * reported. */
static int device_config(const options_t* opt, int kind, uint32_t w, uint32_t b, uint32_t pace,
                         const bool* modes) {
  options_t sub = *opt;
  if (modes != NULL) memcpy(sub.modes, modes, sizeof(sub.modes));
  result_t* pair[MODE_COUNT];
  new_result_pair(&sub, kind, 20, w, b, pace, pair);
  /* Paced 1000 us at one wave: the yardstick of the paced 1 ms target. */
  wakeup_t* wakeups = kind == KIND_PACED && pace == 1000 && w == 1 && g_harness == HARNESS_FAITHFUL
                          ? g_paced_wakeup
                          : NULL;
  measure_device_pair(opt->rounds, kind == KIND_PACED ? opt->paced_ms : opt->device_ms, pair, wakeups,
                      pace);
  int failures = 0;
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (pair[m] == NULL) continue;
    failures += pair[m]->failed ? 1 : 0;
    print_result_line(pair[m]);
  }
  return failures;
}

/* Back to back: every W on one buffer, then W = 16 over 8 buffers; or
 * (paced) every pace at every paced W. */
int run_device_section(const options_t* opt, bool paced) {
  int failures = 0;
  g_pin_listener = g_device_pin;
  if (!paced) {
    for (uint32_t i = 0; i < opt->device_wave_count; ++i) {
      failures += device_config(opt, KIND_DEVICE, opt->device_waves[i], 1, 0, NULL);
    }
    failures += device_config(opt, KIND_DEVICE, 16, 8, 0, NULL);
    return failures;
  }
  for (uint32_t p = 0; p < opt->pace_count; ++p) {
    for (uint32_t j = 0; j < opt->paced_wave_count; ++j) {
      failures += device_config(opt, KIND_PACED, opt->paced_waves[j], 1, opt->paces[p], NULL);
    }
  }
  return failures;
}

/* One buffer, 64 waves, every packet HEAVY_PACKET_NS of host work (a
 * full-warp printf): a listener that hands its only buffer to a helper
 * doubles its CPU for nothing. */
int run_heavy_section(const options_t* opt) {
  g_pin_listener = g_device_pin;
  return device_config(opt, KIND_HEAVY, 64, 1, 0, NULL);
}

/* The earlier, kinder harness (HARNESS_LEGACY) on the configurations where
 * the two harnesses were seen to disagree, for ours, the 2019-20 strategy
 * and 2026 classic; the faithful figures are the device sections'. */
int run_harness_section(const options_t* opt) {
  bool modes[MODE_COUNT] = {false};
  modes[MODE_BASELINE] = opt->modes[MODE_BASELINE];
  modes[MODE_OURS] = opt->modes[MODE_OURS];
  modes[MODE_C2026] = opt->modes[MODE_C2026];
  static const uint32_t kWaves[] = {1, 4, 16, 64};
  int failures = 0;
  g_pin_listener = g_device_pin;
  apply_harness(HARNESS_LEGACY);
  for (size_t i = 0; i < sizeof(kWaves) / sizeof(kWaves[0]); ++i) {
    failures += device_config(opt, KIND_DEVICE, kWaves[i], 1, 0, modes);
  }
  failures += device_config(opt, KIND_PACED, 16, 1, 200, modes);
  failures += device_config(opt, KIND_PACED, 1, 1, 1000, modes);
  apply_harness(HARNESS_FAITHFUL);
  return failures;
}
