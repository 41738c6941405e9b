/* Device simulator, phase-bit protocol (see device_sim_phase.h). Memory
 * orderings follow the device library; each atomic access says why its
 * ordering suffices. */
#define _GNU_SOURCE
#include "device_sim_phase.h"

#include "device_sim_internal.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <hsa/hsa.h>

#define MAX_ATTACHED 64

/* ---- layout arithmetic (placement rules, independent of the library) ---- */

static size_t round_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

size_t device_sim_phase_host_phase_offset(uint32_t num_packets) {
  return DEVICE_SIM_PHASE_PREFIX_SIZE + 4 * (size_t)num_packets;
}

size_t device_sim_phase_headers_offset(uint32_t num_packets) {
  return round_up(device_sim_phase_host_phase_offset(num_packets) + 4 * (size_t)num_packets, 8);
}

size_t device_sim_phase_payloads_offset(uint32_t num_packets) {
  return round_up(device_sim_phase_headers_offset(num_packets) +
                      (size_t)DEVICE_SIM_PHASE_HEADER_SIZE * num_packets,
                  DEVICE_SIM_PAYLOAD_ALIGNMENT);
}

size_t device_sim_phase_buffer_size(uint32_t num_packets) {
  return device_sim_phase_payloads_offset(num_packets) + (size_t)DEVICE_SIM_PAYLOAD_SIZE * num_packets;
}

size_t device_sim_phase_occupancy_size(uint32_t num_packets) {
  return ((size_t)num_packets + 31) / 32 * 4;
}

/* ---- which buffers speak phase-bit -------------------------------------- */

static _Atomic(void*) attached[MAX_ATTACHED];

