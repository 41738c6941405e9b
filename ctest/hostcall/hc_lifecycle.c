/* Lifecycle: buffer size and alignment, initialization of the buffer,
 * listener start/stop, the one shared doorbell signal, bad arguments and
 * failing HSA calls. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "device_sim.h"
#include "hc_test.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

/* Size from the formula of docs/protocols.md#classic-layout (48-byte header rounded to 8, 24-byte packet
 * headers, payloads 8-aligned, 4096 bytes each), written out longhand here
 * and compared for many n, including the extremes. */
static void test_buffer_size_formula(void) {
  for (uint64_t n = 0; n <= 5000; ++n) {
    size_t expected = 48 + 24 * n;
    expected = (expected + 7) / 8 * 8;
    expected += 4096 * n;
    size_t got = getHostcallBufferSize((uint32_t)n);
    if (got != expected) {
      DROPIN_CHECK_MSG(got == expected, "n=%llu: size %zu, expected %zu", (unsigned long long)n, got,
               expected);
      break;
    }
    DROPIN_CHECK_MSG(device_sim_buffer_size((uint32_t)n) == expected, "device_sim formula n=%llu",
             (unsigned long long)n);
  }
  static const uint32_t big[] = {65535, 65536, 1u << 20, 0x7FFFFFFFu, 0xFFFFFFFEu, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); ++i) {
    size_t expected = 48 + 4120 * (size_t)big[i];
    DROPIN_CHECK_MSG(getHostcallBufferSize(big[i]) == expected, "n=%u: %zu vs %zu", big[i],
             getHostcallBufferSize(big[i]), expected);
  }
  DROPIN_CHECK_MSG(getHostcallBufferSize(0) == 48, "size(0)");
  DROPIN_CHECK_MSG(getHostcallBufferSize(1) == 48 + 24 + 4096, "size(1)");
  DROPIN_CHECK_MSG(getHostcallBufferSize(2) == 48 + 48 + 8192, "size(2)");
}

static void test_buffer_alignment(void) {
  DROPIN_CHECK_MSG(getHostcallBufferAlignment() == 8, "alignment %u", getHostcallBufferAlignment());
}

/* The buffer enable writes is exactly docs/protocols.md#initialization-and-publication: addresses of the arrays,
 * index mask, free stack n-1 → … → 1 → 0 (tag 1), empty ready stack, doorbell. */
static void test_initial_layout(void) {
  static const uint32_t counts[] = {2, 3, 4, 5, 7, 8, 9, 64, 100, 1000};
  uint64_t doorbell = 0;
  void* keep = hc_alloc_buffer(2); /* keeps the listener (and its doorbell) alive */
  DROPIN_REQUIRE_MSG(enableHostcalls(keep, 2, NULL), "enable keep");
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); ++c) {
    uint32_t n = counts[c];
    size_t size = getHostcallBufferSize(n);
    unsigned char* buffer = (unsigned char*)hc_alloc_buffer(n);
    DROPIN_REQUIRE_MSG(buffer != NULL, "alloc");
    memset(buffer, 0xEE, size); /* enable must initialize everything it relies on */
    DROPIN_REQUIRE_MSG(enableHostcalls(buffer, n, NULL), "enable n=%u", n);
    device_sim_buffer_header_t* h = device_sim_header(buffer);
    uint64_t mask = device_sim_expected_index_mask(n);
    DROPIN_CHECK_MSG(h->headers == (uint64_t)(uintptr_t)(buffer + 48), "n=%u headers", n);
    DROPIN_CHECK_MSG(h->payloads == (uint64_t)(uintptr_t)(buffer + device_sim_payloads_offset(n)),
             "n=%u payloads %llx", n, (unsigned long long)(h->payloads - (uintptr_t)buffer));
    DROPIN_CHECK_MSG(h->index_mask == mask, "n=%u index_mask %llu", n, (unsigned long long)h->index_mask);
    DROPIN_CHECK_MSG(h->free_stack == n - 1, "n=%u free_stack %llu", n, (unsigned long long)h->free_stack);
    DROPIN_CHECK_MSG(h->ready_stack == 0, "n=%u ready_stack", n);
    DROPIN_CHECK_MSG(h->doorbell != 0, "n=%u doorbell 0", n);
    if (doorbell == 0) doorbell = h->doorbell;
    DROPIN_CHECK_MSG(h->doorbell == doorbell, "n=%u: doorbell differs from the other buffers'", n);
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t expected = i == 0 ? 0 : i == 1 ? mask + 1 : i - 1;
      uint64_t got = device_sim_packet(buffer, i)->next;
      if (got != expected) {
        DROPIN_CHECK_MSG(got == expected, "n=%u packet %u next %llu expected %llu", n, i,
                 (unsigned long long)got, (unsigned long long)expected);
        break;
      }
    }
    /* And it works: as many waves as packets, each holding one packet. */
    device_sim_waves_result_t result;
    DROPIN_CHECK_MSG(hc_run_waves(buffer, n < 16 ? n : 16, 20, n, HC_CALL_TIMEOUT_NS, &result) == 0, "n=%u: %s", n,
                     result.first_failure);
    hc_disable_and_free(buffer);
  }
  hc_disable_and_free(keep);
}

