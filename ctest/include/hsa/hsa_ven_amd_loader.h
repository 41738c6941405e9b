/*
 * amdgpu-dropin test suite: the AMD loader extension of the HSA API
 * (HSA_EXTENSION_AMD_LOADER), version 1.03.
 *
 * Written for this project. Names, values, signatures and the layout of the
 * function table match ROCr's hsa_ven_amd_loader.h ABI; IREE's
 * iree_hal_amdgpu_libhsa_t embeds the table (`amd_loader`) and fills it with
 * hsa_system_get_major_extension_table(HSA_EXTENSION_AMD_LOADER, 1, ...).
 */
#ifndef AMDGPU_DROPIN_TEST_HSA_VEN_AMD_LOADER_H_
#define AMDGPU_DROPIN_TEST_HSA_VEN_AMD_LOADER_H_

#include "hsa.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_NONE = 0,
  HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_FILE = 1,
  HSA_VEN_AMD_LOADER_CODE_OBJECT_STORAGE_TYPE_MEMORY = 2
} hsa_ven_amd_loader_code_object_storage_type_t;

/* One memory segment a loaded code object occupies. */
typedef struct hsa_ven_amd_loader_segment_descriptor_s {
  hsa_agent_t agent;
  hsa_executable_t executable;
  hsa_ven_amd_loader_code_object_storage_type_t code_object_storage_type;
  const void* code_object_storage_base;
  size_t code_object_storage_size;
  size_t code_object_storage_offset;
  const void* segment_base;
  size_t segment_size;
} hsa_ven_amd_loader_segment_descriptor_t;

typedef struct hsa_loaded_code_object_s {
  uint64_t handle;
} hsa_loaded_code_object_t;

typedef enum {
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_EXECUTABLE = 1,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_KIND = 2,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_AGENT = 3,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_TYPE = 4,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_MEMORY_BASE = 5,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_MEMORY_SIZE = 6,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_CODE_OBJECT_STORAGE_FILE = 7,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_DELTA = 8,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_BASE = 9,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_LOAD_SIZE = 10,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI_LENGTH = 11,
  HSA_VEN_AMD_LOADER_LOADED_CODE_OBJECT_INFO_URI = 12
} hsa_ven_amd_loader_loaded_code_object_info_t;

HSA_API hsa_status_t hsa_ven_amd_loader_query_host_address(
    const void* device_address, const void** host_address);
HSA_API hsa_status_t hsa_ven_amd_loader_query_segment_descriptors(
    hsa_ven_amd_loader_segment_descriptor_t* segment_descriptors,
    size_t* num_segment_descriptors);
HSA_API hsa_status_t hsa_ven_amd_loader_query_executable(
    const void* device_address, hsa_executable_t* executable);
HSA_API hsa_status_t hsa_ven_amd_loader_executable_iterate_loaded_code_objects(
    hsa_executable_t executable,
    hsa_status_t (*callback)(hsa_executable_t executable,
                             hsa_loaded_code_object_t loaded_code_object,
                             void* data),
    void* data);
HSA_API hsa_status_t hsa_ven_amd_loader_loaded_code_object_get_info(
    hsa_loaded_code_object_t loaded_code_object,
    hsa_ven_amd_loader_loaded_code_object_info_t attribute, void* value);
HSA_API hsa_status_t
hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size(
    hsa_file_t file, size_t offset, size_t size,
    hsa_code_object_reader_t* code_object_reader);
HSA_API hsa_status_t hsa_ven_amd_loader_iterate_executables(
    hsa_status_t (*callback)(hsa_executable_t executable, void* data),
    void* data);

/* The version 1.03 function table (7 entries), in ROCr's order. Versions
 * 1.00, 1.01 and 1.02 are its first 3, 5 and 6 entries; the runtime copies
 * as many bytes as the caller's table_length asks for. */
typedef struct hsa_ven_amd_loader_1_03_pfn_s {
  hsa_status_t (*hsa_ven_amd_loader_query_host_address)(
      const void* device_address, const void** host_address);
  hsa_status_t (*hsa_ven_amd_loader_query_segment_descriptors)(
      hsa_ven_amd_loader_segment_descriptor_t* segment_descriptors,
      size_t* num_segment_descriptors);
  hsa_status_t (*hsa_ven_amd_loader_query_executable)(
      const void* device_address, hsa_executable_t* executable);
  hsa_status_t (*hsa_ven_amd_loader_executable_iterate_loaded_code_objects)(
      hsa_executable_t executable,
      hsa_status_t (*callback)(hsa_executable_t executable,
                               hsa_loaded_code_object_t loaded_code_object,
                               void* data),
      void* data);
  hsa_status_t (*hsa_ven_amd_loader_loaded_code_object_get_info)(
      hsa_loaded_code_object_t loaded_code_object,
      hsa_ven_amd_loader_loaded_code_object_info_t attribute, void* value);
  hsa_status_t (
      *hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size)(
      hsa_file_t file, size_t offset, size_t size,
      hsa_code_object_reader_t* code_object_reader);
  hsa_status_t (*hsa_ven_amd_loader_iterate_executables)(
      hsa_status_t (*callback)(hsa_executable_t executable, void* data),
      void* data);
} hsa_ven_amd_loader_1_03_pfn_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AMDGPU_DROPIN_TEST_HSA_VEN_AMD_LOADER_H_ */
