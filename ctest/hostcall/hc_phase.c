/* The phase-bit hostcall protocol as a C runtime uses it: sizes and layout
 * against the device simulator's independent description, enable arguments,
 * classic and phase-bit buffers served at once by one listener, malformed
 * phase states (phases flipped twice, a corrupted phase value, an occupancy
 * bit with no request, a packet past num_packets), a wave that never
 * returns, a slow service on a phase-bit buffer beside a classic one, and
 * fork. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim.h"
#include "device_sim_phase.h"
#include "hc_test.h"
#include "rochostcall.hpp"

#define PHASE AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT
#define CLASSIC AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC

_Static_assert(sizeof(amdgpu_dropin_hostcall_protocol_t) == 4, "protocol is 32-bit");
_Static_assert(AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC == 0, "classic value");
_Static_assert(AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT == 1, "phase-bit value");

/* A phase-bit buffer and its bitmap, enabled. */
typedef struct phase_buffer {
  void* buffer;
  uint32_t* bitmap;
  uint32_t packets;
} phase_buffer_t;

static bool phase_open(phase_buffer_t* p, uint32_t packets) {
  p->packets = packets;
  size_t size = amdgpu_dropin_hostcall_buffer_size(PHASE, packets);
  p->buffer = NULL;
  if (posix_memalign(&p->buffer, 4096, size) != 0) return false;
  memset(p->buffer, 0xA5, size); /* enable must initialize what it needs */
  p->bitmap = calloc(1, amdgpu_dropin_hostcall_occupancy_size(packets) + 4);
  if (p->bitmap == NULL || !device_sim_phase_attach(p->buffer)) return false;
  return amdgpu_dropin_hostcall_enable(p->buffer, packets, NULL, PHASE, p->bitmap) ==
         AMDGPU_DROPIN_HOSTCALL_OK;
}

static void phase_close(phase_buffer_t* p) {
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_disable(p->buffer, NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "disable");
  device_sim_phase_detach(p->buffer);
  free(p->bitmap);
  free(p->buffer);
}

/* ---- sizes and layout -------------------------------------------------------- */

static void test_layout_matches_the_simulator(void) {
  const uint32_t counts[] = {0, 1, 2, 3, 5, 31, 32, 33, 64, 100, 1000, 65536};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i) {
    uint32_t n = counts[i];
    DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_buffer_size(PHASE, n) == device_sim_phase_buffer_size(n), "n=%u", n);
    DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_buffer_size(CLASSIC, n) == getHostcallBufferSize(n), "n=%u", n);
    DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_occupancy_size(n) == device_sim_phase_occupancy_size(n), "n=%u", n);
  }
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_buffer_size(2, 8) == 0, "unknown protocol");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_buffer_alignment(PHASE) == DEVICE_SIM_PAYLOAD_ALIGNMENT, "alignment");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_buffer_alignment(CLASSIC) == getHostcallBufferAlignment(), "alignment");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_buffer_alignment(9) == 0, "unknown protocol");

  phase_buffer_t p;
  DROPIN_REQUIRE_MSG(phase_open(&p, 5), "enable");
  uintptr_t base = (uintptr_t)p.buffer;
  device_sim_phase_prefix_t* prefix = device_sim_phase_prefix(p.buffer);
  DROPIN_CHECK_MSG(prefix->device_phase == base + 56, "device_phase");
  DROPIN_CHECK_MSG(prefix->host_phase == base + device_sim_phase_host_phase_offset(5), "host_phase");
  DROPIN_CHECK_MSG(prefix->occupied == (uintptr_t)p.bitmap, "occupied");
  DROPIN_CHECK_MSG(prefix->headers == base + device_sim_phase_headers_offset(5), "headers");
  DROPIN_CHECK_MSG(prefix->payloads == base + device_sim_phase_payloads_offset(5), "payloads");
  DROPIN_CHECK_MSG(prefix->doorbell != 0, "doorbell");
  DROPIN_CHECK_MSG(prefix->num_packets == 5 && prefix->reserved == 0, "num_packets");
  for (uint32_t i = 0; i < 5; ++i) {
    DROPIN_CHECK_MSG(*device_sim_phase_device(p.buffer, i) == 0 && *device_sim_phase_host(p.buffer, i) == 0,
             "phases of %u start equal at 0", i);
  }
  DROPIN_CHECK_MSG(p.bitmap[0] == 0, "the bitmap is the caller's, untouched");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(p.buffer, ~0ull, 1, HC_WAVES_TIMEOUT_NS) == 0, "a call");
  phase_close(&p);
}

