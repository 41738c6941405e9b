// A C++ translation unit that includes the generated header as IREE's C++
// code (vmem_test.cc) does: the declarations must have C linkage and the
// types the same layout as in C.
#include "iree/hal/drivers/amdgpu/util/vmem.h"

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(sizeof(iree_hal_amdgpu_vmem_ringbuffer_t) == 32, "size");
static_assert(offsetof(iree_hal_amdgpu_vmem_ringbuffer_t, ring_base_ptr) == 24,
              "offset");
static_assert(std::is_standard_layout<iree_hal_amdgpu_vmem_ringbuffer_t>::value,
              "standard layout");
static_assert(IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER == 3, "value");
static_assert(IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST == 1, "value");

// The exact function types of the original declarations.
static iree_status_t (*const kInitialize)(
    const iree_hal_amdgpu_libhsa_t*, hsa_agent_t, hsa_amd_memory_pool_t,
    iree_hal_amdgpu_vmem_memory_type_t, iree_device_size_t, iree_host_size_t,
    const hsa_amd_memory_access_desc_t*, iree_hal_amdgpu_vmem_ringbuffer_t*) =
    iree_hal_amdgpu_vmem_ringbuffer_initialize;
static iree_status_t (*const kInitializeWithTopology)(
    const iree_hal_amdgpu_libhsa_t*, hsa_agent_t, hsa_amd_memory_pool_t,
    iree_hal_amdgpu_vmem_memory_type_t, iree_device_size_t,
    const iree_hal_amdgpu_topology_t*, iree_hal_amdgpu_vmem_access_mode_t,
    iree_hal_amdgpu_vmem_ringbuffer_t*) =
    iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology;
static bool (*const kTryFind)(const iree_hal_amdgpu_libhsa_t*, hsa_agent_t,
                              hsa_amd_memory_pool_t*) =
    iree_hal_amdgpu_try_find_coarse_global_memory_pool;
static iree_status_t (*const kFind)(const iree_hal_amdgpu_libhsa_t*,
                                    hsa_agent_t,
                                    hsa_amd_memory_pool_global_flag_t,
                                    hsa_amd_memory_pool_t*) =
    iree_hal_amdgpu_find_global_memory_pool;
static void (*const kDeinitialize)(const iree_hal_amdgpu_libhsa_t*,
                                   iree_hal_amdgpu_vmem_ringbuffer_t*) =
    iree_hal_amdgpu_vmem_ringbuffer_deinitialize;

int main() {
  // Calls that fail validation before touching HSA (no runtime needed).
  hsa_agent_t agent = {1};
  hsa_amd_memory_pool_t pool = {0xDEAD};
  iree_status_t status = kFind(nullptr, agent,
                               HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
                               &pool);
  int failures = 0;
  if (iree_status_code(status) != IREE_STATUS_INVALID_ARGUMENT ||
      pool.handle != 0) {
    std::fprintf(stderr, "find with a NULL table: code %d\n",
                 (int)iree_status_code(status));
    ++failures;
  }
  if (kTryFind(nullptr, agent, &pool)) ++failures;
  iree_hal_amdgpu_vmem_ringbuffer_t rb;
  std::memset(&rb, 0xEE, sizeof(rb));
  status = kInitialize(nullptr, agent, pool,
                       IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, 4096, 0,
                       nullptr, &rb);
  if (iree_status_code(status) != IREE_STATUS_INVALID_ARGUMENT) ++failures;
  status = kInitializeWithTopology(nullptr, agent, pool,
                                   IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
                                   4096, nullptr,
                                   IREE_HAL_AMDGPU_ACCESS_MODE_SHARED, &rb);
  if (iree_status_code(status) != IREE_STATUS_INVALID_ARGUMENT) ++failures;
  kDeinitialize(nullptr, &rb);  // zeroed by the failed initialize: no-op
  for (unsigned char byte : reinterpret_cast<unsigned char(&)[32]>(rb)) {
    if (byte) ++failures;
  }
  std::printf("%s\n", failures ? "FAIL" : "OK");
  return failures ? 1 : 0;
}