/* The listener starts with the first enable and is stopped (thread joined,
 * doorbell signal destroyed) by the last disable; all of it again. */
static void test_enable_disable_enable(void) {
  int threads0 = hc_thread_count();
  uint64_t signals0 = hc_live_signals();
  for (int round = 0; round < 3; ++round) {
    void* buffer = hc_alloc_buffer(4);
    DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 4, NULL), "enable round %d", round);
    DROPIN_CHECK_MSG(hc_live_signals() == signals0 + 1, "round %d: %llu live signals, expected %llu",
             round, (unsigned long long)hc_live_signals(), (unsigned long long)signals0 + 1);
    DROPIN_CHECK_MSG(hc_call_ok(buffer, (uint64_t)round) == 0, "round %d: call", round);
    /* The listener and its lost-ring watch. */
    DROPIN_CHECK_MSG(hc_thread_count() == threads0 + 2, "round %d: %d threads while enabled, expected %d",
             round, hc_thread_count(), threads0 + 2);
    disableHostcalls(buffer, NULL);
    /* The last disable joins the listener before it returns. */
    DROPIN_CHECK_MSG(hc_thread_count() == threads0, "round %d: %d threads after the last disable, expected %d",
             round, hc_thread_count(), threads0);
    DROPIN_CHECK_MSG(hc_live_signals() == signals0, "round %d: doorbell not destroyed (%llu live)", round,
             (unsigned long long)hc_live_signals());
    hc_free_buffer(buffer);
  }
}

/* One doorbell for all buffers: 8 enables create one signal. */
static void test_one_doorbell_for_all_buffers(void) {
  enum { B = 8 };
  uint64_t signals0 = hc_live_signals();
  hsa_sim_reset_call_counts();
  void* buffers[B];
  for (int i = 0; i < B; ++i) {
    buffers[i] = hc_alloc_buffer(4);
    DROPIN_REQUIRE_MSG(enableHostcalls(buffers[i], 4, NULL), "enable %d", i);
  }
  DROPIN_CHECK_MSG(hsa_sim_call_count("hsa_signal_create") == 1, "%llu hsa_signal_create calls for %d buffers",
           (unsigned long long)hsa_sim_call_count("hsa_signal_create"), B);
  DROPIN_CHECK_MSG(hc_live_signals() == signals0 + 1, "%llu live signals",
           (unsigned long long)hc_live_signals());
  for (int i = 0; i < B; ++i) {
    DROPIN_CHECK_MSG(device_sim_header(buffers[i])->doorbell == device_sim_header(buffers[0])->doorbell,
             "buffer %d has its own doorbell", i);
    DROPIN_CHECK_MSG(hc_call_ok(buffers[i], (uint64_t)i) == 0, "call on buffer %d", i);
  }
  /* Disabling all but one keeps the shared signal; the last destroys it. */
  for (int i = 1; i < B; ++i) disableHostcalls(buffers[i], NULL);
  DROPIN_CHECK_MSG(hc_live_signals() == signals0 + 1, "signal destroyed before the last disable");
  DROPIN_CHECK_MSG(hc_call_ok(buffers[0], 99) == 0, "call on the remaining buffer");
  disableHostcalls(buffers[0], NULL);
  DROPIN_CHECK_MSG(hc_live_signals() == signals0, "signal not destroyed by the last disable");
  DROPIN_CHECK_MSG(hsa_sim_call_count("hsa_signal_destroy") == 1, "%llu hsa_signal_destroy calls",
           (unsigned long long)hsa_sim_call_count("hsa_signal_destroy"));
  for (int i = 0; i < B; ++i) hc_free_buffer(buffers[i]);
}