static void test_enable_arguments(void) {
  size_t size = amdgpu_dropin_hostcall_buffer_size(PHASE, 4);
  uint64_t* buffer = aligned_alloc(4096, (size + 4095) & ~(size_t)4095);
  uint32_t bitmap[2] = {0, 0};
  DROPIN_REQUIRE_MSG(buffer != NULL, "alloc");
  const amdgpu_dropin_hostcall_status_t invalid = AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT;
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, PHASE, NULL) == invalid, "no bitmap");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, PHASE, (uint32_t*)((char*)bitmap + 2)) == invalid,
           "misaligned bitmap");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, CLASSIC, bitmap) == invalid, "classic + bitmap");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, PHASE, (uint32_t*)(buffer + 40)) == invalid,
           "bitmap inside the buffer");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, 7, bitmap) == invalid, "unknown protocol");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 0, NULL, PHASE, bitmap) == invalid, "0 packets");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(NULL, 4, NULL, PHASE, bitmap) == invalid, "NULL buffer");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable((char*)buffer + 4, 4, NULL, PHASE, bitmap) == invalid,
           "misaligned buffer");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 1, NULL, CLASSIC, NULL) == invalid, "classic needs 2");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_disable(buffer, NULL) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED,
           "not enabled");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_disable(NULL, NULL) == invalid, "NULL");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, PHASE, bitmap) == AMDGPU_DROPIN_HOSTCALL_OK,
             "enable");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, PHASE, bitmap) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_ENABLED, "twice");
  DROPIN_CHECK_MSG(!enableHostcalls(buffer, 4, NULL), "classic over an enabled phase-bit buffer");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_enable((char*)buffer + 64, 2, NULL, CLASSIC, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_ENABLED, "overlap");
  /* One packet is enough for phase-bit. */
  phase_buffer_t one;
  DROPIN_REQUIRE_MSG(phase_open(&one, 1), "enable 1 packet");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(one.buffer, 0x5, 2, HC_WAVES_TIMEOUT_NS) == 0, "a call on 1 packet");
  phase_close(&one);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_disable(buffer, NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "disable");
  /* disableHostcalls disables either protocol. */
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_enable(buffer, 4, NULL, PHASE, bitmap) == AMDGPU_DROPIN_HOSTCALL_OK,
             "re-enable");
  disableHostcalls(buffer, NULL);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_disable(buffer, NULL) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED,
           "disabled by disableHostcalls");
  free(buffer);
}

/* ---- both protocols at once ---------------------------------------------------- */

