/*
 * Shared declarations of the vmem C suite.
 */
#ifndef AMDGPU_DROPIN_VMEM_TEST_H_
#define AMDGPU_DROPIN_VMEM_TEST_H_

#include "iree/hal/drivers/amdgpu/util/vmem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The message of a status from the stand-in allocator, NULL if code-only.
 * Read through the status's pointers at the time of the call, as
 * iree_status_format does. */
const char* vmem_test_status_message(iree_status_t status);
/* Formats a status like iree_status_format ("file:line: CODE n; message")
 * and returns its file and line; false for a code-only status. */
bool vmem_test_status_format(iree_status_t status, char* buffer, size_t size,
                             const char** out_file, uint32_t* out_line);
void vmem_test_status_free(iree_status_t status);
int vmem_test_live_statuses(void);

#endif  /* AMDGPU_DROPIN_VMEM_TEST_H_ */
