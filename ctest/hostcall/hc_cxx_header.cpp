// A C++ translation unit using the generated rochostcall.hpp: it must compile
// as C++17 with the suite's warnings and link against the library.
#include "rochostcall.hpp"

#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "hsa_sim.h"

// The declared signatures are the original ones.
static_assert(std::is_same<decltype(&getHostcallBufferSize), size_t (*)(uint32_t)>::value,
              "getHostcallBufferSize signature");
static_assert(std::is_same<decltype(&getHostcallBufferAlignment), uint32_t (*)(void)>::value,
              "getHostcallBufferAlignment signature");
static_assert(std::is_same<decltype(&enableHostcalls), bool (*)(void*, uint32_t, const void*)>::value,
              "enableHostcalls signature");
static_assert(std::is_same<decltype(&disableHostcalls), void (*)(void*, const void*)>::value,
              "disableHostcalls signature");

int main() {
  int failures = 0;
  if (hsa_init() != HSA_STATUS_SUCCESS) return 1;
  if (getHostcallBufferSize(2) != 48 + 48 + 8192) failures++;
  if (getHostcallBufferAlignment() != 8) failures++;
  void* buffer = nullptr;
  if (posix_memalign(&buffer, 4096, getHostcallBufferSize(2)) != 0) return 1;
  if (!enableHostcalls(buffer, 2, nullptr)) failures++;
  disableHostcalls(buffer, nullptr);
  std::free(buffer);
  std::printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
