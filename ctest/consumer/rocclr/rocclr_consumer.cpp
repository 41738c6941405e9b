// Runs the adapter that amdgpu_dropin_replace_rocclr_hostcall put into the
// consumer's rocclr target: ROCclr's four functions answer from the library.
#include <cstdio>

#include "amdgpu_dropin_hostcall.h"
#include "device/devhostcall.hpp"
#include "standin_rocclr.hpp"

int main() {
  int failures = 0;
  for (uint32_t packets : {2u, 8u, 100u}) {
    size_t size = amd::getHostcallBufferSize(packets);
    size_t expected = amdgpu_dropin_hostcall_buffer_size(AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC, packets);
    if (size == 0 || size != expected) {
      std::fprintf(stderr, "getHostcallBufferSize(%u) = %zu, the library's %zu\n", packets, size, expected);
      ++failures;
    }
  }
  if (amd::getHostcallBufferAlignment() != amdgpu_dropin_hostcall_buffer_alignment(AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC)) {
    std::fprintf(stderr, "getHostcallBufferAlignment() = %u\n", amd::getHostcallBufferAlignment());
    ++failures;
  }
  // A buffer the adapter never enabled: logged through ROCclr's ClPrint, nothing else.
  alignas(8) static unsigned char never_enabled[64];
  amd::disableHostcalls(never_enabled);
  if (amd::standin::log_count("is not registered") != 1) {
    std::fprintf(stderr, "disableHostcalls of an unknown buffer was not logged as the adapter logs it\n");
    ++failures;
  }
  std::printf("rocclr consumer: %s\n", failures == 0 ? "the adapter answers" : "FAILED");
  return failures == 0 ? 0 : 1;
}
