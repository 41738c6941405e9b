/* Robustness where upstream fails: malformed packets crafted directly in the
 * buffer (index outside the buffer, unknown service, activemask 0), lost and
 * coalesced doorbell rings. Cases that must observe the library's log run in
 * a fresh child process with AMD_LOG_LEVEL set and stderr captured. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "amdgpu_dropin_hostcall_constants.h"
#include "device_sim.h"
#include "hc_test.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

/* Warnings and errors: what a user turning logging on sees. */
#define LOG_ENV "AMD_LOG_LEVEL=2"

static void fill_fc(uint64_t lanes[64][8], uint64_t salt) {
  for (uint32_t lane = 0; lane < 64; ++lane) {
    lanes[lane][0] = (uint64_t)(uintptr_t)&device_sim_fc_hash;
    for (uint32_t w = 1; w < 8; ++w) lanes[lane][w] = salt * 977 + lane * 8 + w;
  }
}

static int check_fc(const uint64_t in[64][8], const uint64_t out[64][8], uint64_t mask) {
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (!(mask & (1ull << lane))) continue;
    uint64_t expected[2];
    device_sim_fc_expected(&in[lane][1], expected);
    if (out[lane][0] != expected[0] || out[lane][1] != expected[1]) return 1;
  }
  return 0;
}

static int run_waves(void* buffer, uint32_t waves, uint32_t calls, uint64_t seed, char* why,
                     size_t why_size) {
  device_sim_waves_result_t result;
  int rc = hc_run_waves(buffer, waves, calls, seed, HC_CALL_TIMEOUT_NS, &result);
  snprintf(why, why_size, "%s", result.first_failure);
  return rc;
}

/* ---- index outside the buffer ------------------------------------------- */

/* For each n that is not a power of two, a buffer that ends right before a
 * PROT_NONE guard region large enough to cover every index up to the mask:
 * a tagged pointer naming an index >= n is pushed onto the ready stack and
 * the doorbell rung. The host must drop it without reading or writing
 * outside the buffer (the guard faults) or writing inside it (byte compare),
 * and keep serving valid packets, including one pushed on top of the bad
 * one. Runs in a child so a fault is reported, and the log is checked. */
