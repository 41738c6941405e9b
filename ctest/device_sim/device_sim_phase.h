/* Device simulator, phase-bit protocol: host threads that behave like GPU
 * waves of device code built with the ROCm device libraries' second hostcall
 * protocol (USE_NEW_HOSTCALL_IMPL).
 *
 * Per call, as the device library does it (the first active lane acts for
 * the wave):
 *
 *   1. claim: for i = 0, 1, ... (wrapping at num_packets, pausing after a
 *      pass that found nothing): fetch_or bit i%32 of occupied[i/32]
 *      (acquire; the device library uses relaxed, see step 7);
 *      if the bit was already set, try the next packet; if it was clear but
 *      device_phase[i] != host_phase[i] (the host still owns the packet),
 *      clear the bit again and try the next one;
 *   2. fill: header {activemask, service} and each active lane's 8 words,
 *      plain stores;
 *   3. publish: device_phase[i] ^= 1 with a release store;
 *   4. ring: add 1 to the doorbell signal only if at least
 *      DEVICE_SIM_PHASE_THROTTLE_TICKS ticks of the 100 MHz steady counter
 *      passed since the last ring of this (simulated) device;
 *   5. wait until host_phase[i] == device_phase[i] (acquire), with a timeout
 *      so a broken listener fails a test instead of hanging it;
 *   6. read slot[0..1] of each active lane;
 *   7. clear the occupancy bit (release). The device library clears it
 *      relaxed, which on a GPU lets the answer loads of step 6 still be in
 *      flight when the next wave's request stores land (it then reads that
 *      request as its answer); the simulator uses the fixed release clear and
 *      acquire claim (docs/phase-bit-device-ordering.md).
 *
 * The layout is described here independently of the library (_Static_assert
 * pins), so the simulator checks the library's layout rather than sharing it.
 *
 * device_sim_hostcall (device_sim.h) speaks this protocol for a buffer
 * attached with device_sim_phase_attach, so every helper built on it (printf,
 * DEVMEM, SANITIZER encoders, the wave drivers) works on both protocols.
 * The step functions below craft malformed traffic.
 */
#ifndef AMDGPU_DROPIN_DEVICE_SIM_PHASE_H
#define AMDGPU_DROPIN_DEVICE_SIM_PHASE_H

#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device_sim.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEVICE_SIM_PHASE_PREFIX_SIZE 56u
#define DEVICE_SIM_PHASE_HEADER_SIZE 16u
/* Doorbell throttle: ticks of the 100 MHz steady counter (~10 us). */
#define DEVICE_SIM_PHASE_THROTTLE_TICKS 1000u
/* The steady counter runs at 100 MHz: one tick per 10 ns. */
#define DEVICE_SIM_PHASE_NS_PER_TICK 10u

#ifndef __cplusplus
typedef struct device_sim_phase_prefix {
  uint64_t device_phase; /* address of device_phase[0] (u32 each) */
  uint64_t host_phase;   /* address of host_phase[0] */
  uint64_t occupied;     /* address of the occupancy bitmap (u32 words) */
  uint64_t headers;      /* address of packet header 0 */
  uint64_t payloads;     /* address of payload 0 */
  uint64_t doorbell;     /* hsa_signal_t handle */
  uint32_t num_packets;
  uint32_t reserved;
} device_sim_phase_prefix_t;

typedef struct device_sim_phase_header {
  uint64_t activemask;
  uint32_t service;
  uint32_t reserved;
} device_sim_phase_header_t;

_Static_assert(sizeof(device_sim_phase_prefix_t) == DEVICE_SIM_PHASE_PREFIX_SIZE, "prefix size");
_Static_assert(offsetof(device_sim_phase_prefix_t, device_phase) == 0, "device_phase offset");
_Static_assert(offsetof(device_sim_phase_prefix_t, host_phase) == 8, "host_phase offset");
_Static_assert(offsetof(device_sim_phase_prefix_t, occupied) == 16, "occupied offset");
_Static_assert(offsetof(device_sim_phase_prefix_t, headers) == 24, "headers offset");
_Static_assert(offsetof(device_sim_phase_prefix_t, payloads) == 32, "payloads offset");
_Static_assert(offsetof(device_sim_phase_prefix_t, doorbell) == 40, "doorbell offset");
_Static_assert(offsetof(device_sim_phase_prefix_t, num_packets) == 48, "num_packets offset");
_Static_assert(sizeof(device_sim_phase_header_t) == DEVICE_SIM_PHASE_HEADER_SIZE, "header size");
_Static_assert(offsetof(device_sim_phase_header_t, activemask) == 0, "activemask offset");
_Static_assert(offsetof(device_sim_phase_header_t, service) == 8, "service offset");

static inline device_sim_phase_prefix_t* device_sim_phase_prefix(void* buffer) {
  return (device_sim_phase_prefix_t*)buffer;
}
/* Phase words and the bitmap, found through the prefix as device code finds
 * them. No bounds check: tests index past num_packets on purpose. */