/* NULL and misaligned buffers and 0 packets: enable returns false and starts
 * nothing (no thread, no signal). */
static void test_bad_arguments(void) {
  int threads0 = hc_thread_count();
  uint64_t signals0 = hc_live_signals();
  hsa_sim_reset_call_counts();
  DROPIN_CHECK_MSG(!enableHostcalls(NULL, 4, NULL), "NULL buffer accepted");
  unsigned char* raw = (unsigned char*)hc_alloc_buffer(5);
  for (int offset = 1; offset < 8; ++offset) {
    DROPIN_CHECK_MSG(!enableHostcalls(raw + offset, 4, NULL), "buffer misaligned by %d accepted", offset);
  }
  DROPIN_CHECK_MSG(!enableHostcalls(raw, 0, NULL), "0 packets accepted");
  DROPIN_CHECK_MSG(hsa_sim_call_count("hsa_signal_create") == 0, "a rejected enable created a signal");
  DROPIN_CHECK_MSG(hc_thread_count() == threads0, "a rejected enable started a thread");
  DROPIN_CHECK_MSG(hc_live_signals() == signals0, "a rejected enable left a signal");
  /* The rejected calls registered nothing: disabling is a no-op. */
  disableHostcalls(raw + 1, NULL);
  disableHostcalls(NULL, NULL);
  /* 8-byte alignment (the reported alignment) is enough. */
  DROPIN_CHECK_MSG(enableHostcalls(raw + 8, 4, NULL), "8-aligned buffer refused");
  DROPIN_CHECK_MSG(hc_call_ok(raw + 8, 1) == 0, "8-aligned buffer not served");
  disableHostcalls(raw + 8, NULL);
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0, 2000) == threads0, "listener left running");
  hc_free_buffer(raw);
}

/* One packet: either refused (documented) or working; never a hang. */
static void test_one_packet(void) {
  int threads0 = hc_thread_count();
  void* buffer = hc_alloc_buffer(1);
  bool enabled = enableHostcalls(buffer, 1, NULL);
  printf("  enableHostcalls(n=1) -> %s\n", enabled ? "true" : "false");
  if (enabled) {
    for (int i = 0; i < 10; ++i) {
      int rc = hc_call_ok(buffer, (uint64_t)i);
      DROPIN_CHECK_MSG(rc == 0, "n=1 enabled but call %d failed: %d", i, rc);
      if (rc != 0) break;
    }
    disableHostcalls(buffer, NULL);
  } else {
    DROPIN_CHECK_MSG(hc_thread_count() == threads0, "refused enable started a thread");
    disableHostcalls(buffer, NULL);
  }
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0, 2000) == threads0, "listener left running");
  hc_free_buffer(buffer);
}

/* Enabling a buffer that is already enabled is refused and leaves the first
 * registration working (re-initializing it would corrupt packets in flight);
 * one disable unregisters it. */