static int child_out_of_range(void) {
  int failures = 0;
  hc_hsa_init();
  static const uint32_t counts[] = {3, 5, 6, 100};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
    uint32_t n = counts[c];
    uint64_t mask = device_sim_expected_index_mask(n);
    size_t size = getHostcallBufferSize(n);
    hc_guarded_t g;
    DROPIN_CHECK_INTO(failures, hc_guarded_alloc(&g, size, (size_t)(mask + 2) * 4096 + 4096), "guarded alloc");
    if (failures) return 1;
    DROPIN_CHECK_INTO(failures, enableHostcalls(g.buffer, n, NULL), "enable n=%u", n);
    if (failures) return 1;
    /* Word-by-word atomic snapshots (hc_snapshot_words): the listener
     * swaps the ready stack concurrently. getHostcallBufferSize is a
     * multiple of 8. */
    unsigned char* snapshot = malloc(size);
    unsigned char* now = malloc(size);
    const uint64_t bads[3] = {n, (n + mask) / 2, mask};
    for (int b = 0; b < 3; ++b) {
      uint64_t bad = bads[b];
      if (b > 0 && bad == bads[b - 1]) continue;
      for (uint64_t tag = 0; tag < 3; ++tag) {
        uint64_t ptr = bad + tag * (mask + 1);
        /* Alone on the stack (nothing else ready), header left untouched. */
        hc_snapshot_words(g.buffer, snapshot, size);
        DROPIN_CHECK_INTO(failures, device_sim_push_ready_raw_if_empty(g.buffer, ptr), "ready stack busy");
        device_sim_ring_doorbell(g.buffer);
        DROPIN_CHECK_INTO(failures, device_sim_wait_ready_stack_empty(g.buffer, HC_CALL_TIMEOUT_NS) == 0,
                    "n=%u: bad pointer %llu never taken off the ready stack", n,
                    (unsigned long long)ptr);
        hc_sleep_ms(5);
        hc_snapshot_words(g.buffer, now, size);
        DROPIN_CHECK_INTO(failures, memcmp(snapshot, now, size) == 0,
                    "n=%u index %llu: the host wrote into the buffer", n, (unsigned long long)bad);
        DROPIN_CHECK_INTO(failures, hc_guarded_prefix_intact(&g), "memory before the buffer changed");
        char why[256];
        DROPIN_CHECK_INTO(failures, hc_call_ok(g.buffer, bad) == 0, "n=%u: call after bad index %llu", n,
                    (unsigned long long)bad);
        DROPIN_CHECK_INTO(failures, run_waves(g.buffer, 4, 25, bad * 7 + tag, why, sizeof(why)) == 0,
                    "n=%u waves after bad index: %s", n, why);
      }
    }
    /* A valid packet on top of a bad one: the valid one is served. */
    uint64_t lanes[64][8];
    uint64_t in[64][8];
    fill_fc(lanes, 4242);
    memcpy(in, lanes, sizeof(in));
    uint64_t good = 0;
    DROPIN_CHECK_INTO(failures, device_sim_pop_free(g.buffer, &good, HC_CALL_TIMEOUT_NS) == 0, "pop");
    device_sim_fill(g.buffer, good, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull,
                    (const uint64_t(*)[8])lanes);
    DROPIN_CHECK_INTO(failures, device_sim_push_ready_raw_if_empty(g.buffer, mask + (mask + 1) * 5), "push bad");
    device_sim_push_ready(g.buffer, good);
    device_sim_ring_doorbell(g.buffer);
    DROPIN_CHECK_INTO(failures, device_sim_wait_served(g.buffer, good, HC_CALL_TIMEOUT_NS) == 0,
                "n=%u: packet above a bad one not served", n);
    device_sim_read_results(g.buffer, good, ~0ull, lanes);
    DROPIN_CHECK_INTO(failures, check_fc((const uint64_t(*)[8])in, (const uint64_t(*)[8])lanes, ~0ull) == 0,
                "wrong result");
    device_sim_push_free(g.buffer, good);
    DROPIN_CHECK_INTO(failures, device_sim_wait_ready_stack_empty(g.buffer, HC_CALL_TIMEOUT_NS) == 0, "stack not drained");
    DROPIN_CHECK_INTO(failures, hc_call_ok(g.buffer, 1) == 0, "n=%u: call after the mixed stack", n);
    disableHostcalls(g.buffer, NULL);
    DROPIN_CHECK_INTO(failures, hc_guarded_prefix_intact(&g), "memory before the buffer changed");
    free(snapshot);
    free(now);
    hc_guarded_free(&g);
  }
  return failures ? 1 : 0;
}

static void test_index_outside_buffer(void) {
  static const char* const env[] = {LOG_ENV, NULL};
  hc_child_result_t r;
  HC_CHILD_OK("out_of_range", env, HC_CHILD_TIMEOUT_MS, &r);
  /* Dropped packets are logged (at least one line from the library). */
  DROPIN_CHECK_MSG(hc_contains(r.err, "amdgpu-dropin"), "no log line for dropped packets; stderr: %s",
           r.err);
  DROPIN_CHECK_MSG(hc_count_lines_with_id(r.err, "amdgpu-dropin", 3) >= 1,
           "no log line naming the bad index 3; stderr: %s", r.err);
}

/* ---- unknown service ------------------------------------------------------ */

#define UNKNOWN_A 77u
#define UNKNOWN_B 0xFFFFFFFFu

