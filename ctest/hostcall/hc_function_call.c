/* FUNCTION_CALL correctness: simulated waves doing random-mask calls whose
 * every lane result is checked, for several wave counts and packet counts
 * (powers of two and not). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "device_sim.h"
#include "hc_test.h"
#include "rochostcall.hpp"

static uint64_t total_calls = 0;
static uint64_t total_lanes = 0;

/* Enables one buffer of n packets, runs `waves` waves × `calls` calls on it
 * and checks every lane and that inactive lanes are left alone. */
static void run_config(uint32_t num_packets, uint32_t waves, uint32_t calls, uint64_t seed) {
  void* buffer = hc_alloc_buffer(num_packets);
  DROPIN_REQUIRE_MSG(buffer != NULL, "alloc");
  DROPIN_REQUIRE_MSG(enableHostcalls(buffer, num_packets, (const void*)0x1234), "enable n=%u", num_packets);
  device_sim_waves_result_t result;
  int rc = hc_run_waves(buffer, waves, calls, seed, HC_WAVES_TIMEOUT_NS, &result);
  DROPIN_CHECK_MSG(rc == 0, "n=%u W=%u K=%u: %llu errors, %llu mismatches, %llu inactive-lane writes: %s",
           num_packets, waves, calls, (unsigned long long)result.errors,
           (unsigned long long)result.mismatches, (unsigned long long)result.inactive_lane_writes,
           result.first_failure);
  DROPIN_CHECK_MSG(result.calls == (uint64_t)waves * calls, "n=%u W=%u: %llu of %llu calls completed",
           num_packets, waves, (unsigned long long)result.calls,
           (unsigned long long)((uint64_t)waves * calls));
  total_calls += result.calls;
  total_lanes += result.lanes_served;
  printf("  n=%-4u W=%-3u K=%-6u calls=%-7llu lanes=%-9llu %.0f calls/s\n", num_packets, waves,
         calls, (unsigned long long)result.calls, (unsigned long long)result.lanes_served,
         result.elapsed_ns ? (double)result.calls * 1e9 / (double)result.elapsed_ns : 0.0);
  disableHostcalls(buffer, (const void*)0x1234);
  /* After disable every packet is back on the free stack and nothing is ready. */
  DROPIN_CHECK_MSG(device_sim_header(buffer)->ready_stack == 0, "ready stack not empty after the run");
  hc_free_buffer(buffer);
}

/* W = 1, 8, 32 with more than 100k calls in total. */
static void test_waves_1_8_32(void) {
  run_config(64, 1, 12000, 1);
  run_config(64, 8, 5000, 2);
  run_config(64, 32, 1600, 3);
}

/* Packet counts that are and are not powers of two, fewer and more packets
 * than waves (waves then wait for free packets). */
static void test_packet_counts(void) {
  static const uint32_t counts[] = {2, 3, 5, 7, 64, 100};
  for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); ++i) {
    run_config(counts[i], 8, 600, 100 + i);
  }
  run_config(3, 32, 100, 200);
}

/* One wave, chosen masks: full, single lanes at both ends, alternating. */
static void test_specific_masks(void) {
  void* buffer = hc_alloc_buffer(4);
  DROPIN_REQUIRE_MSG(buffer != NULL && enableHostcalls(buffer, 4, NULL), "enable");
  static const uint64_t masks[] = {~0ull, 1ull, 1ull << 63, 0x5555555555555555ull,
                                   0xAAAAAAAAAAAAAAAAull, 0x00000000FFFFFFFFull,
                                   0xFFFFFFFF00000000ull, 0x8000000000000001ull};
  for (size_t m = 0; m < sizeof(masks) / sizeof(masks[0]); ++m) {
    uint64_t lanes[64][8];
    uint64_t in[64][8];
    for (uint32_t lane = 0; lane < 64; ++lane) {
      lanes[lane][0] = (uint64_t)(uintptr_t)&device_sim_fc_hash;
      for (uint32_t w = 1; w < 8; ++w) lanes[lane][w] = (m << 32) ^ (lane << 8) ^ w;
    }
    memcpy(in, lanes, sizeof(in));
    int rc = device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, masks[m], lanes,
                                 HC_WAVES_TIMEOUT_NS);
    DROPIN_CHECK_MSG(rc == 0, "mask %016llx: %s", (unsigned long long)masks[m], device_sim_error_string(rc));
    for (uint32_t lane = 0; lane < 64; ++lane) {
      if (masks[m] & (1ull << lane)) {
        uint64_t expected[2];
        device_sim_fc_expected(&in[lane][1], expected);
        DROPIN_CHECK_MSG(lanes[lane][0] == expected[0] && lanes[lane][1] == expected[1],
                 "mask %016llx lane %u wrong result", (unsigned long long)masks[m], lane);
      } else {
        /* The simulator never touches the caller's inactive lanes. */
        DROPIN_CHECK_MSG(memcmp(lanes[lane], in[lane], sizeof(in[lane])) == 0, "inactive lane changed");
      }
    }
  }
  hc_disable_and_free(buffer);
}

int main(void) {
  hc_hsa_init();
  HC_RUN(test_specific_masks);
  HC_RUN(test_waves_1_8_32);
  HC_RUN(test_packet_counts);
  printf("total: %llu calls, %llu lanes\n", (unsigned long long)total_calls,
         (unsigned long long)total_lanes);
  DROPIN_CHECK_MSG(total_calls >= 100000, "only %llu calls", (unsigned long long)total_calls);
  return dropin_check_exit_code();
}
