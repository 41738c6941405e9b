/*
 * amdgpu-dropin test suite: a minimal stand-in for IREE's
 * iree/hal/drivers/amdgpu/util/libhsa.h.
 *
 * Written for this project. It reproduces the layout of IREE's
 * iree_hal_amdgpu_libhsa_t (docs/iree.md#layouts-shared-with-iree): `bool initialized`, the library
 * handle, one function pointer per table entry, then the loader extension
 * table. The entry order is the one of the IREE version selected with
 * IREE_TEST_LIBHSA_LAYOUT (the orders are the data of the three IREE
 * versions, docs/iree.md#layouts-shared-with-iree):
 *   1  Jun 2025: 116 entries (hsa_amd_vmem_address_reserve_align at 32)
 *   2  Apr 2026: 117 entries (+ hsa_amd_memory_lock, reserve at 33)
 *   3  Aug 2026: 118 entries (+ hsa_amd_memory_async_copy, reserve at 34)
 * With IREE_HAL_AMDGPU_LIBHSA_STATIC=1 the struct holds no table, as IREE's.
 * iree_test_libhsa_initialize (libhsa_standin.c) fills the table with dlsym
 * by symbol name and queries the AMD loader extension table, as IREE does.
 */
#ifndef IREE_HAL_DRIVERS_AMDGPU_UTIL_LIBHSA_H_
#define IREE_HAL_DRIVERS_AMDGPU_UTIL_LIBHSA_H_

#include "iree/base/api.h"

/* As IREE's own libhsa.h: IREE's copy of the HSA headers, relative to IREE's
 * root (so a caller's include dirs need IREE's root, not only runtime/src). */
#include "third_party/hsa-runtime-headers/include/hsa/amd_hsa_queue.h"
#include "third_party/hsa-runtime-headers/include/hsa/amd_hsa_signal.h"
#include "third_party/hsa-runtime-headers/include/hsa/hsa.h"
#include "third_party/hsa-runtime-headers/include/hsa/hsa_ext_amd.h"
#include "third_party/hsa-runtime-headers/include/hsa/hsa_ven_amd_loader.h"

