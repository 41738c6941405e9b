/* hostcall_bench: lost rings.
 *
 * A request whose doorbell ring was lost: the wave posts (classic: push on
 * the ready stack; phase-bit: flip its phase) and does not ring. The figure
 * is how long it waits for an answer. "first": the first lost ring a fresh
 * listener meets, after an idle gap; "later": lost rings after that one,
 * each after a gap. A request not answered within the rescue time is
 * rescued by a ring (recorded as not served). Beside them, the listener's
 * idle CPU per 2 s before its first lost ring and after the later ones. */
#include <math.h>
#include <string.h>

#include "bench.h"

lost_t g_lost[MAX_LOST];
size_t g_lost_count;
double g_lost_idle_before_ms[MODE_COUNT];
double g_lost_idle_after_ms[MODE_COUNT];

static void lost_add(int mode, uint32_t gap_ms, bool first, bool served, double wait_ms, int counted) {
  if (g_lost_count >= MAX_LOST) return;
  g_lost[g_lost_count++] = (lost_t){mode, gap_ms, first, served, wait_ms, counted};
}

/* One request without a ring on g_buffers[0]; returns false on a protocol
 * failure. *counted: whether the library's lost-ring count went up (-1: no
 * counters). */
static bool lost_call(int mode, uint32_t rescue_ms, bool* served, double* wait_ms, int* counted) {
  void* buffer = g_buffers[0];
  bool phase = mode_is_phase(mode);
  static uint64_t lanes[64][8], out[64][8];
  for (uint32_t lane = 0; lane < 64; ++lane) {
    lanes[lane][0] = (uint64_t)(uintptr_t)&bench_function;
    lanes[lane][1] = lane * 3u + 1u;
    lanes[lane][2] = (uint64_t)lane * 0x9E3779B97F4A7C15ull;
  }
  lib_counters_t c0 = buffer0_counters();
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
      device_sim_phase_ring(buffer);
      if (device_sim_phase_wait_answered(buffer, index, CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return false;
    } else {
      device_sim_ring_doorbell(buffer);
      if (device_sim_wait_served(buffer, ptr, CALL_TIMEOUT_NS) != DEVICE_SIM_OK) return false;
    }
  }
  lib_counters_t c1 = buffer0_counters();
  *counted = c0.have && c1.have ? (int)(c1.lost_rings - c0.lost_rings) : -1;
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

/* The listener's CPU per 2 s over idle_ms of silence from now. */
static double idle_per_2s(uint32_t idle_ms) {
  thread_set_t before, after;
  listener_threads(&before);
  uint64_t t0 = device_sim_now_ns();
  sleep_ms(idle_ms);
  uint64_t t1 = device_sim_now_ns();
  listener_threads(&after);
  return (double)listener_cpu_delta(&before, &after) / 1e6 * 2e9 / (double)(t1 - t0);
}

static bool rung_call(void) {
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  lanes[0][0] = (uint64_t)(uintptr_t)&bench_function;
  return device_sim_hostcall(g_buffers[0], DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, lanes,
                             CALL_TIMEOUT_NS) == DEVICE_SIM_OK;
}

/* A fresh listener of `mode` on one buffer: one rung call, `first_gap_ms`
 * of silence, a lost ring. With `idle_ms` > 0 the silence starts with
 * idle_ms of measured idle CPU ("before"), and the first lost ring is
 * followed by one after each gap of `gaps` and idle_ms more of measured
 * silence ("after"). */
static bool run_lost_rings(int mode, uint32_t first_gap_ms, const uint32_t* gaps,
                           uint32_t gap_count, uint32_t rescue_ms, uint32_t idle_ms) {
  hsa_sim_set_wait_wake_delay_us(20);
  hsa_sim_set_periodic_recheck(false, 1000);
  g_pin_listener = g_device_pin;
  if (!enable_buffers(mode, 1)) return false;
  bool ok = rung_call();
  bool served = false;
  double wait_ms = NAN;
  int counted = -1;
  uint32_t gap = first_gap_ms;
  if (ok) {
    if (idle_ms > 0) {
      sleep_ms(200);
      g_lost_idle_before_ms[mode] = idle_per_2s(idle_ms);
      gap = 200 + idle_ms;
    } else {
      sleep_ms(first_gap_ms);
    }
    ok = lost_call(mode, rescue_ms, &served, &wait_ms, &counted);
    if (ok) lost_add(mode, gap, true, served, wait_ms, counted);
  }
  if (ok && idle_ms > 0) {
    for (uint32_t i = 0; i < gap_count && ok; ++i) {
      sleep_ms(gaps[i]);
      bool s2 = false;
      double w2 = NAN;
      int c2 = -1;
      ok = lost_call(mode, rescue_ms, &s2, &w2, &c2);
      if (ok) lost_add(mode, gaps[i], false, s2, w2, c2);
    }
    if (ok) {
      sleep_ms(50);
      g_lost_idle_after_ms[mode] = idle_per_2s(idle_ms);
    }
  }
  disable_buffers(1);
  if (!ok) fprintf(stderr, "hostcall_bench: lost-ring run of %s failed\n", kModeName[mode]);
  return ok;
}

int run_lost_ring_section(const options_t* opt) {
  int failures = 0;
  g_pin_listener = g_device_pin;
  for (int m = 0; m < MODE_COUNT; ++m) {
    g_lost_idle_before_ms[m] = g_lost_idle_after_ms[m] = NAN;
    if (!opt->modes[m]) continue;
    size_t start = g_lost_count;
    /* The first lost ring after each gap, on a fresh listener each. */
    for (uint32_t i = 0; i < opt->lost_gap_count; ++i) {
      if (!run_lost_rings(m, opt->lost_gaps[i], NULL, 0, opt->lost_rescue_ms, 0)) {
        ++failures;
        break;
      }
    }
    /* Idle before, a first lost ring after it, later ones, idle after. */
    if (!run_lost_rings(m, 0, opt->lost_gaps, opt->lost_gap_count, opt->lost_rescue_ms,
                        opt->idle_ms)) {
      ++failures;
    }
    printf("lost rings     %-11s", kModeName[m]);
    for (size_t i = start; i < g_lost_count; ++i) {
      const lost_t* l = &g_lost[i];
      printf(" %s %ums:%s%.1f", l->first ? "first" : "later", l->gap_ms, l->served ? "" : ">",
             l->wait_ms);
    }
    printf("; idle per 2 s before %.2f ms, after %.2f ms\n", g_lost_idle_before_ms[m],
           g_lost_idle_after_ms[m]);
  }
  return failures;
}
