// A C++ caller compiled against the original plain C++ declarations: it
// references _Z21getHostcallBufferSizej, _Z26getHostcallBufferAlignmentv,
// _Z15enableHostcallsPvjPKv and _Z16disableHostcallsPvPKv, which the library
// must export and which must behave like the C names.
#include "dropin_check.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "device_sim.h"
#include "original_rochostcall.h"
#include "hsa_sim.h"

DROPIN_CHECK_DEFINE_FAILURES;

int main() {
  DROPIN_CHECK(hsa_init() == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(getHostcallBufferSize(3) == 48 + 72 + 3 * 4096);
  DROPIN_CHECK(getHostcallBufferAlignment() == 8);
  void* buffer = nullptr;
  DROPIN_CHECK(posix_memalign(&buffer, 4096, getHostcallBufferSize(4)) == 0);
  DROPIN_CHECK(!enableHostcalls(nullptr, 4, nullptr));
  DROPIN_CHECK(enableHostcalls(buffer, 4, buffer));
  uint64_t lanes[64][8];
  for (uint32_t lane = 0; lane < 64; ++lane) {
    lanes[lane][0] = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&device_sim_fc_hash));
    for (uint32_t w = 1; w < 8; ++w) lanes[lane][w] = lane * 8 + w;
  }
  uint64_t in[64][8];
  std::memcpy(in, lanes, sizeof(in));
  DROPIN_CHECK(device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, ~0ull, lanes,
                            5000000000ull) == 0);
  for (uint32_t lane = 0; lane < 64; ++lane) {
    uint64_t expected[2];
    device_sim_fc_expected(&in[lane][1], expected);
    DROPIN_CHECK(lanes[lane][0] == expected[0] && lanes[lane][1] == expected[1]);
  }
  disableHostcalls(buffer, buffer);
  hsa_sim_live_t live;
  hsa_sim_get_live(&live);
  DROPIN_CHECK(live.signals == 0);
  std::free(buffer);
  return dropin_check_exit_code();
}