static void test_enable_twice(void) {
  int threads0 = hc_thread_count();
  uint64_t signals0 = hc_live_signals();
  void* buffer = hc_alloc_buffer(4);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 4, NULL), "first enable");
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 1) == 0, "call after first enable");
  /* A wave holds a packet (popped, not yet posted) while enable is called
   * again: re-initializing the buffer would hand that packet out twice. */
  uint64_t held = 0;
  DROPIN_REQUIRE_MSG(device_sim_pop_free(buffer, &held, HC_CALL_TIMEOUT_NS) == 0, "pop");
  uint64_t free_top = device_sim_header(buffer)->free_stack;
  bool second = enableHostcalls(buffer, 4, NULL);
  DROPIN_CHECK_MSG(!second, "enabling an enabled buffer returned true");
  bool third = enableHostcalls(buffer, 8, NULL);
  DROPIN_CHECK_MSG(!third, "enabling an enabled buffer with another size returned true");
  DROPIN_CHECK_MSG(device_sim_header(buffer)->index_mask == 3, "second enable re-initialized the buffer");
  DROPIN_CHECK_MSG(device_sim_header(buffer)->free_stack == free_top,
           "second enable rewrote the free stack (%llu, was %llu)",
           (unsigned long long)device_sim_header(buffer)->free_stack, (unsigned long long)free_top);
  /* The held packet completes normally. */
  uint64_t lanes[64][8];
  for (uint32_t lane = 0; lane < 64; ++lane) {
    lanes[lane][0] = (uint64_t)(uintptr_t)&device_sim_fc_hash;
    for (uint32_t w = 1; w < 8; ++w) lanes[lane][w] = lane + w;
  }
  device_sim_fill(buffer, held, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull, (const uint64_t(*)[8])lanes);
  device_sim_push_ready(buffer, held);
  device_sim_ring_doorbell(buffer);
  DROPIN_CHECK_MSG(device_sim_wait_served(buffer, held, HC_CALL_TIMEOUT_NS) == 0, "held packet not served");
  uint64_t expected[2];
  device_sim_fc_expected(&lanes[5][1], expected);
  device_sim_read_results(buffer, held, ~0ull, lanes);
  DROPIN_CHECK_MSG(lanes[5][0] == expected[0] && lanes[5][1] == expected[1], "held packet result");
  device_sim_push_free(buffer, held);
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 2) == 0, "call after second enable");
  DROPIN_CHECK_MSG(hc_live_signals() == signals0 + 1, "extra signal");
  disableHostcalls(buffer, NULL);
  DROPIN_CHECK_MSG(hc_thread_count() == threads0, "one disable did not unregister the buffer (%d threads)",
           hc_thread_count());
  DROPIN_CHECK_MSG(hc_live_signals() == signals0, "signal left");
  hc_free_buffer(buffer);
}

/* A buffer overlapping an enabled one is refused; the enabled one is kept. */
static void test_overlapping_buffers(void) {
  unsigned char* raw = (unsigned char*)hc_alloc_buffer(16);
  DROPIN_REQUIRE_MSG(enableHostcalls(raw, 8, NULL), "enable");
  DROPIN_CHECK_MSG(!enableHostcalls(raw + getHostcallBufferSize(8) - 8, 2, NULL), "overlap at the end accepted");
  DROPIN_CHECK_MSG(!enableHostcalls(raw + 4096, 2, NULL), "overlap inside accepted");
  DROPIN_CHECK_MSG(enableHostcalls(raw + getHostcallBufferSize(8), 2, NULL), "adjacent buffer refused");
  DROPIN_CHECK_MSG(hc_call_ok(raw, 1) == 0 && hc_call_ok(raw + getHostcallBufferSize(8), 2) == 0, "calls");
  disableHostcalls(raw + getHostcallBufferSize(8), NULL);
  hc_disable_and_free(raw);
}

/* Disabling an unknown buffer or disabling twice is a no-op that leaves
 * other buffers served. */
