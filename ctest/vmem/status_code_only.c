/*
 * For the test binary without an IREE status allocator: every status the
 * library returns must be code-only (the code itself as the pointer value).
 */
#include "vmem_test.h"

const char* vmem_test_status_message(iree_status_t status) {
  (void)status;
  return NULL;
}

bool vmem_test_status_format(iree_status_t status, char* buffer, size_t size,
                             const char** out_file, uint32_t* out_line) {
  (void)status;
  (void)buffer;
  (void)size;
  (void)out_file;
  (void)out_line;
  return false;
}

void vmem_test_status_free(iree_status_t status) { (void)status; }

int vmem_test_live_statuses(void) { return 0; }
