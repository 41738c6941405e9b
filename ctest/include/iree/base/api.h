/*
 * amdgpu-dropin test suite: a minimal stand-in for IREE's iree/base/api.h.
 *
 * Written for this project: only what the generated vmem.h and the tests
 * need, with IREE's names, values and layouts (docs/iree.md#layouts-shared-with-iree). It lets the C
 * suite compile the generated header exactly as an IREE tree would.
 */
#ifndef IREE_BASE_API_H_
#define IREE_BASE_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef size_t iree_host_size_t;
typedef size_t iree_device_size_t;

typedef enum iree_status_code_e {
  IREE_STATUS_OK = 0,
  IREE_STATUS_CANCELLED = 1,
  IREE_STATUS_UNKNOWN = 2,
  IREE_STATUS_INVALID_ARGUMENT = 3,
  IREE_STATUS_DEADLINE_EXCEEDED = 4,
  IREE_STATUS_NOT_FOUND = 5,
  IREE_STATUS_ALREADY_EXISTS = 6,
  IREE_STATUS_PERMISSION_DENIED = 7,
  IREE_STATUS_RESOURCE_EXHAUSTED = 8,
  IREE_STATUS_FAILED_PRECONDITION = 9,
  IREE_STATUS_ABORTED = 10,
  IREE_STATUS_OUT_OF_RANGE = 11,
  IREE_STATUS_UNIMPLEMENTED = 12,
  IREE_STATUS_INTERNAL = 13,
  IREE_STATUS_UNAVAILABLE = 14,
  IREE_STATUS_DATA_LOSS = 15,
  IREE_STATUS_UNAUTHENTICATED = 16,
  IREE_STATUS_DEFERRED = 17,
  IREE_STATUS_INCOMPATIBLE = 18,
} iree_status_code_t;

/* Pointer-sized; NULL is OK; the low 5 bits hold the code. */
typedef struct iree_status_handle_t* iree_status_t;

#define IREE_STATUS_CODE_MASK 0x1Fu

static inline iree_status_code_t iree_status_code(iree_status_t status) {
  return (iree_status_code_t)((uintptr_t)status & IREE_STATUS_CODE_MASK);
}
static inline bool iree_status_is_ok(iree_status_t status) {
  return status == NULL;
}

typedef struct iree_string_view_t {
  const char* data;
  iree_host_size_t size;
} iree_string_view_t;

/* IREE's status allocators. The tests that check messages define them (see
 * ctest/vmem/status_allocator.c, which keeps IREE's contract: the first
 * borrows `file` and `message`, the second copies the formatted message and
 * borrows `file`); others leave them undefined so the library must return
 * code-only statuses. */
iree_status_t iree_status_allocate(iree_status_code_t code, const char* file,
                                   uint32_t line, iree_string_view_t message);
iree_status_t iree_status_allocate_f(iree_status_code_t code, const char* file,
                                     uint32_t line, const char* format, ...);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* IREE_BASE_API_H_ */
