/* libhostcall_baseline: the benchmark's reference listener, our own C
 * implementation of the strategy ROCclr's hostcall listener followed in
 * 2019-20, exporting the same four functions as the product library
 * (getHostcallBufferSize, getHostcallBufferAlignment, enableHostcalls,
 * disableHostcalls). The benchmark dlopens it (RTLD_LOCAL) next to the
 * product library and calls each through its own handle, so both listeners
 * are measured in one process and one run. It is never part of the product.
 *
 * The strategy (SPEC 4.6), which is what the benchmark compares against:
 *
 *  * one process-wide listener thread, started by the first enableHostcalls,
 *    and one doorbell signal (hsa_signal_create(1, 0, NULL, &s)) shared by
 *    every buffer;
 *  * the thread blocks on the doorbell until its value differs from the last
 *    value seen (HSA_WAIT_STATE_BLOCKED, 1 ms timeout); a timeout without a
 *    change goes straight back to waiting: packets are served only when the
 *    value changed;
 *  * on a change it takes one global lock and, under it, walks every
 *    registered buffer: detaches its ready stack (exchange with 0) and
 *    serves each packet of the chain (SPEC 4.5), running the services under
 *    the lock; enable and disable take the same lock;
 *  * a doorbell value of 0 tells the thread to exit; the last
 *    disableHostcalls stores 0, joins the thread and destroys the signal.
 *
 * Services: FUNCTION_CALL only (the benchmark's traffic). Any other service
 * id is answered by clearing READY without touching the payload (upstream
 * aborts the process; a benchmark has no use for that). Two guards upstream
 * lacks, neither on the measured fast path's critical section: a tagged
 * pointer whose index is not below the packet count ends the walk, and so
 * does a chain longer than the packet count.
 *
 * The thread is named "amdgpu-hc-base" so the benchmark finds its CPU time.
 * The buffer layout is the device simulator's (ctest/device_sim/device_sim.h,
 * pinned there with static assertions), so the baseline needs no copy. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hsa/hsa.h>

#include "device_sim.h"

#define BASELINE_EXPORT __attribute__((visibility("default")))

/* ---- layout (SPEC 4.2): the device simulator's pinned description ------ */

#define CONTROL_READY DEVICE_SIM_CONTROL_READY
#define SERVICE_FUNCTION_CALL DEVICE_SIM_SERVICE_FUNCTION_CALL
#define MAX_BUFFERS 256u
#define THREAD_NAME "amdgpu-hc-base"

typedef device_sim_buffer_header_t buffer_header_t;
typedef device_sim_packet_header_t packet_header_t;
typedef device_sim_payload_t payload_t;

BASELINE_EXPORT size_t getHostcallBufferSize(uint32_t num_packets) {
  return device_sim_buffer_size(num_packets);
}

BASELINE_EXPORT uint32_t getHostcallBufferAlignment(void) { return DEVICE_SIM_PAYLOAD_ALIGNMENT; }

/* ---- registry and listener ------------------------------------------------ */

typedef struct {
  void* buffer;
  const void* queue;
  uint32_t packets;
} registered_t;

/* The one global lock: registry, listener lifetime, and every serve pass. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static registered_t g_buffers[MAX_BUFFERS];
static uint32_t g_count;
static bool g_running;
static pthread_t g_thread;
static hsa_signal_t g_doorbell;
static uint64_t g_timeout_ticks;

typedef void (*host_function_t)(uint64_t out[2], const uint64_t in[7]);

/* Serves one buffer's ready stack (SPEC 4.5). Called with g_lock held. */
static void process_packets(const registered_t* reg) {
  buffer_header_t* header = (buffer_header_t*)reg->buffer;
  packet_header_t* headers = (packet_header_t*)(uintptr_t)header->headers;
  payload_t* payloads = (payload_t*)(uintptr_t)header->payloads;
  /* Acquire: pairs with the waves' release CAS pushing onto the stack, so
   * their header and payload writes are visible. */
  uint64_t ptr = atomic_exchange_explicit(&header->ready_stack, 0, memory_order_acquire);
  uint32_t walked = 0;
  while (ptr != 0) {
    uint64_t index = ptr & header->index_mask;
    if (index >= reg->packets || ++walked > reg->packets) return;
    packet_header_t* packet = &headers[index];
    payload_t* payload = &payloads[index];
    /* Relaxed: visible through the acquire exchange; read before the
     * release below hands the packet back to the wave. */
    uint64_t next = atomic_load_explicit(&packet->next, memory_order_relaxed);
    if (packet->service == SERVICE_FUNCTION_CALL) {
      for (uint64_t mask = packet->activemask; mask != 0; mask &= mask - 1) {
        uint64_t* slot = payload->slots[__builtin_ctzll(mask)];
        host_function_t fn = (host_function_t)(uintptr_t)slot[0];
        uint64_t out[2] = {0, 0};
        if (fn != NULL) fn(out, &slot[1]);
        slot[0] = out[0];
        slot[1] = out[1];
      }
    }
    /* Release: the answer words are visible to the wave's acquire spin on
     * READY, and our reads of the packet happen before its reuse. */
    atomic_fetch_and_explicit(&packet->control, ~CONTROL_READY, memory_order_release);
    ptr = next;
  }
}

