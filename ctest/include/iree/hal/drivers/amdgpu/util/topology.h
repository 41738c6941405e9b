/*
 * amdgpu-dropin test suite: a minimal stand-in for IREE's
 * iree/hal/drivers/amdgpu/util/topology.h — only the struct, with IREE's
 * field names and layout (2144 bytes: docs/iree.md#layouts-shared-with-iree). vmem.h forward-declares it.
 */
#ifndef IREE_HAL_DRIVERS_AMDGPU_UTIL_TOPOLOGY_H_
#define IREE_HAL_DRIVERS_AMDGPU_UTIL_TOPOLOGY_H_

#include <stddef.h>
#include <stdint.h>

#include "iree/base/api.h"
#include "iree/hal/drivers/amdgpu/util/libhsa.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IREE_HAL_AMDGPU_MAX_AGENTS 128
#define IREE_HAL_AMDGPU_MAX_CPU_AGENTS 64
#define IREE_HAL_AMDGPU_MAX_GPU_AGENTS 64

struct iree_hal_amdgpu_topology_t {
  iree_host_size_t all_agent_count;
  hsa_agent_t all_agents[IREE_HAL_AMDGPU_MAX_AGENTS];
  iree_host_size_t cpu_agent_count;
  hsa_agent_t cpu_agents[IREE_HAL_AMDGPU_MAX_CPU_AGENTS];
  iree_host_size_t gpu_agent_count;
  hsa_agent_t gpu_agents[IREE_HAL_AMDGPU_MAX_GPU_AGENTS];
  iree_host_size_t gpu_agent_queue_count;
  uint8_t gpu_cpu_map[IREE_HAL_AMDGPU_MAX_GPU_AGENTS];
};
#ifndef __cplusplus
typedef struct iree_hal_amdgpu_topology_t iree_hal_amdgpu_topology_t;
#endif

#ifdef __cplusplus
static_assert(sizeof(iree_hal_amdgpu_topology_t) == 2144, "topology size");
static_assert(offsetof(iree_hal_amdgpu_topology_t, gpu_cpu_map) == 2080, "gpu_cpu_map offset");
#else
_Static_assert(sizeof(struct iree_hal_amdgpu_topology_t) == 2144, "topology size");
_Static_assert(offsetof(struct iree_hal_amdgpu_topology_t, cpu_agent_count) == 1032, "");
_Static_assert(offsetof(struct iree_hal_amdgpu_topology_t, cpu_agents) == 1040, "");
_Static_assert(offsetof(struct iree_hal_amdgpu_topology_t, gpu_agent_count) == 1552, "");
_Static_assert(offsetof(struct iree_hal_amdgpu_topology_t, gpu_agents) == 1560, "");
_Static_assert(offsetof(struct iree_hal_amdgpu_topology_t, gpu_agent_queue_count) == 2072, "");
_Static_assert(offsetof(struct iree_hal_amdgpu_topology_t, gpu_cpu_map) == 2080, "");
#endif

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* IREE_HAL_DRIVERS_AMDGPU_UTIL_TOPOLOGY_H_ */
