/*
 * For the test binary without an IREE status allocator: every status the
 * library returns must be code-only (the code itself as the pointer value).
 */
#include "vmem_test.h"

const char* vmem_test_status_message(iree_status_t status) {
  (void)status;
  return NULL;
}

void vmem_test_status_free(iree_status_t status) { (void)status; }

int vmem_test_live_statuses(void) { return 0; }