static void* listener_main(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), THREAD_NAME);
  hsa_signal_value_t seen = 1;
  for (;;) {
    hsa_signal_value_t value;
    do {
      value = hsa_signal_wait_scacquire(g_doorbell, HSA_SIGNAL_CONDITION_NE, seen,
                                        g_timeout_ticks, HSA_WAIT_STATE_BLOCKED);
    } while (value == seen);
    seen = value;
    if (value == 0) break;
    pthread_mutex_lock(&g_lock);
    for (uint32_t i = 0; i < g_count; ++i) process_packets(&g_buffers[i]);
    pthread_mutex_unlock(&g_lock);
  }
  return NULL;
}

/* Starts the listener and its doorbell; called with g_lock held. */
static bool start_listener(void) {
  uint64_t frequency = 0;
  if (hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &frequency) != HSA_STATUS_SUCCESS ||
      frequency == 0) {
    frequency = 1000000000ull;
  }
  g_timeout_ticks = frequency / 1000u; /* 1 ms */
  if (hsa_signal_create(1, 0, NULL, &g_doorbell) != HSA_STATUS_SUCCESS) return false;
  if (pthread_create(&g_thread, NULL, listener_main, NULL) != 0) {
    hsa_signal_destroy(g_doorbell);
    return false;
  }
  g_running = true;
  return true;
}

BASELINE_EXPORT bool enableHostcalls(void* buffer, uint32_t num_packets, const void* queue) {
  if (buffer == NULL || num_packets < 2) return false;
  pthread_mutex_lock(&g_lock);
  bool ok = g_count < MAX_BUFFERS && (g_running || start_listener());
  if (ok) {
    /* SPEC 4.3: headers and payloads, the free stack holding every packet,
     * an empty ready stack, the shared doorbell. */
    uint8_t* base = (uint8_t*)buffer;
    buffer_header_t* header = (buffer_header_t*)buffer;
    packet_header_t* headers = (packet_header_t*)(base + device_sim_headers_offset(num_packets));
    uint64_t mask = device_sim_expected_index_mask(num_packets);
    memset(headers, 0, sizeof(packet_header_t) * num_packets);
    header->headers = (uint64_t)(uintptr_t)headers;
    header->payloads = (uint64_t)(uintptr_t)(base + device_sim_payloads_offset(num_packets));
    header->doorbell = g_doorbell.handle;
    header->index_mask = mask;
    atomic_store_explicit(&headers[0].next, 0, memory_order_relaxed);
    atomic_store_explicit(&headers[1].next, mask + 1, memory_order_relaxed);
    for (uint32_t i = 2; i < num_packets; ++i) {
      atomic_store_explicit(&headers[i].next, i - 1, memory_order_relaxed);
    }
    atomic_store_explicit(&header->ready_stack, 0, memory_order_relaxed);
    /* Release: the initialized buffer is visible to a wave that reads the
     * free stack with acquire. (The caller publishes the buffer to the
     * device after we return, as with any runtime.) */
    atomic_store_explicit(&header->free_stack, num_packets - 1u, memory_order_release);
    g_buffers[g_count++] = (registered_t){buffer, queue, num_packets};
  }
  pthread_mutex_unlock(&g_lock);
  return ok;
}

BASELINE_EXPORT void disableHostcalls(void* buffer, const void* queue) {
  pthread_mutex_lock(&g_lock);
  for (uint32_t i = 0; i < g_count; ++i) {
    if (g_buffers[i].buffer == buffer && g_buffers[i].queue == queue) {
      g_buffers[i] = g_buffers[--g_count];
      break;
    }
  }
  bool stop = g_count == 0 && g_running;
  if (stop) g_running = false;
  pthread_mutex_unlock(&g_lock);
  if (stop) {
    /* 0 tells the listener to exit (it may be blocked waiting for a change).
     * As upstream, this assumes no wave rings any more (a ring after the
     * store would hide the 0) and that no enableHostcalls runs concurrently
     * with the last disable; the benchmark stops its waves first and enables
     * and disables from one thread. */
    hsa_signal_store_screlease(g_doorbell, 0);
    pthread_join(g_thread, NULL);
    hsa_signal_destroy(g_doorbell);
  }
}
