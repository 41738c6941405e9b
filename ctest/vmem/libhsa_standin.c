/*
 * Fills the stand-in iree_hal_amdgpu_libhsa_t the way IREE does: each table
 * entry resolved with dlsym by its symbol name, then the AMD loader extension
 * table queried. Compiled once per table layout (IREE_TEST_LIBHSA_LAYOUT).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "iree/hal/drivers/amdgpu/util/libhsa.h"

bool iree_test_libhsa_initialize(iree_hal_amdgpu_libhsa_t* out_libhsa,
                                 const char** out_missing) {
  memset(out_libhsa, 0, sizeof(*out_libhsa));
  *out_missing = NULL;
  out_libhsa->initialized = true;
#if !IREE_HAL_AMDGPU_LIBHSA_STATIC
  /* ISO C has no object-to-function pointer conversion: copy the bits. */
#define IREE_TEST_RESOLVE(name)                                 \
  do {                                                          \
    void* symbol = dlsym(RTLD_DEFAULT, #name);                  \
    if (!symbol && !*out_missing) *out_missing = #name;         \
    memcpy(&out_libhsa->name, &symbol, sizeof(symbol));         \
  } while (0);
  IREE_TEST_LIBHSA_ENTRIES(IREE_TEST_RESOLVE)
#undef IREE_TEST_RESOLVE
#endif
  /* As IREE after hsa_init: the AMD loader extension table, version 1
   * (inside its own init/shutdown pair: callers may not have initialized HSA
   * yet). */
  if (*out_missing == NULL) {
    if (hsa_init() != HSA_STATUS_SUCCESS) {
      *out_missing = "hsa_init";
    } else {
      if (hsa_system_get_major_extension_table(
              HSA_EXTENSION_AMD_LOADER, 1, sizeof(out_libhsa->amd_loader),
              &out_libhsa->amd_loader) != HSA_STATUS_SUCCESS) {
        *out_missing = "the HSA_EXTENSION_AMD_LOADER table";
      }
      hsa_shut_down();
    }
  }
  return *out_missing == NULL;
}

void (**iree_test_libhsa_slot(iree_hal_amdgpu_libhsa_t* libhsa,
                              const char* name))(void) {
#if !IREE_HAL_AMDGPU_LIBHSA_STATIC
#define IREE_TEST_SLOT(entry) \
  if (strcmp(name, #entry) == 0) return &libhsa->entry;
  IREE_TEST_LIBHSA_ENTRIES(IREE_TEST_SLOT)
#undef IREE_TEST_SLOT
#else
  (void)libhsa;
  (void)name;
#endif
  return NULL;
}