static void test_classic_and_phase_bit_at_once(void) {
  phase_buffer_t p[2];
  DROPIN_REQUIRE_MSG(phase_open(&p[0], 6) && phase_open(&p[1], 33), "enable phase-bit");
  void* classic[2] = {hc_alloc_buffer(6), hc_alloc_buffer(9)};
  DROPIN_REQUIRE_MSG(classic[0] && classic[1] && enableHostcalls(classic[0], 6, NULL) &&
                 enableHostcalls(classic[1], 9, NULL), "enable classic");
  void* buffers[4] = {p[0].buffer, classic[0], p[1].buffer, classic[1]};
  device_sim_waves_config_t config = device_sim_waves_config(buffers, 4, 16, 150, 0x5eed, HC_WAVES_TIMEOUT_NS);
  config.check_inactive_lanes = true;
  device_sim_waves_result_t result;
  int rc = device_sim_run_waves(&config, &result);
  DROPIN_CHECK_MSG(rc == 0, "%s", result.first_failure);
  DROPIN_CHECK_MSG(result.calls == 16 * 150, "calls %llu", (unsigned long long)result.calls);
  DROPIN_CHECK_MSG(result.inactive_lane_writes == 0, "inactive lanes written");
  for (int i = 0; i < 2; ++i) {
    for (uint32_t k = 0; k < p[i].packets; ++k) {
      DROPIN_CHECK_MSG(*device_sim_phase_device(p[i].buffer, k) == *device_sim_phase_host(p[i].buffer, k),
               "buffer %d packet %u left pending", i, k);
    }
    DROPIN_CHECK_MSG(p[i].bitmap[0] == 0, "every bit released");
  }
  DROPIN_CHECK_MSG(device_sim_phase_rings() > 0, "waves rang the doorbell");
  printf("  rings %llu, throttled %llu\n", (unsigned long long)device_sim_phase_rings(),
         (unsigned long long)device_sim_phase_throttled());
  disableHostcalls(classic[0], NULL);
  disableHostcalls(classic[1], NULL);
  hc_free_buffer(classic[0]);
  hc_free_buffer(classic[1]);
  phase_close(&p[0]);
  phase_close(&p[1]);
}

/* ---- malformed phase states ------------------------------------------------------ */

static _Atomic uint32_t g_counted_calls;

static void counted_call(uint64_t out[2], const uint64_t in[7]) {
  atomic_fetch_add(&g_counted_calls, 1);
  out[0] = in[0] + 1;
  out[1] = 0x600d;
}

static void fill_counted(uint64_t lanes[64][8], uint64_t value) {
  memset(lanes, 0, 64 * 8 * sizeof(uint64_t));
  lanes[0][0] = (uint64_t)(uintptr_t)&counted_call;
  lanes[0][1] = value;
}

/* Steps 1-2: claims a packet and writes a FUNCTION_CALL of counted_call
 * from lane 0 into it (not yet published). */
static bool claim_counted(void* buffer, uint64_t value, uint32_t* index) {
  uint64_t lanes[64][8];
  if (device_sim_phase_claim(buffer, index, HC_WAVES_TIMEOUT_NS) != 0) return false;
  fill_counted(lanes, value);
  device_sim_phase_fill(buffer, *index, DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, (const uint64_t(*)[8])lanes);
  return true;
}