static int child_unknown_service(void) {
  int failures = 0;
  hc_hsa_init();
  void* buffer = hc_alloc_buffer(4);
  DROPIN_CHECK_INTO(failures, enableHostcalls(buffer, 4, NULL), "enable");
  if (failures) return 1;
  static const struct {
    uint32_t service;
    uint64_t mask;
  } calls[] = {{UNKNOWN_A, ~0ull},       {UNKNOWN_A, 1ull << 17}, {UNKNOWN_B, 0xF0F0ull},
               {UNKNOWN_A, 0x8000000000000001ull}, {UNKNOWN_B, ~0ull},
               {0, ~0ull} /* id 0 is not a service either */};
  for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); ++i) {
    uint64_t lanes[64][8];
    for (uint32_t lane = 0; lane < 64; ++lane) {
      for (uint32_t w = 0; w < 8; ++w) lanes[lane][w] = 0x1111111111111111ull * w + lane;
    }
    int rc = device_sim_hostcall(buffer, calls[i].service, calls[i].mask, lanes, HC_CALL_TIMEOUT_NS);
    DROPIN_CHECK_INTO(failures, rc == 0, "service %u: wave not released (%s)", calls[i].service,
                device_sim_error_string(rc));
    for (uint32_t lane = 0; lane < 64 && rc == 0; ++lane) {
      if (calls[i].mask & (1ull << lane)) {
        DROPIN_CHECK_INTO(failures, lanes[lane][0] == UINT64_MAX, "service %u lane %u: slot0 = %llx",
                    calls[i].service, lane, (unsigned long long)lanes[lane][0]);
      } else {
        DROPIN_CHECK_INTO(failures, lanes[lane][0] == (uint64_t)lane, "inactive lane changed");
      }
    }
  }
  /* The buffer and the listener carry on. */
  DROPIN_CHECK_INTO(failures, hc_call_ok(buffer, 5) == 0, "FUNCTION_CALL after unknown services");
  char why[256];
  DROPIN_CHECK_INTO(failures, run_waves(buffer, 4, 50, 9, why, sizeof(why)) == 0, "waves: %s", why);
  hc_disable_and_free(buffer);
  return failures ? 1 : 0;
}

static void test_unknown_service(void) {
  static const char* const env[] = {LOG_ENV, NULL};
  hc_child_result_t r;
  HC_CHILD_OK("unknown_service", env, HC_CHILD_TIMEOUT_MS, &r);
  int a = hc_count_lines_with_id(r.err, "service", UNKNOWN_A);
  int b = hc_count_lines_with_id(r.err, "service", UNKNOWN_B);
  DROPIN_CHECK_MSG(a == 1, "service %u logged %d times (want once); stderr: %s", UNKNOWN_A, a, r.err);
  DROPIN_CHECK_MSG(b == 1, "service %u logged %d times (want once); stderr: %s", UNKNOWN_B, b, r.err);
  /* Off by default: without AMD_LOG_LEVEL the library prints nothing. */
  static const char* const quiet[] = {"AMD_LOG_LEVEL=0", NULL};
  HC_CHILD_OK("unknown_service", quiet, HC_CHILD_TIMEOUT_MS, &r);
  DROPIN_CHECK_MSG(!hc_contains(r.err, "amdgpu-dropin"), "logged with AMD_LOG_LEVEL=0: %s", r.err);
}

/* ---- activemask 0 ------------------------------------------------------- */

/* A packet with no active lane: READY is cleared, no slot is read or
 * written (slot[0] of every lane holds an address that must not be called),
 * and the buffer keeps working. */
static void test_activemask_zero(void) {
  void* buffer = hc_alloc_buffer(4);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 4, NULL), "enable");
  for (int round = 0; round < 3; ++round) {
    uint64_t ptr = 0;
    DROPIN_REQUIRE_MSG(device_sim_pop_free(buffer, &ptr, HC_CALL_TIMEOUT_NS) == 0, "pop");
    device_sim_payload_t* payload = device_sim_payload(buffer, ptr & device_sim_header(buffer)->index_mask);
    for (uint32_t lane = 0; lane < 64; ++lane) {
      for (uint32_t w = 0; w < 8; ++w) payload->slots[lane][w] = 0xBAD0000000000000ull | (lane << 8) | w;
    }
    device_sim_payload_t before = *payload;
    device_sim_fill(buffer, ptr, round == 2 ? 1234u : DEVICE_SIM_SERVICE_FUNCTION_CALL, 0, NULL);
    device_sim_push_ready(buffer, ptr);
    device_sim_ring_doorbell(buffer);
    DROPIN_CHECK_MSG(device_sim_wait_served(buffer, ptr, HC_CALL_TIMEOUT_NS) == 0, "round %d: not released", round);
    DROPIN_CHECK_MSG(memcmp(&before, payload, sizeof(before)) == 0, "round %d: payload changed", round);
    device_sim_push_free(buffer, ptr);
    DROPIN_CHECK_MSG(hc_call_ok(buffer, (uint64_t)round) == 0, "round %d: call after empty packet", round);
  }
  /* Through the one-call API too. */
  DROPIN_CHECK_MSG(device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, 0, NULL, HC_CALL_TIMEOUT_NS) == 0,
           "empty call");
  hc_disable_and_free(buffer);
}