bool device_sim_phase_attach(void* buffer) {
  if (buffer == NULL) return false;
  for (int i = 0; i < MAX_ATTACHED; ++i) {
    void* expected = NULL;
    /* AcqRel: readers (is_attached, acquire) see the buffer once attached. */
    if (atomic_compare_exchange_strong_explicit(&attached[i], &expected, buffer,
                                                memory_order_acq_rel, memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void device_sim_phase_detach(void* buffer) {
  for (int i = 0; i < MAX_ATTACHED; ++i) {
    void* expected = buffer;
    /* Release: pairs with is_attached's acquire load. */
    atomic_compare_exchange_strong_explicit(&attached[i], &expected, NULL, memory_order_release,
                                            memory_order_relaxed);
  }
}

bool device_sim_phase_is_attached(const void* buffer) {
  if (buffer == NULL) return false;
  for (int i = 0; i < MAX_ATTACHED; ++i) {
    /* Acquire: pairs with attach's CAS. */
    if (atomic_load_explicit(&attached[i], memory_order_acquire) == buffer) return true;
  }
  return false;
}

/* ---- steps ------------------------------------------------------------------ */

bool device_sim_phase_set_bit(void* buffer, uint32_t index) {
  uint32_t bit = 1u << (index % 32);
  /* Acquire: pairs with the previous owner's release in clear_bit, so its
   * accesses to the packet (its answer loads) happen before our request
   * stores. The ROCm device library claims and clears with relaxed ordering,
   * which lets a wave read the next owner's request as its answer on a GPU
   * (docs/phase-bit-device-ordering.md); the simulator behaves like the
   * fixed device code. */
  uint32_t before = atomic_fetch_or_explicit(&device_sim_phase_occupied(buffer)[index / 32], bit,
                                             memory_order_acquire);
  return (before & bit) != 0;
}

void device_sim_phase_clear_bit(void* buffer, uint32_t index) {
  /* Release: the answer loads before it are done before the next owner's
   * acquire claim (see set_bit). */
  atomic_fetch_and_explicit(&device_sim_phase_occupied(buffer)[index / 32], ~(1u << (index % 32)),
                            memory_order_release);
}

/* Tries to claim packet i: its bit was clear and its phases are equal. */
static bool try_claim_one(void* buffer, uint32_t i) {
  if (device_sim_phase_set_bit(buffer, i)) return false;
  /* Relaxed for both, as the device library: a packet whose phases differ
   * is still the host's, so give the bit back and move on. */
  uint32_t device = atomic_load_explicit(device_sim_phase_device(buffer, i), memory_order_relaxed);
  uint32_t host = atomic_load_explicit(device_sim_phase_host(buffer, i), memory_order_relaxed);
  if (device != host) {
    device_sim_phase_clear_bit(buffer, i);
    return false;
  }
  /* Acquire fence: the host's last accesses to this packet (released by its
   * host-phase store) happen-before our writes to it. The device library
   * gets this from the hardware; C11 needs the fence. */
  atomic_thread_fence(memory_order_acquire);
  return true;
}

bool device_sim_phase_try_claim(void* buffer, uint32_t* index_out) {
  uint32_t packets = device_sim_phase_prefix(buffer)->num_packets;
  for (uint32_t i = 0; i < packets; ++i) {
    if (try_claim_one(buffer, i)) {
      *index_out = i;
      return true;
    }
  }
  return false;
}

int device_sim_phase_claim(void* buffer, uint32_t* index_out, uint64_t timeout_ns) {
  if (buffer == NULL || index_out == NULL) return DEVICE_SIM_ERR_ARGUMENT;
  if (device_sim_phase_prefix(buffer)->num_packets == 0) return DEVICE_SIM_ERR_ARGUMENT;
  uint64_t deadline = device_sim_deadline_after(timeout_ns);
  uint32_t iteration = 0;
  /* The device library scans from packet 0, wrapping, sleeping briefly when
   * a pass found nothing. */
  while (!device_sim_phase_try_claim(buffer, index_out)) {
    if (device_sim_now_ns() > deadline) return DEVICE_SIM_ERR_NO_PACKET;
    device_sim_wait_step(iteration++);
  }
  return DEVICE_SIM_OK;
}

void device_sim_phase_fill(void* buffer, uint32_t index, uint32_t service, uint64_t activemask,
                           const uint64_t lanes[64][8]) {
  device_sim_phase_header_t* header = device_sim_phase_header(buffer, index);
  device_sim_payload_t* payload = device_sim_phase_payload(buffer, index);
  /* Plain stores, as the device library: published by the release flip. */
  header->activemask = activemask;
  header->service = service;
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (activemask & (1ull << lane)) memcpy(payload->slots[lane], lanes[lane], sizeof(payload->slots[lane]));
  }
}

void device_sim_phase_flip(void* buffer, uint32_t index) {
  _Atomic uint32_t* phase = device_sim_phase_device(buffer, index);
  /* Relaxed: this wave is the only writer of its claimed packet's phase. */
  uint32_t device = atomic_load_explicit(phase, memory_order_relaxed);
  /* Release: the header and payload stores happen-before the host's acquire
   * fence after it sees the phases differ. */
  atomic_store_explicit(phase, device ^ 1u, memory_order_release);
}

/* The simulated device's last ring, in steady-counter ticks; one device per
 * process, as every buffer of a test lives on the same simulated GPU. */
static _Atomic uint64_t last_ring_ticks;
static _Atomic uint64_t rings;
static _Atomic uint64_t throttled;

bool device_sim_phase_ring_throttled(void* buffer) {
  uint64_t now = device_sim_now_ns() / DEVICE_SIM_PHASE_NS_PER_TICK;
  /* Relaxed, as the device library: a rate limit, no data. */
  uint64_t previous = atomic_load_explicit(&last_ring_ticks, memory_order_relaxed);
  if (now - previous > DEVICE_SIM_PHASE_THROTTLE_TICKS) {
    /* Relaxed exchange: of two waves racing here, the one that still sees an
     * old time rings; the other does not. */
    previous = atomic_exchange_explicit(&last_ring_ticks, now, memory_order_relaxed);
    if (now - previous > DEVICE_SIM_PHASE_THROTTLE_TICKS) {
      /* Release add, as the device library's signal add. */
      device_sim_ring(device_sim_phase_prefix(buffer)->doorbell);
      /* Relaxed: statistics. */
      atomic_fetch_add_explicit(&rings, 1, memory_order_relaxed);
      return true;
    }
  }
  /* Relaxed: statistics. */
  atomic_fetch_add_explicit(&throttled, 1, memory_order_relaxed);
  return false;
}

void device_sim_phase_ring(void* buffer) { device_sim_ring(device_sim_phase_prefix(buffer)->doorbell); }

uint64_t device_sim_phase_rings(void) {
  /* Relaxed: statistics. */
  return atomic_load_explicit(&rings, memory_order_relaxed);
}

uint64_t device_sim_phase_throttled(void) {
  /* Relaxed: statistics. */
  return atomic_load_explicit(&throttled, memory_order_relaxed);
}

bool device_sim_phase_is_answered(void* buffer, uint32_t index) {
  /* Acquire on both, as the device library: pairs with the host's release
   * store of the host phase, so the answer words are visible. */
  uint32_t device = atomic_load_explicit(device_sim_phase_device(buffer, index), memory_order_acquire);
  uint32_t host = atomic_load_explicit(device_sim_phase_host(buffer, index), memory_order_acquire);
  return device == host;
}

int device_sim_phase_wait_answered(void* buffer, uint32_t index, uint64_t timeout_ns) {
  if (buffer == NULL) return DEVICE_SIM_ERR_ARGUMENT;
  uint64_t deadline = device_sim_deadline_after(timeout_ns);
  uint32_t iteration = 0;
  while (!device_sim_phase_is_answered(buffer, index)) {
    if ((iteration & 15) == 15 && device_sim_now_ns() > deadline) return DEVICE_SIM_ERR_TIMEOUT;
    device_sim_wait_step(iteration++);
  }
  return DEVICE_SIM_OK;
}

void device_sim_phase_read_results(void* buffer, uint32_t index, uint64_t activemask,
                                   uint64_t lanes[64][8]) {
  device_sim_payload_t* payload = device_sim_phase_payload(buffer, index);
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (activemask & (1ull << lane)) {
      lanes[lane][0] = payload->slots[lane][0];
      lanes[lane][1] = payload->slots[lane][1];
    }
  }
}
