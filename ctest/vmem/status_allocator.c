/*
 * A stand-in for IREE's status allocator, linked (and exported with
 * ENABLE_EXPORTS) into the test binaries that check status messages. The
 * library finds `iree_status_allocate` in the process and uses it; the
 * statuses it returns keep the code in the low 5 bits, as IREE's do.
 */
#include <stdlib.h>
#include <string.h>

#include "vmem_test.h"

typedef struct test_status_t {
  _Alignas(32) iree_status_code_t code;
  char message[512];
} test_status_t;

static int live_statuses = 0;

iree_status_t iree_status_allocate(iree_status_code_t code, const char* file,
                                   uint32_t line, iree_string_view_t message) {
  (void)file;
  (void)line;
  test_status_t* status = aligned_alloc(32, sizeof(test_status_t));
  if (!status) return (iree_status_t)(uintptr_t)code;
  status->code = code;
  size_t n = message.size < sizeof(status->message) - 1
                 ? message.size
                 : sizeof(status->message) - 1;
  memcpy(status->message, message.data, n);
  status->message[n] = 0;
  ++live_statuses;
  return (iree_status_t)((uintptr_t)status | (uintptr_t)code);
}

const char* vmem_test_status_message(iree_status_t status) {
  if ((uintptr_t)status <= IREE_STATUS_CODE_MASK) return NULL;
  test_status_t* s =
      (test_status_t*)((uintptr_t)status & ~(uintptr_t)IREE_STATUS_CODE_MASK);
  return s->message;
}

void vmem_test_status_free(iree_status_t status) {
  if ((uintptr_t)status <= IREE_STATUS_CODE_MASK) return;
  free((void*)((uintptr_t)status & ~(uintptr_t)IREE_STATUS_CODE_MASK));
  --live_statuses;
}

int vmem_test_live_statuses(void) { return live_statuses; }