/* ---- a cycle in the ready stack ------------------------------------------ */

static _Atomic uint64_t cycle_calls = 0;
/* Answers with its own address in out[0], so that a packet served a second
 * time (its answer taken for a request) calls it again instead of jumping to
 * an arbitrary answer word, and the count shows the double service. */
static void counting_host_function(uint64_t out[2], const uint64_t in[7]) {
  cycle_calls++;
  out[0] = (uint64_t)(uintptr_t)&counting_host_function;
  out[1] = in[0] + 1;
}

/* A packet whose `next` names itself (corrupt device memory): the host must
 * not loop forever, must answer the packet exactly once (an answered packet
 * holds answers, not a request: serving it again would call slot[0]'s answer
 * word as a host function), and must go on serving this and other buffers. */
static void test_ready_stack_cycle(void) {
  void* a = hc_alloc_buffer(4);
  void* b = hc_alloc_buffer(4);
  DROPIN_REQUIRE_MSG(enableHostcalls(a, 4, NULL) && enableHostcalls(b, 4, NULL), "enable");
  uint64_t ptr = 0;
  DROPIN_REQUIRE_MSG(device_sim_pop_free(a, &ptr, HC_CALL_TIMEOUT_NS) == 0, "pop");
  uint64_t lanes[64][8];
  memset(lanes, 0, sizeof(lanes));
  lanes[0][0] = (uint64_t)(uintptr_t)&counting_host_function;
  lanes[0][1] = 41;
  device_sim_fill(a, ptr, DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, (const uint64_t(*)[8])lanes);
  device_sim_packet_header_t* packet = device_sim_packet(a, ptr & device_sim_header(a)->index_mask);
  atomic_store_explicit(&packet->next, ptr, memory_order_relaxed);
  DROPIN_REQUIRE_MSG(device_sim_push_ready_raw_if_empty(a, ptr), "push");
  device_sim_ring_doorbell(a);
  DROPIN_CHECK_MSG(device_sim_wait_served(a, ptr, HC_CALL_TIMEOUT_NS) == 0, "cyclic packet never released");
  DROPIN_CHECK_MSG(device_sim_wait_ready_stack_empty(a, HC_CALL_TIMEOUT_NS) == 0, "ready stack not drained");
  DROPIN_CHECK_MSG(hc_call_ok(b, 1) == 0, "other buffer not served after the cycle");
  DROPIN_CHECK_MSG(hc_call_ok(a, 2) == 0, "the buffer itself not served after the cycle");
  DROPIN_CHECK_MSG(cycle_calls == 1, "the cyclic packet was served %llu times (want exactly once)",
           (unsigned long long)cycle_calls);
  /* The packet is not returned to the free stack: it stays the wave's. */
  disableHostcalls(a, NULL);
  disableHostcalls(b, NULL);
  hc_free_buffer(a);
  hc_free_buffer(b);
}

/* ---- lost and coalesced doorbells ------------------------------------------ */

/* Posts one packet (fill + ready push) without ringing; returns its pointer. */
static uint64_t post_silently(void* buffer, uint64_t lanes[64][8]) {
  uint64_t ptr = 0;
  if (device_sim_pop_free(buffer, &ptr, HC_CALL_TIMEOUT_NS) != 0) return 0;
  device_sim_fill(buffer, ptr, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull, (const uint64_t(*)[8])lanes);
  device_sim_push_ready(buffer, ptr);
  return ptr;
}

