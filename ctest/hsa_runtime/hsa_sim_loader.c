/*
 * Software HSA runtime: system extensions and the AMD loader extension
 * (HSA_EXTENSION_AMD_LOADER, version 1.03), as IREE's libhsa loads them.
 *
 * Contract (ROCr, runtime/hsa-runtime/core/runtime/hsa.cpp and
 * hsa_ven_amd_loader.cpp):
 *   - hsa_system_get_major_extension_table: NOT_INITIALIZED before hsa_init;
 *     a NULL table or a table_length of 0 is INVALID_ARGUMENT; for
 *     HSA_EXTENSION_AMD_LOADER with version_major 1 it copies
 *     min(table_length, sizeof(hsa_ven_amd_loader_1_03_pfn_t)) bytes of the
 *     table; another major version or an extension without a table here is
 *     HSA_STATUS_ERROR.
 *   - hsa_system_major_extension_supported: NULL outputs are
 *     INVALID_ARGUMENT; the loader, major 1, is supported with minor 0 (what
 *     ROCr reports although it fills the 1.03 table); everything else is
 *     unsupported here (this runtime has no images, finalizer or profiling
 *     tables, so it does not claim them).
 *   - The loader functions keep ROCr's argument checks and error codes. This
 *     runtime loads no code objects (hsa_executable_create_alt is a stub), so
 *     there is no executable, loaded code object or segment: address lookups
 *     are INVALID_ARGUMENT, an executable handle INVALID_EXECUTABLE, a loaded
 *     code object INVALID_CODE_OBJECT, the segment list and the executable
 *     list are empty, and a code object reader cannot be created
 *     (INVALID_FILE for a descriptor that is not open, else HSA_STATUS_ERROR).
 */
#include <fcntl.h>
#include <string.h>

#include "hsa/hsa_ven_amd_loader.h"
#include "hsa_sim_internal.h"

HSA_API hsa_status_t hsa_system_major_extension_supported(
    uint16_t extension, uint16_t version_major, uint16_t* version_minor,
    bool* result) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_system_major_extension_supported, &status)) {
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (version_minor == NULL || result == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      status = HSA_STATUS_SUCCESS;
      *result = extension == HSA_EXTENSION_AMD_LOADER && version_major == 1;
      if (*result) *version_minor = 0;
    }
  }
  uint64_t args[6] = {extension, version_major, SIM_U64(version_minor),
                      SIM_U64(result), 0, 0};
  return sim_leave(SIM_FN_hsa_system_major_extension_supported, status, args,
                   NULL, 0);
}

HSA_API hsa_status_t hsa_system_get_major_extension_table(uint16_t extension,
                                                          uint16_t version_major,
                                                          size_t table_length,
                                                          void* table) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_system_get_major_extension_table, &status)) {
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else if (table == NULL || table_length == 0) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else if (extension != HSA_EXTENSION_AMD_LOADER || version_major != 1) {
      status = HSA_STATUS_ERROR;
    } else {
      const hsa_ven_amd_loader_1_03_pfn_t loader = {
          hsa_ven_amd_loader_query_host_address,
          hsa_ven_amd_loader_query_segment_descriptors,
          hsa_ven_amd_loader_query_executable,
          hsa_ven_amd_loader_executable_iterate_loaded_code_objects,
          hsa_ven_amd_loader_loaded_code_object_get_info,
          hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size,
          hsa_ven_amd_loader_iterate_executables,
      };
      memcpy(table, &loader,
             table_length < sizeof(loader) ? table_length : sizeof(loader));
      status = HSA_STATUS_SUCCESS;
    }
  }
  uint64_t args[6] = {extension, version_major, table_length, SIM_U64(table),
                      0, 0};
  return sim_leave(SIM_FN_hsa_system_get_major_extension_table, status, args,
                   NULL, 0);
}

/* ---- The loader functions ------------------------------------------------ */

/* The common prologue: counts, fault injection, then NOT_INITIALIZED. */
static bool sim_loader_enter(sim_fn_t fn, hsa_status_t* out_status) {
  if (sim_enter(fn, out_status)) return false;
  if (!sim_initialized()) {
    *out_status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    return false;
  }
  return true;
}

/* An address lookup (host address, owning executable): NULL arguments and
 * every address are INVALID_ARGUMENT, since no loaded segment contains any. */