#ifdef __cplusplus
extern "C" {
#endif

#if !defined(IREE_HAL_AMDGPU_LIBHSA_STATIC)
#define IREE_HAL_AMDGPU_LIBHSA_STATIC 0
#endif

#if !defined(IREE_TEST_LIBHSA_LAYOUT)
#define IREE_TEST_LIBHSA_LAYOUT 3
#endif

/* Annotation IREE puts on device pointers; expands to nothing. */
#if !defined(IREE_AMDGPU_DEVICE_PTR)
#define IREE_AMDGPU_DEVICE_PTR
#endif

#if IREE_TEST_LIBHSA_LAYOUT >= 2
#define IREE_TEST_LIBHSA_IF_APR2026(x) x
#else
#define IREE_TEST_LIBHSA_IF_APR2026(x)
#endif
#if IREE_TEST_LIBHSA_LAYOUT >= 3
#define IREE_TEST_LIBHSA_IF_AUG2026(x) x
#else
#define IREE_TEST_LIBHSA_IF_AUG2026(x)
#endif

/* The table entries in order, for the selected layout. */
#define IREE_TEST_LIBHSA_ENTRIES(X) \
  X(hsa_init) \
  X(hsa_shut_down) \
  X(hsa_amd_register_system_event_handler) \
  X(hsa_system_get_info) \
  X(hsa_system_major_extension_supported) \
  X(hsa_system_get_major_extension_table) \
  X(hsa_agent_get_info) \
  X(hsa_iterate_agents) \
  X(hsa_cache_get_info) \
  X(hsa_agent_iterate_caches) \
  X(hsa_region_get_info) \
  X(hsa_agent_iterate_regions) \
  X(hsa_amd_memory_pool_get_info) \
  X(hsa_amd_agent_iterate_memory_pools) \
  X(hsa_amd_agent_memory_pool_get_info) \
  X(hsa_amd_agents_allow_access) \
  X(hsa_memory_copy) \
  IREE_TEST_LIBHSA_IF_AUG2026(X(hsa_amd_memory_async_copy)) \
  X(hsa_amd_memory_pool_allocate) \
  X(hsa_amd_memory_pool_free) \
  IREE_TEST_LIBHSA_IF_APR2026(X(hsa_amd_memory_lock)) \
  X(hsa_amd_memory_lock_to_pool) \
  X(hsa_amd_memory_unlock) \
  X(hsa_amd_interop_map_buffer) \
  X(hsa_amd_interop_unmap_buffer) \
  X(hsa_amd_pointer_info) \
  X(hsa_amd_ipc_memory_create) \
  X(hsa_amd_ipc_memory_attach) \
  X(hsa_amd_ipc_memory_detach) \
  X(hsa_amd_portable_export_dmabuf) \
  X(hsa_amd_portable_close_dmabuf) \
  X(hsa_amd_svm_attributes_get) \
  X(hsa_amd_svm_attributes_set) \
  X(hsa_amd_svm_prefetch_async) \
  X(hsa_amd_vmem_address_reserve_align) \
  X(hsa_amd_vmem_address_free) \
  X(hsa_amd_vmem_set_access) \
  X(hsa_amd_vmem_handle_create) \
  X(hsa_amd_vmem_handle_release) \
  X(hsa_amd_vmem_map) \
  X(hsa_amd_vmem_unmap) \
  X(hsa_amd_signal_create) \
  X(hsa_signal_destroy) \
  X(hsa_signal_load_scacquire) \
  X(hsa_signal_load_relaxed) \
  X(hsa_signal_store_relaxed) \
  X(hsa_signal_store_screlease) \
  X(hsa_signal_silent_store_relaxed) \
  X(hsa_signal_silent_store_screlease) \
  X(hsa_signal_exchange_scacq_screl) \
  X(hsa_signal_exchange_scacquire) \
  X(hsa_signal_exchange_relaxed) \
  X(hsa_signal_exchange_screlease) \
  X(hsa_signal_cas_scacq_screl) \
  X(hsa_signal_cas_scacquire) \
  X(hsa_signal_cas_relaxed) \
  X(hsa_signal_cas_screlease) \
  X(hsa_signal_add_scacq_screl) \
  X(hsa_signal_add_scacquire) \
  X(hsa_signal_add_relaxed) \
  X(hsa_signal_add_screlease) \
  X(hsa_signal_subtract_scacq_screl) \
  X(hsa_signal_subtract_scacquire) \
  X(hsa_signal_subtract_relaxed) \
  X(hsa_signal_subtract_screlease) \
  X(hsa_signal_and_scacq_screl) \
  X(hsa_signal_and_scacquire) \
  X(hsa_signal_and_relaxed) \
  X(hsa_signal_and_screlease) \
  X(hsa_signal_or_scacq_screl) \
  X(hsa_signal_or_scacquire) \
  X(hsa_signal_or_relaxed) \
  X(hsa_signal_or_screlease) \
  X(hsa_signal_xor_scacq_screl) \
  X(hsa_signal_xor_scacquire) \
  X(hsa_signal_xor_relaxed) \
  X(hsa_signal_xor_screlease) \
  X(hsa_signal_wait_scacquire) \
  X(hsa_signal_wait_relaxed) \
  X(hsa_amd_signal_wait_all) \
  X(hsa_amd_signal_wait_any) \
  X(hsa_amd_ipc_signal_create) \
  X(hsa_amd_ipc_signal_attach) \
  X(hsa_queue_create) \
  X(hsa_soft_queue_create) \
  X(hsa_queue_destroy) \
  X(hsa_queue_inactivate) \
  X(hsa_amd_profiling_set_profiler_enabled) \
  X(hsa_amd_queue_get_info) \
  X(hsa_amd_queue_cu_set_mask) \
  X(hsa_amd_queue_set_priority) \
  X(hsa_queue_load_read_index_scacquire) \
  X(hsa_queue_load_read_index_relaxed) \
  X(hsa_queue_load_write_index_relaxed) \
  X(hsa_queue_load_write_index_scacquire) \
  X(hsa_queue_store_write_index_relaxed) \
  X(hsa_queue_store_write_index_screlease) \
  X(hsa_queue_cas_write_index_scacq_screl) \
  X(hsa_queue_cas_write_index_scacquire) \
  X(hsa_queue_cas_write_index_relaxed) \
  X(hsa_queue_cas_write_index_screlease) \
  X(hsa_queue_add_write_index_scacq_screl) \
  X(hsa_queue_add_write_index_scacquire) \
  X(hsa_queue_add_write_index_relaxed) \
  X(hsa_queue_add_write_index_screlease) \
  X(hsa_queue_store_read_index_relaxed) \
  X(hsa_queue_store_read_index_screlease) \
  X(hsa_agent_iterate_isas) \
  X(hsa_isa_get_info_alt) \
  X(hsa_code_object_reader_create_from_memory) \
  X(hsa_code_object_reader_destroy) \
  X(hsa_executable_create_alt) \
  X(hsa_executable_destroy) \
  X(hsa_executable_load_agent_code_object) \
  X(hsa_executable_freeze) \
  X(hsa_executable_validate_alt) \
  X(hsa_executable_get_symbol_by_name) \
  X(hsa_executable_symbol_get_info)

#define IREE_TEST_LIBHSA_ENTRY_COUNT (116 + (IREE_TEST_LIBHSA_LAYOUT >= 2) + (IREE_TEST_LIBHSA_LAYOUT >= 3))

typedef struct iree_dynamic_library_t iree_dynamic_library_t;

typedef struct iree_hal_amdgpu_libhsa_t {
  bool initialized;
#if !IREE_HAL_AMDGPU_LIBHSA_STATIC
  iree_dynamic_library_t* library;
#define IREE_TEST_LIBHSA_FIELD(name) void (*name)(void);
  IREE_TEST_LIBHSA_ENTRIES(IREE_TEST_LIBHSA_FIELD)
#undef IREE_TEST_LIBHSA_FIELD
#endif  /* !IREE_HAL_AMDGPU_LIBHSA_STATIC */
  hsa_ven_amd_loader_1_03_pfn_t amd_loader;
} iree_hal_amdgpu_libhsa_t;

/* Fills *out_libhsa: every entry resolved with dlsym by its symbol name from
 * the process (the HSA runtime is linked in). Returns false and names the
 * first entry that could not be resolved in *out_missing. */
bool iree_test_libhsa_initialize(iree_hal_amdgpu_libhsa_t* out_libhsa,
                                 const char** out_missing);

/* The table's slot of function `name` (dynamic mode), or NULL. */
void (**iree_test_libhsa_slot(iree_hal_amdgpu_libhsa_t* libhsa,
                              const char* name))(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* IREE_HAL_DRIVERS_AMDGPU_UTIL_LIBHSA_H_ */