static void finish(void* buffer, uint64_t ptr, const uint64_t in[64][8], const char* what) {
  uint64_t t0 = device_sim_now_ns();
  int rc = device_sim_wait_served(buffer, ptr, HC_CALL_TIMEOUT_NS);
  uint64_t waited = device_sim_now_ns() - t0;
  DROPIN_CHECK_MSG(rc == 0, "%s: packet stranded (%s)", what, device_sim_error_string(rc));
  if (rc != 0) return;
  uint64_t out[64][8];
  memset(out, 0, sizeof(out));
  device_sim_read_results(buffer, ptr, ~0ull, out);
  DROPIN_CHECK_MSG(check_fc(in, (const uint64_t(*)[8])out, ~0ull) == 0, "%s: wrong result", what);
  device_sim_push_free(buffer, ptr);
  printf("  %s: served after %.1f ms\n", what, (double)waited / 1e6);
}

/* One call posted and never rung: served at the listener's next timeout. */
static void never_rung_call(void* buffer, uint64_t salt, const char* what) {
  uint64_t lanes[64][8];
  fill_fc(lanes, salt);
  uint64_t ptr = post_silently(buffer, lanes);
  DROPIN_REQUIRE_MSG(ptr != 0, "pop");
  finish(buffer, ptr, (const uint64_t(*)[8])lanes, what);
}

static void test_lost_doorbell(void) {
  /* Blocked waits see only signal operations, never plain memory writes. */
  hsa_sim_set_periodic_recheck(false, 0);
  void* buffer = hc_alloc_buffer(8);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 8, NULL), "enable");
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 1) == 0, "warm-up call");
  hc_sleep_ms(20); /* let the listener go back to its blocked wait */
  hsa_signal_t doorbell = {device_sim_header(buffer)->doorbell};

  /* 1. Never rung. */
  never_rung_call(buffer, 10, "never rung");

  /* 2. Rung by a plain memory write (as a GPU does), which wakes nobody. */
  hc_sleep_ms(20);
  uint64_t lanes[64][8];
  fill_fc(lanes, 11);
  uint64_t ptr = post_silently(buffer, lanes);
  int64_t* value = hsa_sim_signal_value_ptr(doorbell);
  DROPIN_REQUIRE_MSG(value != NULL, "doorbell value pointer");
  __atomic_add_fetch(value, 1, __ATOMIC_RELEASE);
  finish(buffer, ptr, (const uint64_t(*)[8])lanes, "rung without wake-up");

  /* 3. Coalesced: the ring wakes the listener but the value it sees is the
   * one it saw last (another wave's ring was folded into it). */
  hc_sleep_ms(20);
  fill_fc(lanes, 12);
  ptr = post_silently(buffer, lanes);
  hsa_signal_store_screlease(doorbell, hsa_signal_load_scacquire(doorbell));
  finish(buffer, ptr, (const uint64_t(*)[8])lanes, "coalesced ring (value unchanged)");

  /* 4. Two waves post, one ring. */
  hc_sleep_ms(20);
  uint64_t lanes2[64][8];
  fill_fc(lanes, 13);
  fill_fc(lanes2, 14);
  ptr = post_silently(buffer, lanes);
  uint64_t ptr2 = post_silently(buffer, lanes2);
  device_sim_ring_doorbell(buffer);
  finish(buffer, ptr, (const uint64_t(*)[8])lanes, "two posts, one ring (1st)");
  finish(buffer, ptr2, (const uint64_t(*)[8])lanes2, "two posts, one ring (2nd)");

  hc_disable_and_free(buffer);
  hsa_sim_set_periodic_recheck(true, 1000);
}

/* An idle listener's blocked waits grow (WAIT_TIMEOUT_MS, then
 * IDLE_WAIT_GROWTH times longer each, up to IDLE_WAIT_MAX_MS), so it wakes
 * rarely; a packet whose ring was lost during that idle time is still
 * served (at the next timeout), and a ring still wakes it at once. Checks
 * the timeouts the listener asks for and counts its HSA waits, not time. */
