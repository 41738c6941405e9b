/* See system_hsa.h. */
#define _GNU_SOURCE
#include "system_hsa.h"

#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

#include "iree/hal/drivers/amdgpu/util/libhsa.h"

const char* system_hsa_library(void) {
  Dl_info info;
  void* symbol = dlsym(RTLD_DEFAULT, "hsa_init");
  return symbol && dladdr(symbol, &info) && info.dli_fname ? info.dli_fname : "?";
}

bool system_hsa_has_vmem_api(const char* who) {
  enum { kShown = 6 };
  const char* missing[kShown];
  size_t missing_count = 0;
  size_t total = 0;
#define SYSTEM_HSA_CHECK(name)                                \
  ++total;                                                    \
  if (dlsym(RTLD_DEFAULT, #name) == NULL) {                   \
    if (missing_count < kShown) missing[missing_count] = #name; \
    ++missing_count;                                          \
  }
  IREE_TEST_LIBHSA_ENTRIES(SYSTEM_HSA_CHECK)
#undef SYSTEM_HSA_CHECK
  if (missing_count == 0) return true;
  printf("%s: vmem skipped: the HSA runtime %s predates the API IREE's vmem uses "
         "(HSA virtual memory and dma-buf export): it lacks %zu of the %zu functions of IREE's "
         "HSA table:",
         who, system_hsa_library(), missing_count, total);
  for (size_t i = 0; i < missing_count && i < kShown; ++i) printf(" %s", missing[i]);
  printf("%s\n", missing_count > kShown ? " ..." : "");
  return false;
}

void system_hsa_explain_init_failure(const char* who, hsa_status_t status) {
  const char* text = NULL;
  if (hsa_status_string(status, &text) != HSA_STATUS_SUCCESS || text == NULL) text = "(no text)";
  printf("%s: hsa_init failed with status 0x%x: %s\n", who, (unsigned)status, text);
  if (access("/dev/kfd", F_OK) != 0) {
    printf("%s: this machine has no AMD GPU driver (/dev/kfd is absent), so ROCr cannot start: "
           "nothing that needs HSA can run here\n",
           who);
  } else if (access("/dev/kfd", R_OK | W_OK) != 0) {
    printf("%s: /dev/kfd exists but this user cannot open it (add the user to the render "
           "and video groups)\n",
           who);
  }
}

int system_hsa_vmem_skip_code(const char* who) {
  if (!system_hsa_has_vmem_api(who)) return SYSTEM_HSA_SKIP;
  hsa_status_t status = hsa_init();
  if (status != HSA_STATUS_SUCCESS) {
    system_hsa_explain_init_failure(who, status);
    return SYSTEM_HSA_SKIP;
  }
  hsa_shut_down();
  return 0;
}