static hsa_status_t sim_loader_lookup_address(sim_fn_t fn,
                                              const void* device_address,
                                              const void* out) {
  hsa_status_t status;
  if (sim_loader_enter(fn, &status)) status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  uint64_t args[6] = {SIM_U64(device_address), SIM_U64(out), 0, 0, 0, 0};
  return sim_leave(fn, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_ven_amd_loader_query_host_address(
    const void* device_address, const void** host_address) {
  return sim_loader_lookup_address(SIM_FN_hsa_ven_amd_loader_query_host_address,
                                   device_address, host_address);
}

HSA_API hsa_status_t hsa_ven_amd_loader_query_segment_descriptors(
    hsa_ven_amd_loader_segment_descriptor_t* segment_descriptors,
    size_t* num_segment_descriptors) {
  hsa_status_t status;
  if (sim_loader_enter(SIM_FN_hsa_ven_amd_loader_query_segment_descriptors,
                       &status)) {
    if (num_segment_descriptors == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else if (*num_segment_descriptors == 0) {
      /* The count query: there are no segments. */
      status = segment_descriptors == NULL ? HSA_STATUS_SUCCESS
                                           : HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else if (segment_descriptors == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else {
      /* A count that is not the current one (0). */
      status = HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS;
    }
  }
  uint64_t args[6] = {SIM_U64(segment_descriptors),
                      SIM_U64(num_segment_descriptors), 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_ven_amd_loader_query_segment_descriptors, status,
                   args, NULL, 0);
}

HSA_API hsa_status_t hsa_ven_amd_loader_query_executable(
    const void* device_address, hsa_executable_t* executable) {
  return sim_loader_lookup_address(SIM_FN_hsa_ven_amd_loader_query_executable,
                                   device_address, executable);
}

HSA_API hsa_status_t hsa_ven_amd_loader_executable_iterate_loaded_code_objects(
    hsa_executable_t executable,
    hsa_status_t (*callback)(hsa_executable_t executable,
                             hsa_loaded_code_object_t loaded_code_object,
                             void* data),
    void* data) {
  hsa_status_t status;
  if (sim_loader_enter(
          SIM_FN_hsa_ven_amd_loader_executable_iterate_loaded_code_objects,
          &status)) {
    status = callback == NULL ? HSA_STATUS_ERROR_INVALID_ARGUMENT
                              : HSA_STATUS_ERROR_INVALID_EXECUTABLE;
  }
  uint64_t args[6] = {executable.handle, SIM_U64(callback), SIM_U64(data),
                      0, 0, 0};
  return sim_leave(
      SIM_FN_hsa_ven_amd_loader_executable_iterate_loaded_code_objects, status,
      args, NULL, 0);
}

HSA_API hsa_status_t hsa_ven_amd_loader_loaded_code_object_get_info(
    hsa_loaded_code_object_t loaded_code_object,
    hsa_ven_amd_loader_loaded_code_object_info_t attribute, void* value) {
  hsa_status_t status;
  if (sim_loader_enter(SIM_FN_hsa_ven_amd_loader_loaded_code_object_get_info,
                       &status)) {
    status = value == NULL ? HSA_STATUS_ERROR_INVALID_ARGUMENT
                           : HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  }
  uint64_t args[6] = {loaded_code_object.handle, (uint64_t)attribute,
                      SIM_U64(value), 0, 0, 0};
  return sim_leave(SIM_FN_hsa_ven_amd_loader_loaded_code_object_get_info,
                   status, args, NULL, 0);
}

HSA_API hsa_status_t
hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size(
    hsa_file_t file, size_t offset, size_t size,
    hsa_code_object_reader_t* code_object_reader) {
  const sim_fn_t fn =
      SIM_FN_hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size;
  hsa_status_t status;
  if (sim_loader_enter(fn, &status)) {
    if (code_object_reader == NULL) {
      status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
    } else if (size == 0) {
      status = HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
    } else if (file < 0 || fcntl(file, F_GETFD) == -1) {
      status = HSA_STATUS_ERROR_INVALID_FILE;
    } else {
      status = HSA_STATUS_ERROR; /* no code object support */
    }
  }
  uint64_t args[6] = {(uint64_t)(int64_t)file, offset, size,
                      SIM_U64(code_object_reader), 0, 0};
  return sim_leave(fn, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_ven_amd_loader_iterate_executables(
    hsa_status_t (*callback)(hsa_executable_t executable, void* data),
    void* data) {
  hsa_status_t status;
  if (sim_loader_enter(SIM_FN_hsa_ven_amd_loader_iterate_executables, &status)) {
    /* No executable exists: nothing to visit. */
    status = callback == NULL ? HSA_STATUS_ERROR_INVALID_ARGUMENT
                              : HSA_STATUS_SUCCESS;
  }
  uint64_t args[6] = {SIM_U64(callback), SIM_U64(data), 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_ven_amd_loader_iterate_executables, status, args,
                   NULL, 0);
}
