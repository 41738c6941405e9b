/* The test-hook build of the library (cargo feature `test-hooks`, built only
 * for this suite) and the product build, driven by the same cases.
 *
 * Hook build (HC_TEST_HOOKS): requests with the service id
 * AMDGPU_DROPIN_HOSTCALL_TEST_PANIC_SERVICE panic inside the service. Policy
 * (src/hostcall/services/mod.rs): the panic is caught and logged, the lane gets -1,
 * READY is cleared and the listener keeps serving every buffer.
 *
 * Product build: the same id is an unknown service (-1, logged as unknown);
 * nothing panics. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "amdgpu_dropin_hostcall_constants.h"
#include "device_sim.h"
#include "hc_test.h"
#include "rochostcall.hpp"

#define HOOK_SERVICE AMDGPU_DROPIN_HOSTCALL_TEST_PANIC_SERVICE

static int child_hook_service(void) {
  int failures = 0;
  hc_hsa_init();
  void* buffers[2] = {hc_alloc_buffer(4), hc_alloc_buffer(4)};
  DROPIN_CHECK_INTO(failures, enableHostcalls(buffers[0], 4, NULL) && enableHostcalls(buffers[1], 4, NULL),
                 "enable");
  if (failures) return 1;
  for (int round = 0; round < 3; ++round) {
    uint64_t lanes[64][8];
    for (uint32_t lane = 0; lane < 64; ++lane) {
      for (uint32_t w = 0; w < 8; ++w) lanes[lane][w] = 42;
    }
    uint64_t mask = round == 0 ? ~0ull : 0x0F0Full << round;
    int rc = device_sim_hostcall(buffers[round & 1], HOOK_SERVICE, mask, lanes, HC_CALL_TIMEOUT_NS);
    DROPIN_CHECK_INTO(failures, rc == 0, "round %d: wave left spinning (%s)", round, device_sim_error_string(rc));
    for (uint32_t lane = 0; lane < 64 && rc == 0; ++lane) {
      uint64_t want = (mask & (1ull << lane)) ? AMDGPU_DROPIN_HOSTCALL_ERROR_VALUE : 42;
      DROPIN_CHECK_INTO(failures, lanes[lane][0] == want, "round %d lane %u: slot0 %llx", round, lane,
                     (unsigned long long)lanes[lane][0]);
    }
    /* Both buffers are still served. */
    for (int b = 0; b < 2; ++b) {
      DROPIN_CHECK_INTO(failures, device_sim_fc_checked_call(buffers[b], ~0ull, (uint64_t)round, HC_CALL_TIMEOUT_NS) == 0,
                     "buffer %d after round %d", b, round);
    }
  }
  /* Hook requests mixed into regular traffic. */
  device_sim_waves_result_t result;
  DROPIN_CHECK_INTO(failures, hc_run_waves(buffers[0], 4, 100, 3, HC_CALL_TIMEOUT_NS, &result) == 0, "waves: %s",
                    result.first_failure);
  disableHostcalls(buffers[0], NULL);
  disableHostcalls(buffers[1], NULL);
  hc_free_buffer(buffers[0]);
  hc_free_buffer(buffers[1]);
  return failures ? 1 : 0;
}

static void test_hook_service(void) {
  static const char* const env[] = {"AMD_LOG_LEVEL=1", NULL};
  hc_child_result_t r;
  HC_CHILD_OK("hook_service", env, HC_CHILD_TIMEOUT_MS, &r);
  int panicked = hc_count_lines_with_id(r.err, "panicked", HOOK_SERVICE);
  int unknown = hc_count_lines_with_id(r.err, "unknown service id", HOOK_SERVICE);
#ifdef HC_TEST_HOOKS
  DROPIN_CHECK_MSG(panicked >= 1 && unknown == 0, "hook build: want the panic logged; stderr: %s", r.err);
#else
  DROPIN_CHECK_MSG(panicked == 0 && unknown == 1, "product build: want an unknown id, no panic; stderr: %s",
           r.err);
#endif
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"hook_service", child_hook_service},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
  HC_RUN(test_hook_service);
  return dropin_check_exit_code();
}
