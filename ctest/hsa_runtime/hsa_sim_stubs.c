/*
 * Software HSA runtime: exported stubs for every function of the IREE libhsa
 * tables that the runtime does not implement. Each is its own function (its
 * own address, so dladdr names it) returning HSA_STATUS_ERROR; each counts
 * and traces its calls and honours fault injection like the real functions.
 *
 * Their C signatures are simplified to (void): nothing in the project calls
 * them, they only have to exist so that IREE-style tables can be filled by
 * dlsym and identified by name. With the System V calling convention a caller
 * that passes arguments to them is harmless. They are not declared in the
 * public headers.
 */
#include "hsa_sim_internal.h"

__attribute__((noinline)) static hsa_status_t sim_stub(sim_fn_t fn) {
  hsa_status_t status;
  if (!sim_enter(fn, &status)) status = HSA_STATUS_ERROR;
  return sim_leave(fn, status, NULL, NULL, 0);
}

#define SIM_IGNORE_(name)
#define SIM_STUB_(name)                                   \
  HSA_API hsa_status_t name(void);                        \
  HSA_API hsa_status_t name(void) { return sim_stub(SIM_FN_##name); }

HSA_SIM_FUNCTIONS(SIM_IGNORE_, SIM_STUB_)
