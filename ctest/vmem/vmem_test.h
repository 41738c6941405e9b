/*
 * Shared declarations of the vmem C suite.
 */
#ifndef AMDGPU_DROPIN_VMEM_TEST_H_
#define AMDGPU_DROPIN_VMEM_TEST_H_

#include "iree/hal/drivers/amdgpu/util/vmem.h"

/* The message of a status from the stand-in allocator, NULL if code-only. */
const char* vmem_test_status_message(iree_status_t status);
void vmem_test_status_free(iree_status_t status);
int vmem_test_live_statuses(void);

#endif  /* AMDGPU_DROPIN_VMEM_TEST_H_ */
