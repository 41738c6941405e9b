/*
 * A stand-in for IREE's status allocator, linked (and exported with
 * ENABLE_EXPORTS, or bound through the library's weak reference) into the
 * test binaries that check status messages.
 *
 * It keeps IREE's contract exactly (runtime/src/iree/base/status.c), and is
 * never kinder than it:
 *   - iree_status_allocate(code, file, line, message) stores the `file` and
 *     `message` pointers as given and copies neither: IREE expects both to be
 *     string literals that outlive the status.
 *   - iree_status_allocate_f(code, file, line, format, ...) formats the
 *     message with printf rules into the status's own storage (a copy) and
 *     borrows `file`.
 *   - An OK code gives the OK status (NULL); when storage cannot be allocated
 *     the status is code-only (the code as the pointer value). Statuses keep
 *     the code in their low 5 bits.
 *   - Nothing borrowed is read at allocation time: like iree_status_format,
 *     vmem_test_status_message / vmem_test_status_format read `file` and
 *     `message` only when the test formats the status, after the call that
 *     made it returned. A borrowed pointer into memory freed meanwhile is
 *     then a heap-use-after-free under ASan (and garbage without it).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmem_test.h"

typedef struct test_status_t {
  _Alignas(32) iree_status_code_t code;
  const char* file;   /* borrowed, as IREE */
  uint32_t line;
  iree_string_view_t message; /* borrowed, or points at `storage` */
  char storage[];     /* the formatted message of iree_status_allocate_f */
} test_status_t;

static _Atomic int live_statuses = 0;

static iree_status_t test_status_wrap(test_status_t* status,
                                      iree_status_code_t code) {
  ++live_statuses;
  return (iree_status_t)((uintptr_t)status | (uintptr_t)code);
}

static test_status_t* test_status_unwrap(iree_status_t status) {
  if ((uintptr_t)status <= IREE_STATUS_CODE_MASK) return NULL;
  return (test_status_t*)((uintptr_t)status & ~(uintptr_t)IREE_STATUS_CODE_MASK);
}

iree_status_t iree_status_allocate(iree_status_code_t code, const char* file,
                                   uint32_t line, iree_string_view_t message) {
  if (code == IREE_STATUS_OK) return NULL;
  test_status_t* status = aligned_alloc(32, sizeof(test_status_t));
  if (!status) return (iree_status_t)(uintptr_t)code;
  status->code = code;
  status->file = file;
  status->line = line;
  status->message = message; /* borrowed: not copied, as IREE */
  return test_status_wrap(status, code);
}

iree_status_t iree_status_allocate_f(iree_status_code_t code, const char* file,
                                     uint32_t line, const char* format, ...) {
  if (code == IREE_STATUS_OK) return NULL;
  va_list args, measure;
  va_start(args, format);
  va_copy(measure, args);
  int length = vsnprintf(NULL, 0, format, measure);
  va_end(measure);
  if (length < 0) {
    va_end(args);
    return (iree_status_t)(uintptr_t)code;
  }
  size_t size = sizeof(test_status_t) + (size_t)length + 1;
  size = (size + 31) & ~(size_t)31; /* aligned_alloc wants a multiple */
  test_status_t* status = aligned_alloc(32, size);
  if (!status) {
    va_end(args);
    return (iree_status_t)(uintptr_t)code;
  }
  vsnprintf(status->storage, (size_t)length + 1, format, args);
  va_end(args);
  status->code = code;
  status->file = file;
  status->line = line;
  status->message.data = status->storage;
  status->message.size = (iree_host_size_t)length;
  return test_status_wrap(status, code);
}

/* The message (read through the status's pointer now), NULL if code-only.
 * Valid until the next call or vmem_test_status_free. */
const char* vmem_test_status_message(iree_status_t status) {
  static _Thread_local char buffer[1024];
  test_status_t* s = test_status_unwrap(status);
  if (!s) return NULL;
  size_t n = s->message.size < sizeof(buffer) - 1 ? s->message.size
                                                  : sizeof(buffer) - 1;
  memcpy(buffer, s->message.data, n);
  buffer[n] = 0;
  return buffer;
}

/* As iree_status_format: "file:line: CODE <n>; message". False if code-only.
 * The message is copied with memcpy (which ASan always checks), the file
 * read with strlen. */
bool vmem_test_status_format(iree_status_t status, char* buffer, size_t size,
                             const char** out_file, uint32_t* out_line) {
  test_status_t* s = test_status_unwrap(status);
  if (!s || size == 0) return false;
  const char* file = s->file ? s->file : "(null)";
  int prefix = snprintf(buffer, size, "%.*s:%u: CODE %d; ", (int)strlen(file),
                        file, s->line, (int)s->code);
  size_t used = prefix < 0 ? 0 : (size_t)prefix;
  if (used < size - 1) {
    size_t n = s->message.size < size - 1 - used ? s->message.size
                                                 : size - 1 - used;
    memcpy(buffer + used, s->message.data, n);
    buffer[used + n] = 0;
  }
  *out_file = s->file;
  *out_line = s->line;
  return true;
}

void vmem_test_status_free(iree_status_t status) {
  test_status_t* s = test_status_unwrap(status);
  if (!s) return;
  free(s);
  --live_statuses;
}

int vmem_test_live_statuses(void) { return live_statuses; }
