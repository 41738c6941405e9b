/*
 * amdgpu-dropin test suite: IREE's copy of the HSA headers, as IREE's own
 * libhsa.h includes them (third_party/hsa-runtime-headers/include/hsa/, relative
 * to IREE's root). Here it forwards to the suite's stand-in for ROCr's header.
 */
#include "../../../../hsa/hsa.h"
