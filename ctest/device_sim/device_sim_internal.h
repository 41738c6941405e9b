/* Device simulator: helpers its protocol files share (not part of its API). */
#ifndef AMDGPU_DROPIN_DEVICE_SIM_INTERNAL_H
#define AMDGPU_DROPIN_DEVICE_SIM_INTERNAL_H

#include <stdint.h>

/* A wait's timeout when the caller gives 0. */
#define DEFAULT_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)

/* One step of a wait loop: a short busy pause first, then yield. */
void device_sim_wait_step(uint32_t iteration);
/* Now plus timeout_ns (0: the default of 10 s), in device_sim_now_ns time. */
uint64_t device_sim_deadline_after(uint64_t timeout_ns);
/* A wave's doorbell ring: the device library's release add of 1, whose
 * interrupt wakes only a sleeping waiter (see device_sim.h). */
void device_sim_ring(uint64_t doorbell);

#endif /* AMDGPU_DROPIN_DEVICE_SIM_INTERNAL_H */