static inline _Atomic uint32_t* device_sim_phase_device(void* buffer, uint32_t index) {
  return (_Atomic uint32_t*)(uintptr_t)device_sim_phase_prefix(buffer)->device_phase + index;
}
static inline _Atomic uint32_t* device_sim_phase_host(void* buffer, uint32_t index) {
  return (_Atomic uint32_t*)(uintptr_t)device_sim_phase_prefix(buffer)->host_phase + index;
}
static inline _Atomic uint32_t* device_sim_phase_occupied(void* buffer) {
  return (_Atomic uint32_t*)(uintptr_t)device_sim_phase_prefix(buffer)->occupied;
}
static inline device_sim_phase_header_t* device_sim_phase_header(void* buffer, uint32_t index) {
  return (device_sim_phase_header_t*)(uintptr_t)device_sim_phase_prefix(buffer)->headers + index;
}
static inline device_sim_payload_t* device_sim_phase_payload(void* buffer, uint32_t index) {
  return (device_sim_payload_t*)(uintptr_t)device_sim_phase_prefix(buffer)->payloads + index;
}
#endif /* !__cplusplus */

/* Layout computed from the placement rules, independently of the library:
 * prefix 56 bytes; device phases (u32) at 56; host phases right after; 16-byte
 * headers 8-aligned; 4096-byte payloads 8-aligned. */
size_t device_sim_phase_host_phase_offset(uint32_t num_packets);
size_t device_sim_phase_headers_offset(uint32_t num_packets);
size_t device_sim_phase_payloads_offset(uint32_t num_packets);
size_t device_sim_phase_buffer_size(uint32_t num_packets);
/* Bytes of the occupancy bitmap: ceil(n / 32) 32-bit words. */
size_t device_sim_phase_occupancy_size(uint32_t num_packets);

/* Marks `buffer` as a phase-bit buffer for device_sim_hostcall (as a kernel
 * built for that protocol would use it); detach before freeing it. At most
 * 64 buffers at once; returns false when full or buffer is NULL. */
bool device_sim_phase_attach(void* buffer);
void device_sim_phase_detach(void* buffer);
bool device_sim_phase_is_attached(const void* buffer);

/* The whole protocol for one wave (steps 1-7), as device_sim_hostcall. On
 * DEVICE_SIM_ERR_TIMEOUT the packet stays claimed (a real wave would still
 * be waiting on it). */
int device_sim_phase_hostcall(void* buffer, uint32_t service, uint64_t activemask,
                              uint64_t lanes[64][8], uint64_t timeout_ns);

/* ---- Steps, for crafting traffic -------------------------------------- */

/* Step 1: claims a packet into *index_out, retrying until timeout_ns. */
int device_sim_phase_claim(void* buffer, uint32_t* index_out, uint64_t timeout_ns);
/* Sets occupancy bit `index` without any request (no bounds check against
 * num_packets beyond the bitmap's words). Returns the previous bit. */
bool device_sim_phase_set_bit(void* buffer, uint32_t index);
/* Step 7 alone: clears occupancy bit `index`. */
void device_sim_phase_clear_bit(void* buffer, uint32_t index);
/* Step 2. */
void device_sim_phase_fill(void* buffer, uint32_t index, uint32_t service, uint64_t activemask,
                           const uint64_t lanes[64][8]);
/* Step 3: flips device_phase[index] (release). `index` is not checked, so a
 * test can flip a phase word past num_packets. */
void device_sim_phase_flip(void* buffer, uint32_t index);
/* Step 4, throttled as the device library does; returns true if it rang. */
bool device_sim_phase_ring_throttled(void* buffer);
/* A ring with no throttle (a test's or benchmark's rescue of a lost ring). */
void device_sim_phase_ring(void* buffer);
/* Step 5: waits until host_phase[index] == device_phase[index]. */
int device_sim_phase_wait_answered(void* buffer, uint32_t index, uint64_t timeout_ns);
/* Step 6. */
void device_sim_phase_read_results(void* buffer, uint32_t index, uint64_t activemask,
                                   uint64_t lanes[64][8]);
/* Non-blocking steps for a driver that plays many waves on one thread:
 * one pass of step 1 (true and *index_out when a packet was claimed), and
 * step 5 without waiting (true once the host handed packet `index` back). */
bool device_sim_phase_try_claim(void* buffer, uint32_t* index_out);
bool device_sim_phase_is_answered(void* buffer, uint32_t index);
/* Number of doorbell rings and of rings skipped by the throttle so far. */
uint64_t device_sim_phase_rings(void);
uint64_t device_sim_phase_throttled(void);

#ifdef __cplusplus
}
#endif

#endif /* AMDGPU_DROPIN_DEVICE_SIM_PHASE_H */