static void test_phases_flipped_twice(void) {
  phase_buffer_t p;
  DROPIN_REQUIRE_MSG(phase_open(&p, 3), "enable");
  uint64_t lanes[64][8];
  /* The device flips its phase twice before the host looked: no request. */
  uint32_t index = 99;
  atomic_store(&g_counted_calls, 0);
  DROPIN_REQUIRE_MSG(claim_counted(p.buffer, 41, &index), "claim");
  device_sim_phase_flip(p.buffer, index);
  device_sim_phase_flip(p.buffer, index);
  device_sim_phase_ring_throttled(p.buffer);
  /* If the host looked between the flips it served the first state and then
   * the second (each published state once); otherwise it saw no request.
   * Either way the phases end equal, and nothing is served a third time. */
  DROPIN_CHECK_MSG(device_sim_phase_wait_answered(p.buffer, index, HC_WAVES_TIMEOUT_NS) == 0, "settled");
  hc_sleep_ms(30);
  uint32_t served_between = atomic_load(&g_counted_calls);
  DROPIN_CHECK_MSG(served_between == 0 || served_between == 2, "served %u times", served_between);
  DROPIN_CHECK_MSG(*device_sim_phase_device(p.buffer, index) == *device_sim_phase_host(p.buffer, index),
           "phases settled");
  device_sim_phase_clear_bit(p.buffer, index);
  /* Both phases flip twice through two full round trips on that packet. */
  for (uint64_t v = 0; v < 2; ++v) {
    fill_counted(lanes, 100 + v);
    DROPIN_CHECK_MSG(device_sim_phase_hostcall(p.buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, 1, lanes, HC_WAVES_TIMEOUT_NS) == 0,
             "round trip %llu", (unsigned long long)v);
    DROPIN_CHECK_MSG(lanes[0][0] == 101 + v && lanes[0][1] == 0x600d, "answer %llu", (unsigned long long)lanes[0][0]);
  }
  DROPIN_CHECK_MSG(atomic_load(&g_counted_calls) == served_between + 2, "each request served once");

  /* A device phase corrupted to 2: served once and settled (host phase := 2),
   * not served again on every scan. */
  DROPIN_REQUIRE_MSG(claim_counted(p.buffer, 7, &index), "claim");
  uint32_t before = atomic_load(&g_counted_calls);
  atomic_store_explicit(device_sim_phase_device(p.buffer, index), 2, memory_order_release);
  device_sim_phase_ring_throttled(p.buffer);
  DROPIN_CHECK_MSG(device_sim_phase_wait_answered(p.buffer, index, HC_WAVES_TIMEOUT_NS) == 0, "answered");
  hc_sleep_ms(20);
  DROPIN_CHECK_MSG(atomic_load(&g_counted_calls) == before + 1, "served exactly once: %u",
           atomic_load(&g_counted_calls) - before);
  DROPIN_CHECK_MSG(*device_sim_phase_host(p.buffer, index) == 2, "host phase settled to the device's");
  /* Back to a valid state for the next wave. */
  atomic_store(device_sim_phase_device(p.buffer, index), 0);
  atomic_store(device_sim_phase_host(p.buffer, index), 0);
  device_sim_phase_clear_bit(p.buffer, index);
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(p.buffer, ~0ull, 3, HC_WAVES_TIMEOUT_NS) == 0, "traffic goes on");
  phase_close(&p);
}

static void test_bit_without_a_request(void) {
  phase_buffer_t p;
  DROPIN_REQUIRE_MSG(phase_open(&p, 4), "enable");
  /* Bits 0-2 taken with no request behind them: waves use packet 3 only. */
  for (uint32_t i = 0; i < 3; ++i) device_sim_phase_set_bit(p.buffer, i);
  device_sim_waves_result_t result;
  DROPIN_CHECK_MSG(hc_run_waves(p.buffer, 3, 40, 77, HC_WAVES_TIMEOUT_NS, &result) == 0, "%s", result.first_failure);
  for (uint32_t i = 0; i < 3; ++i) {
    DROPIN_CHECK_MSG(*device_sim_phase_device(p.buffer, i) == 0 && *device_sim_phase_host(p.buffer, i) == 0,
             "packet %u never used", i);
  }
  DROPIN_CHECK_MSG(p.bitmap[0] == 0x7, "the stray bits are left to the device: %#x", p.bitmap[0]);
  phase_close(&p);
}

static void test_packet_beyond_num_packets(void) {
  const uint32_t n = 5;
  hc_guarded_t g;
  DROPIN_REQUIRE_MSG(hc_guarded_alloc(&g, amdgpu_dropin_hostcall_buffer_size(PHASE, n), 4096), "guarded alloc");
  uint32_t bitmap[1] = {0};
  DROPIN_REQUIRE_MSG(device_sim_phase_attach(g.buffer), "attach");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_enable(g.buffer, n, NULL, PHASE, bitmap) == AMDGPU_DROPIN_HOSTCALL_OK,
             "enable");
  /* A broken wave claims packet n (bit 5 exists in the word) and flips
   * device_phase[n], which is host_phase[0]; it writes no header or payload
   * (those would lie past the arrays). */
  device_sim_phase_set_bit(g.buffer, n);
  device_sim_phase_flip(g.buffer, n);
  device_sim_phase_ring_throttled(g.buffer);
  hc_sleep_ms(20);
  /* The host saw packet 0 pending (an empty active mask), served nothing and
   * settled it; nothing past the buffer was touched (the guard page). */
  DROPIN_CHECK_MSG(*device_sim_phase_device(g.buffer, 0) == *device_sim_phase_host(g.buffer, 0), "settled");
  device_sim_waves_result_t result;
  DROPIN_CHECK_MSG(hc_run_waves(g.buffer, 4, 50, 5, HC_WAVES_TIMEOUT_NS, &result) == 0, "%s", result.first_failure);
  DROPIN_CHECK_MSG(hc_guarded_prefix_intact(&g), "bytes before the buffer intact");
  disableHostcalls(g.buffer, NULL);
  device_sim_phase_detach(g.buffer);
  hc_guarded_free(&g);
}

