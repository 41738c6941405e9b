/*
 * Fills the stand-in iree_hal_amdgpu_libhsa_t the way IREE does: each table
 * entry resolved with dlsym by its symbol name. Compiled once per table
 * layout (IREE_TEST_LIBHSA_LAYOUT).
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