static void test_disable_unknown_and_twice(void) {
  int threads0 = hc_thread_count();
  uint64_t signals0 = hc_live_signals();
  void* a = hc_alloc_buffer(4);
  void* b = hc_alloc_buffer(4);
  void* never = hc_alloc_buffer(4);
  DROPIN_REQUIRE_MSG(enableHostcalls(a, 4, NULL) && enableHostcalls(b, 4, NULL), "enable");
  disableHostcalls(never, NULL);
  disableHostcalls(NULL, NULL);
  disableHostcalls((char*)a + 8, NULL); /* inside a, not a itself */
  DROPIN_CHECK_MSG(hc_call_ok(a, 1) == 0 && hc_call_ok(b, 2) == 0, "served after unknown disables");
  disableHostcalls(b, NULL);
  disableHostcalls(b, NULL);
  DROPIN_CHECK_MSG(hc_call_ok(a, 3) == 0, "a not served after b disabled twice");
  DROPIN_CHECK_MSG(hc_live_signals() == signals0 + 1, "signal count after double disable");
  disableHostcalls(a, NULL);
  disableHostcalls(a, NULL);
  DROPIN_CHECK_MSG(hc_thread_count() == threads0, "listener still running");
  DROPIN_CHECK_MSG(hc_live_signals() == signals0, "signal left");
  /* And the library still works afterwards. */
  DROPIN_CHECK_MSG(enableHostcalls(b, 4, NULL) && hc_call_ok(b, 4) == 0, "re-enable after double disable");
  disableHostcalls(b, NULL);
  hc_free_buffer(a);
  hc_free_buffer(b);
  hc_free_buffer(never);
}

/* hsa_signal_create failing: enable returns false, leaves nothing behind,
 * and the next enable works. */
static void test_signal_create_failure(void) {
  int threads0 = hc_thread_count();
  uint64_t signals0 = hc_live_signals();
  void* buffer = hc_alloc_buffer(4);
  hsa_sim_fail_nth_call("hsa_signal_create", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  DROPIN_CHECK_MSG(!enableHostcalls(buffer, 4, NULL), "enable succeeded without a doorbell signal");
  hsa_sim_clear_faults();
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0, 1000) == threads0, "failed enable left a thread");
  DROPIN_CHECK_MSG(hc_live_signals() == signals0, "failed enable left a signal");
  disableHostcalls(buffer, NULL); /* not registered: no-op */
  DROPIN_CHECK_MSG(enableHostcalls(buffer, 4, NULL), "enable after the fault was cleared");
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 7) == 0, "call after recovery");
  disableHostcalls(buffer, NULL);
  DROPIN_CHECK_MSG(hc_live_signals() == signals0, "signal left");
  hc_free_buffer(buffer);
}

/* A failing hsa_signal_destroy at the last disable must not crash or hang
 * and must not stop later enables from working. */
static void test_signal_destroy_failure(void) {
  int threads0 = hc_thread_count();
  void* buffer = hc_alloc_buffer(4);
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, 4, NULL), "enable");
  hsa_sim_fail_nth_call("hsa_signal_destroy", 1, HSA_STATUS_ERROR_INVALID_SIGNAL);
  disableHostcalls(buffer, NULL);
  hsa_sim_clear_faults();
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0, 1000) == threads0, "listener left running");
  DROPIN_CHECK_MSG(enableHostcalls(buffer, 4, NULL) && hc_call_ok(buffer, 8) == 0, "enable after failure");
  hc_disable_and_free(buffer);
}

int main(void) {
  hc_hsa_init();
  HC_RUN(test_buffer_size_formula);
  HC_RUN(test_buffer_alignment);
  HC_RUN(test_initial_layout);
  HC_RUN(test_enable_disable_enable);
  HC_RUN(test_one_doorbell_for_all_buffers);
  HC_RUN(test_bad_arguments);
  HC_RUN(test_one_packet);
  HC_RUN(test_enable_twice);
  HC_RUN(test_overlapping_buffers);
  HC_RUN(test_disable_unknown_and_twice);
  HC_RUN(test_signal_create_failure);
  HC_RUN(test_signal_destroy_failure);
  return dropin_check_exit_code();
}
