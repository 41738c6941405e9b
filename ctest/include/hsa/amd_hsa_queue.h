/*
 * amdgpu-dropin test suite: stand-in for ROCr's hsa/amd_hsa_queue.h.
 *
 * Written for this project. IREE's libhsa.h includes this header; nothing
 * the project builds uses what the real one declares, so the stand-in only
 * provides the core API it builds on.
 */
#ifndef AMDGPU_DROPIN_TEST_AMD_HSA_QUEUE_H_
#define AMDGPU_DROPIN_TEST_AMD_HSA_QUEUE_H_

#include "hsa.h"

#endif /* AMDGPU_DROPIN_TEST_AMD_HSA_QUEUE_H_ */
