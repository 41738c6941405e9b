/* The exit path on a runtime without hsa_system_get_info (the software
 * runtime built without that export, and no other HSA library loadable):
 * exit cannot ask whether HSA still answers, so it does not ring the
 * doorbell, and its log line says that the function is missing, not that
 * HSA no longer answers. */
#include <stdlib.h>
#include <string.h>

#include "hc_test.h"
#include "hsa/hsa.h"
#include "rochostcall.hpp"

/* The child: one buffer enabled (listener started), then exit(3). */
static int child_exit_enabled(void) {
  if (hsa_init() != HSA_STATUS_SUCCESS) return 2;
  static uint64_t words[4096] __attribute__((aligned(4096)));
  if (!enableHostcalls(words, 4, NULL)) return 3;
  exit(0);
}

static void test_exit_names_the_missing_function(void) {
  const char* const env[] = {"AMD_LOG_LEVEL=4", NULL};
  hc_child_result_t r;
  HC_CHILD_OK("exit_enabled", env, HC_CHILD_TIMEOUT_MS, &r);
  DROPIN_CHECK_MSG(hc_contains(r.err, "no doorbell ring"), "exit logged nothing about its ring: %s", r.err);
  DROPIN_CHECK_MSG(hc_contains(r.err, "has no hsa_system_get_info"), "the missing function is not named: %s", r.err);
  DROPIN_CHECK_MSG(!hc_contains(r.err, "no longer answers"), "misleading line: %s", r.err);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {{"exit_enabled", child_exit_enabled}, {NULL, NULL}};
  hc_child_main(argc, argv, cases);
  HC_RUN(test_exit_names_the_missing_function);
  return dropin_check_exit_code();
}
