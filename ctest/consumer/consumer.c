/*
 * A C program built against an installed amdgpu_dropin (find_package,
 * pkg-config or plain -I/-L): one call into each half, none needing a GPU
 * or an HSA runtime.
 */
#include <stdint.h>
#include <stdio.h>

#include "iree/hal/drivers/amdgpu/util/vmem.h"
#include "rochostcall.hpp"

int main(void) {
  int failures = 0;
  /* hostcall: buffer geometry is pure arithmetic. */
  size_t small = getHostcallBufferSize(4);
  size_t large = getHostcallBufferSize(8);
  uint32_t alignment = getHostcallBufferAlignment();
  if (small == 0 || large <= small || alignment != 8) {
    fprintf(stderr, "consumer: hostcall sizes %zu/%zu, alignment %u\n", small, large, alignment);
    ++failures;
  }
  /* vmem: a NULL HSA table is rejected before HSA is touched. */
  hsa_agent_t agent = {0};
  hsa_amd_memory_pool_t pool = {0};
  iree_status_t status = iree_hal_amdgpu_find_global_memory_pool(
      NULL, agent, HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, &pool);
  if (iree_status_code(status) != IREE_STATUS_INVALID_ARGUMENT) {
    fprintf(stderr, "consumer: vmem returned status code %u, not INVALID_ARGUMENT\n",
            (unsigned)iree_status_code(status));
    ++failures;
  }
  printf("consumer: %s (hostcall buffer of 4 packets: %zu bytes)\n", failures ? "FAILED" : "OK", small);
  return failures ? 1 : 0;
}
