/* Device simulator: the classic protocol's device steps (see device_sim.h),
 * the buffer layout, and the clock and wait helpers both protocol files use.
 * Whole calls and the wave threads are device_sim_waves.c's. Memory orderings follow what the
 * device library uses; each atomic access says why its ordering suffices. */
#define _GNU_SOURCE
#include "device_sim.h"
#include "device_sim_internal.h"

#include <sched.h>
#include <string.h>
#include <time.h>

#include <hsa/hsa.h>

/* ---- layout arithmetic (docs/protocols.md#classic-layout, independent of the library) ------ */

static size_t round_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

size_t device_sim_headers_offset(uint32_t num_packets) {
  (void)num_packets;
  return round_up(DEVICE_SIM_BUFFER_HEADER_SIZE, 8);
}

size_t device_sim_payloads_offset(uint32_t num_packets) {
  size_t headers_end =
      device_sim_headers_offset(num_packets) + (size_t)DEVICE_SIM_PACKET_HEADER_SIZE * num_packets;
  return round_up(headers_end, DEVICE_SIM_PAYLOAD_ALIGNMENT);
}

size_t device_sim_buffer_size(uint32_t num_packets) {
  return device_sim_payloads_offset(num_packets) + (size_t)DEVICE_SIM_PAYLOAD_SIZE * num_packets;
}

uint64_t device_sim_expected_index_mask(uint32_t num_packets) {
  uint64_t power = 1;
  while (power < num_packets) power <<= 1;
  return power - 1;
}

const char* device_sim_error_string(int error) {
  switch (error) {
    case DEVICE_SIM_OK: return "ok";
    case DEVICE_SIM_ERR_ARGUMENT: return "invalid argument";
    case DEVICE_SIM_ERR_NO_PACKET: return "no free packet before the timeout";
    case DEVICE_SIM_ERR_TIMEOUT: return "host did not clear READY before the timeout";
    default: return "unknown error";
  }
}

uint64_t device_sim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One step of a wait loop: a short busy pause first (the host usually answers
 * within microseconds), then yield so that on a machine with few cores the
 * listener thread gets to run. */
static void wait_step(uint32_t iteration) {
  if (iteration < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield();
  }
}

static uint64_t deadline_after(uint64_t timeout_ns) {
  if (timeout_ns == 0) timeout_ns = DEFAULT_TIMEOUT_NS;
  return device_sim_now_ns() + timeout_ns;
}

/* The same two for the simulator's other protocol file (device_sim_internal.h). */
void device_sim_wait_step(uint32_t iteration) { wait_step(iteration); }
uint64_t device_sim_deadline_after(uint64_t timeout_ns) { return deadline_after(timeout_ns); }

/* ---- protocol steps ---------------------------------------------------- */

static uint64_t index_of(device_sim_buffer_header_t* header, uint64_t ptr) {
  return ptr & header->index_mask;
}

int device_sim_pop_free(void* buffer, uint64_t* ptr_out, uint64_t timeout_ns) {
  if (buffer == NULL || ptr_out == NULL) return DEVICE_SIM_ERR_ARGUMENT;
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  uint64_t deadline = deadline_after(timeout_ns);
  uint32_t iteration = 0;
  /* Acquire: the packet's `next` (and, for a packet freed by another wave,
   * everything that wave did with it) happens-before our use of it. */
  uint64_t top = atomic_load_explicit(&header->free_stack, memory_order_acquire);
  for (;;) {
    if (top == 0) {
      /* Empty (more waves than packets): wait for a wave to return one. */
      if ((iteration & 15) == 15 && device_sim_now_ns() > deadline) return DEVICE_SIM_ERR_NO_PACKET;
      wait_step(iteration++);
      /* Acquire, as above. */
      top = atomic_load_explicit(&header->free_stack, memory_order_acquire);
      continue;
    }
    device_sim_packet_header_t* packet = device_sim_packet(buffer, index_of(header, top));
    /* Relaxed: a stale `next` is harmless because the tag in `top` makes the
     * CAS below fail if the packet was popped and pushed again meanwhile. */
    uint64_t next = atomic_load_explicit(&packet->next, memory_order_relaxed);
    /* Acquire on success: pairs with the release CAS of the wave that pushed
     * this packet back, so its last reads of the payload happen-before our
     * writes. Failure reloads `top` with acquire for the next attempt. */
    if (atomic_compare_exchange_weak_explicit(&header->free_stack, &top, next,
                                              memory_order_acquire, memory_order_acquire)) {
      *ptr_out = top;
      return DEVICE_SIM_OK;
    }
  }
}

void device_sim_fill(void* buffer, uint64_t ptr, uint32_t service, uint64_t activemask,
                     const uint64_t lanes[64][8]) {
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  uint64_t index = index_of(header, ptr);
  device_sim_packet_header_t* packet = device_sim_packet(buffer, index);
  device_sim_payload_t* payload = device_sim_payload(buffer, index);
  packet->service = service;
  packet->activemask = activemask;
  /* Relaxed: published to the host by the release CAS of the ready push. */
  atomic_store_explicit(&packet->control, DEVICE_SIM_CONTROL_READY, memory_order_relaxed);
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (activemask & (1ull << lane)) {
      memcpy(payload->slots[lane], lanes[lane], sizeof(payload->slots[lane]));
    }
  }
}

void device_sim_push_ready(void* buffer, uint64_t ptr) {
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  device_sim_packet_header_t* packet = device_sim_packet(buffer, index_of(header, ptr));
  /* Relaxed: only the value matters; the release CAS publishes it. */
  uint64_t top = atomic_load_explicit(&header->ready_stack, memory_order_relaxed);
  do {
    /* Relaxed: published by the release CAS below. */
    atomic_store_explicit(&packet->next, top, memory_order_relaxed);
    /* Release: the packet's header and payload writes happen-before the
     * host's acquire exchange that detaches the stack. */
  } while (!atomic_compare_exchange_weak_explicit(&header->ready_stack, &top, ptr,
                                                  memory_order_release, memory_order_relaxed));
}