/* ---- a wave that never returns ------------------------------------------------------ */

static void test_wave_that_never_returns(void) {
  phase_buffer_t p;
  DROPIN_REQUIRE_MSG(phase_open(&p, 4), "enable");
  uint32_t index = 0;
  atomic_store(&g_counted_calls, 0);
  DROPIN_REQUIRE_MSG(claim_counted(p.buffer, 1, &index), "claim");
  device_sim_phase_flip(p.buffer, index);
  device_sim_phase_ring_throttled(p.buffer);
  /* The wave never reads its answer nor clears its bit: its packet stays
   * taken, the other waves go on with the other three. */
  device_sim_waves_result_t result;
  DROPIN_CHECK_MSG(hc_run_waves(p.buffer, 6, 60, 11, HC_WAVES_TIMEOUT_NS, &result) == 0, "%s", result.first_failure);
  DROPIN_CHECK_MSG(atomic_load(&g_counted_calls) == 1, "its request was served once");
  DROPIN_CHECK_MSG(*device_sim_phase_device(p.buffer, index) == *device_sim_phase_host(p.buffer, index), "answered");
  DROPIN_CHECK_MSG(p.bitmap[0] == (1u << index), "its bit stays set: %#x", p.bitmap[0]);
  /* Disable does not wait for the wave: its bit stays set forever, so a
   * disable that waited for it would never return (the test would hang into
   * its ctest timeout); no figure to compare. */
  phase_close(&p);
}

/* ---- a slow phase-bit buffer beside a classic one ------------------------------------- */

#define SLOW_SERVICE 0x51u
#define SLOW_CALLS 12

static _Atomic bool g_slow_done;
static _Atomic int g_slow_calls;
static _Atomic bool g_slow_blocked;
static _Atomic bool g_slow_release;

/* Slow calls (25 ms each: slow visits, so the buffer moves to the helper
 * thread), then the last one blocks until the test releases it. */
static int32_t slow_lane(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  (void)user, (void)buffer, (void)service, (void)lane;
  if (atomic_fetch_add(&g_slow_calls, 1) + 1 < SLOW_CALLS) {
    hc_sleep_ms(25);
  } else {
    atomic_store(&g_slow_blocked, true);
    while (!atomic_load(&g_slow_release)) sched_yield();
  }
  slot[0] = 0x51;
  return 0;
}

static void* slow_wave(void* arg) {
  uint64_t lanes[64][8];
  intptr_t failures = 0;
  for (int i = 0; i < SLOW_CALLS; ++i) {
    memset(lanes, 0, sizeof(lanes));
    if (device_sim_hostcall(arg, SLOW_SERVICE, 1, lanes, HC_WAVES_TIMEOUT_NS) != 0 || lanes[0][0] != 0x51) failures++;
  }
  atomic_store(&g_slow_done, true);
  return (void*)failures;
}