static void test_idle_waits_grow(void) {
  hsa_sim_set_periodic_recheck(false, 0);
  void* buffer = hc_alloc_buffer(8);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 8, NULL), "enable");
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 1) == 0, "warm-up call");
  /* Silence until the listener asks for its longest idle wait (the bound
   * is a hang detector: with a fixed timeout it never comes). The timeouts
   * it asked for on the way, as the runtime recorded them, must grow by
   * IDLE_WAIT_GROWTH at each step from WAIT_TIMEOUT_MS: a few waits, not one
   * per WAIT_TIMEOUT_MS (checked on the recorded timeouts, never on how many
   * waits fit into some stretch of time). */
  const uint64_t ms = 1000000ull;
  const uint64_t first = AMDGPU_DROPIN_HOSTCALL_WAIT_TIMEOUT_MS * ms;
  const uint64_t longest = AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS * ms;
  uint64_t since = hsa_sim_recent_wait_timeouts(0, NULL, 0);
  uint64_t timeouts[64];
  uint64_t n = 0;
  bool reached = false;
  for (int i = 0; i < 4000 && !reached; ++i) {
    hc_sleep_ms(5);
    n = hsa_sim_recent_wait_timeouts(since, timeouts, 64);
    for (uint64_t k = 0; k < n; ++k) reached |= timeouts[k] >= longest;
  }
  DROPIN_CHECK_MSG(reached, "the listener never asked for a wait of %u ms (%llu waits)",
           (unsigned)AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS, (unsigned long long)n);
  uint64_t idle_waits = 0, previous = 0;
  bool grew = true;
  for (uint64_t k = 0; k < n; ++k) {
    if (timeouts[k] < first) continue; /* the poll window's short waits */
    /* Each idle wait is the previous one times the growth, capped (ROCr's
     * whole milliseconds plus the library's slack: compared in whole ms).
     * The first idle wait may have begun before `since`. */
    uint64_t want = previous / ms * AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_GROWTH;
    if (want > AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS) want = AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS;
    if (timeouts[k] / ms == AMDGPU_DROPIN_HOSTCALL_WAIT_TIMEOUT_MS) {
      /* A wait that returned early (a late ring of the warm-up call seen
       * after `since` on a loaded machine) starts the growth over. */
      idle_waits = 0;
    } else if (previous != 0 && timeouts[k] / ms != want) {
      grew = false;
    }
    previous = timeouts[k];
    if (timeouts[k] >= longest) break;
    idle_waits++;
  }
  printf("  %llu idle waits before the longest one; timeouts (us):", (unsigned long long)idle_waits);
  for (uint64_t k = 0; k < n; ++k) printf(" %llu", (unsigned long long)(timeouts[k] / 1000u));
  printf("\n");
  DROPIN_CHECK_MSG(grew && idle_waits >= 1 && idle_waits <= 3,
           "idle waits did not grow %ux from %u ms to %u ms (%llu waits before the longest)",
           (unsigned)AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_GROWTH, (unsigned)AMDGPU_DROPIN_HOSTCALL_WAIT_TIMEOUT_MS,
           (unsigned)AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS, (unsigned long long)idle_waits);
  DROPIN_CHECK_MSG(AMDGPU_DROPIN_HOSTCALL_IDLE_WAIT_MAX_MS * 1000000ull < HC_CALL_TIMEOUT_NS,
           "the test's timeout must cover the longest idle wait");

  /* A lost ring after the long silence: served at the next timeout. */
  never_rung_call(buffer, 21, "never rung after a long idle time");
  /* A rung call after the silence is answered without waiting for a timeout:
   * the listener makes no further timed-out wait meanwhile. */
  hc_sleep_ms(1500);
  hsa_sim_reset_call_counts();
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 2) == 0, "rung call after a long idle time");
  DROPIN_CHECK_MSG(hsa_sim_call_count("hsa_signal_wait_scacquire") <= 2,
           "a rung call took %llu blocked waits",
           (unsigned long long)hsa_sim_call_count("hsa_signal_wait_scacquire"));
  hc_disable_and_free(buffer);
  hsa_sim_set_periodic_recheck(true, 1000);
}

/* ---- the buffer's counters ------------------------------------------------ */

static amdgpu_dropin_hostcall_status_t get_counters(void* buffer, amdgpu_dropin_hostcall_counters_t* c) {
  memset(c, 0xAB, sizeof(*c));
  c->size = (uint32_t)sizeof(*c);
  return amdgpu_dropin_hostcall_get_counters(buffer, c);
}

