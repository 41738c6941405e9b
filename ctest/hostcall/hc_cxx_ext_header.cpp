// A C++ translation unit using the generated amdgpu_dropin_hostcall.h: it must
// compile as C++17 with the suite's warnings, keep the C layout, and a
// captureless lambda must serve as a handler.
#include "amdgpu_dropin_hostcall.h"

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "device_sim.h"
#include "hsa_sim.h"
#include "rochostcall.hpp"

static_assert(sizeof(amdgpu_dropin_hostcall_packet_t) == 24 + 4096, "packet size");
static_assert(offsetof(amdgpu_dropin_hostcall_packet_t, slots) == 24, "slots offset");
static_assert(std::is_same<std::underlying_type<amdgpu_dropin_hostcall_status_t>::type, int32_t>::value,
              "status is a 32-bit enum");

int main() {
  if (hsa_init() != HSA_STATUS_SUCCESS) return 1;
  int failures = 0;
  void* buffer = nullptr;
  if (posix_memalign(&buffer, 4096, getHostcallBufferSize(4)) != 0) return 1;
  if (!enableHostcalls(buffer, 4, nullptr)) return 1;
  amdgpu_dropin_hostcall_packet_fn twice = [](void* user, amdgpu_dropin_hostcall_packet_t* packet) {
    *static_cast<int*>(user) += 1;
    for (int lane = 0; lane < 64; ++lane) packet->slots[lane][0] *= 2;
    return int32_t{0};
  };
  int calls = 0;
  if (amdgpu_dropin_hostcall_register_packet_handler(200, nullptr, twice, &calls) !=
      AMDGPU_DROPIN_HOSTCALL_OK) {
    failures++;
  }
  uint64_t lanes[64][8];
  std::memset(lanes, 0, sizeof(lanes));
  lanes[3][0] = 21;
  if (device_sim_hostcall(buffer, 200, 1ull << 3, lanes, 0) != DEVICE_SIM_OK || lanes[3][0] != 42 ||
      calls != 1) {
    failures++;
  }
  if (amdgpu_dropin_hostcall_unregister_handler(200, nullptr) != AMDGPU_DROPIN_HOSTCALL_OK) failures++;
  disableHostcalls(buffer, nullptr);
  std::free(buffer);
  std::printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