static void test_slow_phase_bit_buffer_beside_a_classic_one(void) {
  phase_buffer_t slow;
  DROPIN_REQUIRE_MSG(phase_open(&slow, 4), "enable");
  void* fast = hc_alloc_buffer(8);
  DROPIN_REQUIRE_MSG(fast != NULL && enableHostcalls(fast, 8, NULL), "enable classic");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SLOW_SERVICE, slow.buffer, slow_lane, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register");
  pthread_t thread;
  atomic_store(&g_slow_done, false);
  atomic_store(&g_slow_calls, 0);
  atomic_store(&g_slow_blocked, false);
  atomic_store(&g_slow_release, false);
  DROPIN_REQUIRE_MSG(pthread_create(&thread, NULL, slow_wave, slow.buffer) == 0, "thread");
  /* The classic buffer's waves keep being served while the slow buffer's
   * last call is blocked in its handler: the slow buffer has moved to the
   * helper thread. Served on one thread, the classic calls would wait behind
   * the blocked call until their timeout (checked by events, not time). */
  uint64_t fast_calls = 0;
  while (!atomic_load(&g_slow_blocked)) {
    DROPIN_CHECK_MSG(device_sim_fc_checked_call(fast, 0xff, fast_calls, HC_WAVES_TIMEOUT_NS) == 0, "fast call");
    fast_calls++;
  }
  uint64_t while_blocked = 0;
  for (int i = 0; i < 20; ++i) {
    if (device_sim_fc_checked_call(fast, 0xff, fast_calls + (uint64_t)i, HC_WAVES_TIMEOUT_NS) != 0) break;
    while_blocked++;
  }
  DROPIN_CHECK_MSG(atomic_load(&g_slow_done) == false, "the slow call was still blocked");
  DROPIN_CHECK_MSG(while_blocked == 20, "the classic buffer starved behind the blocked slow call: %llu of 20 served",
           (unsigned long long)while_blocked);
  atomic_store(&g_slow_release, true);
  void* joined = NULL;
  pthread_join(thread, &joined);
  DROPIN_CHECK_MSG(joined == NULL, "slow calls failed: %ld", (long)(intptr_t)joined);
  printf("  %llu classic calls during %d slow phase-bit calls, 20 while one was blocked\n",
         (unsigned long long)fast_calls, SLOW_CALLS);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SLOW_SERVICE, slow.buffer) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister");
  hc_disable_and_free(fast);
  phase_close(&slow);
}

/* ---- fork and exit ---------------------------------------------------------------------- */

static void* g_parent_buffer;

static int child_after_fork(void) {
  /* The parent's buffer is not enabled here. */
  if (amdgpu_dropin_hostcall_disable(g_parent_buffer, NULL) != AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED) return 2;
  phase_buffer_t p;
  if (!phase_open(&p, 3)) return 3;
  if (device_sim_fc_checked_call(p.buffer, ~0ull, 9, HC_WAVES_TIMEOUT_NS) != 0) return 4;
  /* Exits with the buffer still enabled and a claimed, unanswered packet. */
  uint32_t index;
  if (device_sim_phase_claim(p.buffer, &index, HC_WAVES_TIMEOUT_NS) != 0) return 5;
  return 0;
}

static void test_fork_and_exit(void) {
  phase_buffer_t p;
  DROPIN_REQUIRE_MSG(phase_open(&p, 3), "enable");
  g_parent_buffer = p.buffer;
  hc_child_result_t r;
  DROPIN_REQUIRE_MSG(hc_fork_child(child_after_fork, 20000, &r), "fork");
  DROPIN_CHECK_MSG(r.exited && r.exit_code == 0, "child: %s", hc_child_describe(&r));
  printf("  child done after %llu ms\n", (unsigned long long)r.elapsed_ms); /* printed, not compared */
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(p.buffer, ~0ull, 10, HC_WAVES_TIMEOUT_NS) == 0, "parent still served");
  phase_close(&p);
}

int main(void) {
  hc_hsa_init();
  HC_RUN(test_layout_matches_the_simulator);
  HC_RUN(test_enable_arguments);
  HC_RUN(test_classic_and_phase_bit_at_once);
  HC_RUN(test_phases_flipped_twice);
  HC_RUN(test_bit_without_a_request);
  HC_RUN(test_packet_beyond_num_packets);
  HC_RUN(test_wave_that_never_returns);
  HC_RUN(test_slow_phase_bit_buffer_beside_a_classic_one);
  HC_RUN(test_fork_and_exit);
  return dropin_check_exit_code();
}