/* amdgpu_dropin_hostcall_get_counters: bad arguments are refused and leave
 * *out alone; the counts are what the listener did for this buffer: packets
 * and lanes per service, the lost ring it found, no hand-off; once disabled
 * the buffer has none. Counts only, no time. */
static void test_counters(void) {
  hsa_sim_set_periodic_recheck(false, 0);
  void* buffer = hc_alloc_buffer(8);
  amdgpu_dropin_hostcall_counters_t c;
  DROPIN_CHECK(get_counters(buffer, &c) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 8, NULL), "enable");
  DROPIN_CHECK(amdgpu_dropin_hostcall_get_counters(buffer, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(get_counters(NULL, &c) == AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  memset(&c, 0xAB, sizeof(c));
  c.size = 8; /* older or broken caller: too small */
  DROPIN_CHECK(amdgpu_dropin_hostcall_get_counters(buffer, &c) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK_MSG(c.lost_rings == 0xABABABABABABABABull, "a refused call wrote *out");
  /* A caller built with the version 4 header: its struct ends before
   * forecast_sleeps, and only that much is written. */
  memset(&c, 0xAB, sizeof(c));
  c.size = (uint32_t)offsetof(amdgpu_dropin_hostcall_counters_t, forecast_sleeps);
  DROPIN_CHECK(amdgpu_dropin_hostcall_get_counters(buffer, &c) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK_MSG(c.size == offsetof(amdgpu_dropin_hostcall_counters_t, forecast_sleeps) &&
                       c.lost_rings == 0 && c.forecast_sleeps == 0xABABABABABABABABull &&
                       c.watch_looks == 0xABABABABABABABABull,
                   "version 4 size: size %u, wrote past it", c.size);

  DROPIN_REQUIRE(get_counters(buffer, &c) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK(c.size == sizeof(c) && c.reserved == 0);
  for (uint32_t s = 0; s < AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES; ++s) {
    DROPIN_CHECK_MSG(c.packets[s] == 0 && c.lanes[s] == 0, "service slot %u counts before any call", s);
  }
  const uint64_t calls = 5;
  for (uint64_t i = 0; i < calls; ++i) DROPIN_CHECK(hc_call_ok(buffer, 100 + i) == 0);
  /* One lane only: the lanes count what was active. */
  uint64_t lanes[64][8];
  fill_fc(lanes, 7);
  DROPIN_CHECK(device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, 1ull << 9, lanes,
                                   HC_CALL_TIMEOUT_NS) == DEVICE_SIM_OK);
  DROPIN_REQUIRE(get_counters(buffer, &c) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK_MSG(c.packets[AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL] == calls + 1,
                   "FUNCTION_CALL packets %llu, want %llu",
                   (unsigned long long)c.packets[AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL],
                   (unsigned long long)(calls + 1));
  DROPIN_CHECK_MSG(c.lanes[AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL] == calls * 64 + 1,
                   "FUNCTION_CALL lanes %llu, want %llu",
                   (unsigned long long)c.lanes[AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL],
                   (unsigned long long)(calls * 64 + 1));
  DROPIN_CHECK(c.packets[AMDGPU_DROPIN_HOSTCALL_SERVICE_PRINTF] == 0);
  DROPIN_CHECK_MSG(c.lost_rings == 0, "%llu lost rings without one", (unsigned long long)c.lost_rings);
  DROPIN_CHECK(c.helper_handoffs == 0);
  DROPIN_CHECK_MSG(c.doorbell_rings >= 1, "no ring seen for %llu rung calls", (unsigned long long)calls);
  DROPIN_CHECK(c.wait_timeouts <= c.blocked_waits);

  /* A request that never rings: found without a ring, and counted so. */
  hc_sleep_ms(20);
  never_rung_call(buffer, 31, "never rung (counters)");
  DROPIN_REQUIRE(get_counters(buffer, &c) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK_MSG(c.lost_rings == 1, "lost rings %llu, want 1", (unsigned long long)c.lost_rings);
  /* The watch (every 15 ms) or a wait's timeout (100 ms and more) served it:
   * either way the watch has looked meanwhile. */
  DROPIN_CHECK_MSG(c.watch_looks >= 1, "no look of the lost-ring watch counted");
  DROPIN_CHECK(c.packets[AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL] == calls + 2);
  DROPIN_CHECK(c.helper_handoffs == 0);
  disableHostcalls(buffer, NULL);
  DROPIN_CHECK(get_counters(buffer, &c) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED);
  hc_free_buffer(buffer);
  hsa_sim_set_periodic_recheck(true, 1000);
}

/* ---- a steady pace is forecast --------------------------------------------- */

/* Calls one at a time, 2 ms apart (too far apart to poll through): once the
 * pace is steady the listener sleeps on a timer until shortly before each
 * call and polls for it, so a call costs no blocked doorbell wait. Without
 * the forecast every call costs at least one (the gap is past the poll
 * window), so no two calls in a row go without. A loaded host (other tests,
 * a sanitizer's slowdown) may keep the pace unsteady for a while, and the
 * listener then waits blocked, as it should: the claim is a run of
 * FORECAST_RUN calls in a row, within a bounded number of calls, each met
 * by a forecast sleep and by no blocked wait. A blocked wait is seen by
 * two counts: the runtime's own call count (taken when a wait begins) and
 * the library's `blocked_waits` (taken when one ends), so a wait that
 * begins before one call's counts are read and ends in the next call is
 * held against that next call too. The sleeps are the library's
 * `forecast_sleeps`. Counted, never timed. */
enum { FORECAST_RUN = 5, FORECAST_MAX_CALLS = 2000 };

static void test_steady_pace_is_forecast(void) {
  hsa_sim_set_periodic_recheck(false, 0);
  void* buffer = hc_alloc_buffer(8);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 8, NULL), "enable");
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 1) == 0, "warm-up call");
  uint32_t run = 0, calls = 0;
  uint64_t waits_total = 0, sleeps_total = 0;
  /* Each call's counts run from the end of the call before it. */
  amdgpu_dropin_hostcall_counters_t before, after;
  DROPIN_REQUIRE(get_counters(buffer, &before) == AMDGPU_DROPIN_HOSTCALL_OK);
  uint64_t waits_before = hsa_sim_call_count("hsa_signal_wait_scacquire");
  while (run < FORECAST_RUN && calls < FORECAST_MAX_CALLS) {
    hc_sleep_ms(2);
    DROPIN_REQUIRE_MSG(hc_call_ok(buffer, 1000 + calls) == 0, "paced call %u", calls);
    ++calls;
    uint64_t waits_after = hsa_sim_call_count("hsa_signal_wait_scacquire");
    DROPIN_REQUIRE(get_counters(buffer, &after) == AMDGPU_DROPIN_HOSTCALL_OK);
    uint64_t waits = waits_after - waits_before;
    uint64_t counted_waits = after.blocked_waits - before.blocked_waits;
    uint64_t sleeps = after.forecast_sleeps - before.forecast_sleeps;
    waits_total += waits;
    sleeps_total += sleeps;
    run = waits == 0 && counted_waits == 0 && sleeps >= 1 ? run + 1 : 0;
    before = after;
    waits_before = waits_after;
  }
  DROPIN_CHECK_MSG(run >= FORECAST_RUN,
                   "no %d calls in a row met by a forecast sleep and no blocked wait in %u calls 2 ms apart "
                   "(%llu waits, %llu forecast sleeps)",
                   FORECAST_RUN, calls, (unsigned long long)waits_total, (unsigned long long)sleeps_total);
  hc_disable_and_free(buffer);
  hsa_sim_set_periodic_recheck(true, 1000);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"out_of_range", child_out_of_range},
      {"unknown_service", child_unknown_service},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
  hc_hsa_init();
  HC_RUN(test_activemask_zero);
  HC_RUN(test_lost_doorbell);
  HC_RUN(test_idle_waits_grow);
  HC_RUN(test_counters);
  HC_RUN(test_steady_pace_is_forecast);
  HC_RUN(test_ready_stack_cycle);
  HC_RUN(test_index_outside_buffer);
  HC_RUN(test_unknown_service);
  return dropin_check_exit_code();
}
