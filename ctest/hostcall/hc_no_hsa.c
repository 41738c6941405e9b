/* No HSA runtime: this binary does not link one, and AMDGPU_DROPIN_HSA_LIBRARY
 * (set by ctest) names a library that does not exist. enableHostcalls must
 * return false with a clear log line, and nothing may crash. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "hc_test.h"
#include "rochostcall.hpp"

static int child_enable(void) {
  size_t size = getHostcallBufferSize(4);
  void* buffer = NULL;
  if (posix_memalign(&buffer, 4096, size) != 0) return 2;
  memset(buffer, 0, size);
  int threads0 = hc_thread_count();
  for (int i = 0; i < 3; ++i) {
    if (enableHostcalls(buffer, 4, NULL)) {
      fprintf(stderr, "enableHostcalls returned true without HSA\n");
      return 1;
    }
  }
  disableHostcalls(buffer, NULL);
  if (hc_thread_count() != threads0) {
    fprintf(stderr, "a thread was left running\n");
    return 1;
  }
  /* The pure functions work without HSA. */
  if (getHostcallBufferSize(2) != 48 + 48 + 8192 || getHostcallBufferAlignment() != 8) return 1;
  free(buffer);
  return 0;
}

static void test_enable_without_hsa(void) {
  const char* lib = getenv("AMDGPU_DROPIN_HSA_LIBRARY");
  DROPIN_REQUIRE_MSG(lib != NULL && *lib != '\0', "ctest must set AMDGPU_DROPIN_HSA_LIBRARY");
  DROPIN_CHECK_MSG(child_enable() == 0, "in process");
  /* With logging on, the failure says why. */
  static const char* const env[] = {"AMD_LOG_LEVEL=1", NULL};
  hc_child_result_t r;
  HC_CHILD_OK("enable", env, 10000, &r);
  DROPIN_CHECK_MSG(hc_contains(r.err, "amdgpu-dropin") && hc_contains(r.err, "HSA"),
           "no log line about the missing HSA runtime; stderr: %s", r.err);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {{"enable", child_enable}, {NULL, NULL}};
  hc_child_main(argc, argv, cases);
  HC_RUN(test_enable_without_hsa);
  return dropin_check_exit_code();
}
