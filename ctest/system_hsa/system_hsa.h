/*
 * What a system HSA runtime (ROCr) in the process can run, said in words.
 * Used by the demo and the vmem suite when they run on the system ROCr
 * instead of the software runtime: a ROCr that predates the HSA
 * virtual-memory API cannot run the vmem half, and hsa_init fails on a
 * machine without an AMD GPU; both are reasons to skip (exit 77), not
 * failures, and the user is told which one applies.
 */
#ifndef AMDGPU_DROPIN_SYSTEM_HSA_H_
#define AMDGPU_DROPIN_SYSTEM_HSA_H_

#include <stdbool.h>

#include "hsa/hsa.h"

/* Exit code of a test or program that could not run (ctest SKIP_RETURN_CODE). */
#define SYSTEM_HSA_SKIP 77

/* The file of the library providing hsa_init in the process, or "?". */
const char* system_hsa_library(void);

/* Whether every HSA function IREE's libhsa table lists is in the process. If
 * not, prints (prefixed with `who`) that the vmem half cannot run on this
 * runtime and which functions it lacks. */
bool system_hsa_has_vmem_api(const char* who);

/* Prints why hsa_init failed: its status and HSA's text for it, and whether
 * the machine has an AMD GPU driver at all (/dev/kfd). */
void system_hsa_explain_init_failure(const char* who, hsa_status_t status);

/* For a vmem test on the system runtime: 0 when the API is there and
 * hsa_init succeeds (HSA is shut down again), else SYSTEM_HSA_SKIP with the
 * reason printed. */
int system_hsa_vmem_skip_code(const char* who);

#endif  // AMDGPU_DROPIN_SYSTEM_HSA_H_
