/*
 * amdgpu-dropin test suite: a subset of the AMD extensions of the HSA API.
 *
 * Written for this project. Names, values and signatures match ROCr's
 * hsa_ext_amd.h ABI; only what the project uses is declared.
 */
#ifndef AMDGPU_DROPIN_TEST_HSA_EXT_AMD_H_
#define AMDGPU_DROPIN_TEST_HSA_EXT_AMD_H_

#include "hsa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Extra status codes of the AMD extension (values of hsa_status_t). */
enum {
  HSA_STATUS_ERROR_INVALID_MEMORY_POOL = 40,
  HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION = 41,
  HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION = 42,
  HSA_STATUS_ERROR_MEMORY_FAULT = 43,
  HSA_STATUS_CU_MASK_REDUCED = 44,
  HSA_STATUS_ERROR_OUT_OF_REGISTERS = 45,
  HSA_STATUS_ERROR_RESOURCE_BUSY = 46,
  HSA_STATUS_ERROR_NOT_SUPPORTED = 47
};

/* AMD agent attributes (values of hsa_agent_info_t; callers cast). */
typedef enum {
  HSA_AMD_AGENT_INFO_CHIP_ID = 0xA000,     /* uint32_t, the PCI device id */
  HSA_AMD_AGENT_INFO_UUID = 0xA011,        /* char[], "GPU-" + 16 hex digits */
  HSA_AMD_AGENT_INFO_NEAREST_CPU = 0xA113  /* hsa_agent_t */
} hsa_amd_agent_info_t;

/* Signals with attributes. */
typedef enum {
  HSA_AMD_SIGNAL_AMD_GPU_ONLY = 1,
  HSA_AMD_SIGNAL_IPC = 2
} hsa_amd_signal_attribute_t;

HSA_API hsa_status_t hsa_amd_signal_create(hsa_signal_value_t initial_value,
                                           uint32_t num_consumers,
                                           const hsa_agent_t* consumers,
                                           uint64_t attributes,
                                           hsa_signal_t* signal);

/* Memory pools. */
typedef struct hsa_amd_memory_pool_s {
  uint64_t handle;
} hsa_amd_memory_pool_t;

typedef enum {
  HSA_AMD_SEGMENT_GLOBAL = 0,
  HSA_AMD_SEGMENT_READONLY = 1,
  HSA_AMD_SEGMENT_PRIVATE = 2,
  HSA_AMD_SEGMENT_GROUP = 3
} hsa_amd_segment_t;

typedef enum {
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT = 1,
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED = 2,
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED = 4,
  HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED = 8
} hsa_amd_memory_pool_global_flag_t;

typedef enum {
  HSA_AMD_MEMORY_POOL_LOCATION_CPU = 0,
  HSA_AMD_MEMORY_POOL_LOCATION_GPU = 1
} hsa_amd_memory_pool_location_t;

typedef enum {
  HSA_AMD_MEMORY_POOL_INFO_SEGMENT = 0,                  /* hsa_amd_segment_t */
  HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS = 1,             /* uint32_t */
  HSA_AMD_MEMORY_POOL_INFO_SIZE = 2,                     /* size_t */
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED = 5,    /* bool */
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE = 6,    /* size_t */
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT = 7,  /* size_t */
  HSA_AMD_MEMORY_POOL_INFO_ACCESSIBLE_BY_ALL = 15,       /* bool */
  HSA_AMD_MEMORY_POOL_INFO_ALLOC_MAX_SIZE = 16,          /* size_t */
  HSA_AMD_MEMORY_POOL_INFO_LOCATION = 17,         /* hsa_amd_memory_pool_location_t */
  HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE = 18 /* size_t */
} hsa_amd_memory_pool_info_t;

HSA_API hsa_status_t hsa_amd_memory_pool_get_info(
    hsa_amd_memory_pool_t memory_pool, hsa_amd_memory_pool_info_t attribute,
    void* value);

HSA_API hsa_status_t hsa_amd_agent_iterate_memory_pools(
    hsa_agent_t agent,
    hsa_status_t (*callback)(hsa_amd_memory_pool_t memory_pool, void* data),
    void* data);

typedef enum {
  HSA_AMD_MEMORY_POOL_ACCESS_NEVER_ALLOWED = 0,
  HSA_AMD_MEMORY_POOL_ACCESS_ALLOWED_BY_DEFAULT = 1,
  HSA_AMD_MEMORY_POOL_ACCESS_DISALLOWED_BY_DEFAULT = 2
} hsa_amd_memory_pool_access_t;

typedef enum {
  HSA_AMD_AGENT_MEMORY_POOL_INFO_ACCESS = 0 /* hsa_amd_memory_pool_access_t */
} hsa_amd_agent_memory_pool_info_t;

HSA_API hsa_status_t hsa_amd_agent_memory_pool_get_info(
    hsa_agent_t agent, hsa_amd_memory_pool_t memory_pool,
    hsa_amd_agent_memory_pool_info_t attribute, void* value);

/* Virtual memory management. */
typedef struct hsa_amd_vmem_alloc_handle_s {
  uint64_t handle;
} hsa_amd_vmem_alloc_handle_t;

typedef enum {
  MEMORY_TYPE_NONE = 0,
  MEMORY_TYPE_PINNED = 1
} hsa_amd_memory_type_t;

/* One agent's permission on a mapped range (16 bytes). */
typedef struct hsa_amd_memory_access_desc_s {
  hsa_access_permission_t permissions;
  hsa_agent_t agent_handle;
} hsa_amd_memory_access_desc_t;

HSA_API hsa_status_t hsa_amd_vmem_address_reserve(void** va, size_t size,
                                                  uint64_t address,
                                                  uint64_t flags);
HSA_API hsa_status_t hsa_amd_vmem_address_reserve_align(void** va, size_t size,
                                                        uint64_t address,
                                                        uint64_t alignment,
                                                        uint64_t flags);
HSA_API hsa_status_t hsa_amd_vmem_address_free(void* va, size_t size);

/* Memory pool allocations (ROCr: hsa_ext_amd.h). flags: 0, or
 * HSA_AMD_MEMORY_POOL_PCIE_FLAG (1), _CONTIGUOUS_FLAG (2), _EXECUTABLE_FLAG (4). */
HSA_API hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool,
                                                  size_t size, uint32_t flags, void** ptr);
HSA_API hsa_status_t hsa_amd_memory_pool_free(void* ptr);
HSA_API hsa_status_t hsa_amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                                 const uint32_t* flags, const void* ptr);

HSA_API hsa_status_t hsa_amd_vmem_handle_create(
    hsa_amd_memory_pool_t pool, size_t size, hsa_amd_memory_type_t type,
    uint64_t flags, hsa_amd_vmem_alloc_handle_t* memory_handle);
HSA_API hsa_status_t hsa_amd_vmem_handle_release(
    hsa_amd_vmem_alloc_handle_t memory_handle);

HSA_API hsa_status_t hsa_amd_vmem_map(void* va, size_t size, size_t in_offset,
                                      hsa_amd_vmem_alloc_handle_t memory_handle,
                                      uint64_t flags);
HSA_API hsa_status_t hsa_amd_vmem_unmap(void* va, size_t size);

HSA_API hsa_status_t hsa_amd_vmem_set_access(
    void* va, size_t size, const hsa_amd_memory_access_desc_t* desc,
    size_t desc_cnt);
HSA_API hsa_status_t hsa_amd_vmem_get_access(void* va,
                                             hsa_access_permission_t* perms,
                                             hsa_agent_t agent_handle);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AMDGPU_DROPIN_TEST_HSA_EXT_AMD_H_ */