bool device_sim_push_ready_raw_if_empty(void* buffer, uint64_t ptr) {
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  uint64_t expected = 0;
  /* Release: whatever the test wrote before is visible to the host. */
  return atomic_compare_exchange_strong_explicit(&header->ready_stack, &expected, ptr,
                                                 memory_order_release, memory_order_relaxed);
}

/* The software runtime's entry for a GPU's ring (hsa_sim.h); a system ROCr
 * has none, and then the ring is the host's add. */
extern void hsa_sim_signal_add_from_device(hsa_signal_t signal, hsa_signal_value_t value)
    __attribute__((weak));

void device_sim_ring(uint64_t handle) {
  hsa_signal_t doorbell = {handle};
  if (hsa_sim_signal_add_from_device != NULL) {
    /* A wave's ring: the release add, and an interrupt that costs the wave
     * no system call (the kernel wakes a sleeping listener). */
    hsa_sim_signal_add_from_device(doorbell, 1);
  } else {
    /* screlease: the HSA equivalent of the device library's release add. */
    hsa_signal_add_screlease(doorbell, 1);
  }
}

void device_sim_ring_doorbell(void* buffer) { device_sim_ring(device_sim_header(buffer)->doorbell); }

int device_sim_wait_served(void* buffer, uint64_t ptr, uint64_t timeout_ns) {
  if (buffer == NULL) return DEVICE_SIM_ERR_ARGUMENT;
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  device_sim_packet_header_t* packet = device_sim_packet(buffer, index_of(header, ptr));
  uint64_t deadline = deadline_after(timeout_ns);
  uint32_t iteration = 0;
  /* Acquire: pairs with the host's release store clearing READY, so the
   * host's writes to the payload happen-before our reads of the results. */
  while (atomic_load_explicit(&packet->control, memory_order_acquire) & DEVICE_SIM_CONTROL_READY) {
    if ((iteration & 15) == 15 && device_sim_now_ns() > deadline) return DEVICE_SIM_ERR_TIMEOUT;
    wait_step(iteration++);
  }
  return DEVICE_SIM_OK;
}

void device_sim_read_results(void* buffer, uint64_t ptr, uint64_t activemask,
                             uint64_t lanes[64][8]) {
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  device_sim_payload_t* payload = device_sim_payload(buffer, index_of(header, ptr));
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (activemask & (1ull << lane)) {
      lanes[lane][0] = payload->slots[lane][0];
      lanes[lane][1] = payload->slots[lane][1];
    }
  }
}

uint64_t device_sim_next_tag(void* buffer, uint64_t ptr) {
  uint64_t step = device_sim_header(buffer)->index_mask + 1;
  uint64_t next = ptr + step;
  return next == 0 ? step : next;
}

void device_sim_push_free(void* buffer, uint64_t ptr) {
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  device_sim_packet_header_t* packet = device_sim_packet(buffer, index_of(header, ptr));
  uint64_t tagged = device_sim_next_tag(buffer, ptr);
  /* Relaxed: only the value matters; the release CAS publishes `next`. */
  uint64_t top = atomic_load_explicit(&header->free_stack, memory_order_relaxed);
  do {
    /* Relaxed: published by the release CAS below. */
    atomic_store_explicit(&packet->next, top, memory_order_relaxed);
    /* Release: our reads of the results happen-before the next owner's
     * (acquire) pop and its writes to the payload. */
  } while (!atomic_compare_exchange_weak_explicit(&header->free_stack, &top, tagged,
                                                  memory_order_release, memory_order_relaxed));
}

bool device_sim_try_pop_free(void* buffer, uint64_t* ptr_out) {
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  /* Acquire: as in device_sim_pop_free. */
  uint64_t top = atomic_load_explicit(&header->free_stack, memory_order_acquire);
  while (top != 0) {
    device_sim_packet_header_t* packet = device_sim_packet(buffer, index_of(header, top));
    /* Relaxed: a stale `next` fails the tagged CAS below (see device_sim_pop_free). */
    uint64_t next = atomic_load_explicit(&packet->next, memory_order_relaxed);
    /* Acquire on success and failure: as in device_sim_pop_free. */
    if (atomic_compare_exchange_weak_explicit(&header->free_stack, &top, next,
                                              memory_order_acquire, memory_order_acquire)) {
      *ptr_out = top;
      return true;
    }
  }
  return false;
}

bool device_sim_is_served(void* buffer, uint64_t ptr) {
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  device_sim_packet_header_t* packet = device_sim_packet(buffer, index_of(header, ptr));
  /* Acquire: pairs with the host's release clearing READY (see
   * device_sim_wait_served). */
  return (atomic_load_explicit(&packet->control, memory_order_acquire) & DEVICE_SIM_CONTROL_READY) == 0;
}

int device_sim_wait_ready_stack_empty(void* buffer, uint64_t timeout_ns) {
  if (buffer == NULL) return DEVICE_SIM_ERR_ARGUMENT;
  device_sim_buffer_header_t* header = device_sim_header(buffer);
  uint64_t deadline = deadline_after(timeout_ns);
  uint32_t iteration = 0;
  /* Relaxed: the test only needs to observe that the host detached it. */
  while (atomic_load_explicit(&header->ready_stack, memory_order_relaxed) != 0) {
    if ((iteration & 15) == 15 && device_sim_now_ns() > deadline) return DEVICE_SIM_ERR_TIMEOUT;
    wait_step(iteration++);
  }
  return DEVICE_SIM_OK;
}
