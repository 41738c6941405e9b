/* The reference listeners' shared parts (see baseline_common.h). */
#define _GNU_SOURCE
#include "baseline_common.h"

#include <string.h>

pthread_mutex_t baseline_lock = PTHREAD_MUTEX_INITIALIZER;
baseline_buffer_t baseline_buffers[BASELINE_MAX_BUFFERS];
uint32_t baseline_count;
hsa_signal_t baseline_doorbell;
_Atomic int baseline_stopping;

static bool g_running;
static pthread_t g_thread;

typedef void (*host_function_t)(uint64_t out[2], const uint64_t in[7]);

/* Answers every active lane of a FUNCTION_CALL payload in place: slot[0] is
 * the host function, slot[1..7] its arguments, slot[0..1] the answer. */
static void serve_function_call(device_sim_payload_t* payload, uint64_t activemask) {
  for (uint64_t mask = activemask; mask != 0; mask &= mask - 1) {
    uint64_t* slot = payload->slots[__builtin_ctzll(mask)];
    host_function_t fn = (host_function_t)(uintptr_t)slot[0];
    uint64_t out[2] = {0, 0};
    if (fn != NULL) fn(out, &slot[1]);
    slot[0] = out[0];
    slot[1] = out[1];
  }
}

bool baseline_classic_has_work(const baseline_buffer_t* reg) {
  device_sim_buffer_header_t* header = (device_sim_buffer_header_t*)reg->buffer;
  /* Relaxed: a hint; the exchange in baseline_serve_classic acquires. */
  return atomic_load_explicit(&header->ready_stack, memory_order_relaxed) != 0;
}

uint32_t baseline_serve_classic(const baseline_buffer_t* reg) {
  device_sim_buffer_header_t* header = (device_sim_buffer_header_t*)reg->buffer;
  device_sim_packet_header_t* headers = (device_sim_packet_header_t*)(uintptr_t)header->headers;
  device_sim_payload_t* payloads = (device_sim_payload_t*)(uintptr_t)header->payloads;
  /* Acquire: pairs with the waves' release CAS pushing onto the stack, so
   * their header and payload writes are visible. */
  uint64_t ptr = atomic_exchange_explicit(&header->ready_stack, 0, memory_order_acquire);
  uint32_t walked = 0;
  while (ptr != 0) {
    uint64_t index = ptr & header->index_mask;
    /* Guards upstream lacks: a bad index or a cycle ends the walk. */
    if (index >= reg->packets || walked >= reg->packets) break;
    ++walked;
    device_sim_packet_header_t* packet = &headers[index];
    /* Relaxed: visible through the acquire exchange; read before the
     * release below hands the packet back to the wave. */
    uint64_t next = atomic_load_explicit(&packet->next, memory_order_relaxed);
    if (packet->service == DEVICE_SIM_SERVICE_FUNCTION_CALL) {
      serve_function_call(&payloads[index], packet->activemask);
    }
    /* Release: the answer words are visible to the wave's acquire spin on
     * READY, and our reads of the packet happen before its reuse. */
    atomic_fetch_and_explicit(&packet->control, ~DEVICE_SIM_CONTROL_READY, memory_order_release);
    ptr = next;
  }
  return walked;
}

int baseline_serve_phase(baseline_buffer_t* reg) {
  void* buffer = reg->buffer;
  uint32_t new_limit = 0;
  for (uint32_t i = 0; i < reg->scan_limit; ++i) {
    /* Relaxed, as the 2026 strategy: the acquire fence below orders the
     * payload reads after the device's release flip once a flip is seen. */
    uint32_t device = atomic_load_explicit(device_sim_phase_device(buffer, i), memory_order_relaxed);
    uint32_t host = atomic_load_explicit(device_sim_phase_host(buffer, i), memory_order_relaxed);
    if (device == host) continue;
    new_limit = i + 1;
    atomic_thread_fence(memory_order_acquire);
    device_sim_phase_header_t* header = device_sim_phase_header(buffer, i);
    if (header->service == DEVICE_SIM_SERVICE_FUNCTION_CALL) {
      serve_function_call(device_sim_phase_payload(buffer, i), header->activemask);
    }
    /* Release fence then a relaxed store: the answers are visible to the
     * wave's acquire load of the host phase. */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(device_sim_phase_host(buffer, i), host ^ 1u, memory_order_relaxed);
  }
  if (new_limit > 0) {
    reg->scan_limit = new_limit;
    return BASELINE_PROCESSED;
  }
  return reg->scan_limit < reg->packets ? BASELINE_IDLE_NARROW : BASELINE_IDLE_FULL;
}

uint64_t baseline_timestamp_frequency(void) {
  uint64_t frequency = 0;
  if (hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &frequency) != HSA_STATUS_SUCCESS ||
      frequency == 0) {
    frequency = 1000000000ull;
  }
  return frequency;
}

/* Starts the listener and its doorbell; called with baseline_lock held. */
static bool start_listener(void) {
  if (hsa_signal_create(BASELINE_SIGNAL_INIT, 0, NULL, &baseline_doorbell) != HSA_STATUS_SUCCESS) {
    return false;
  }
  /* Relaxed: no listener runs yet; pthread_create orders it before the thread. */
  atomic_store_explicit(&baseline_stopping, 0, memory_order_relaxed);
  if (pthread_create(&g_thread, NULL, baseline_strategy.listener_main, NULL) != 0) {
    hsa_signal_destroy(baseline_doorbell);
    return false;
  }
  g_running = true;
  return true;
}

/* Classic layout: headers and payloads, the free stack holding every
 * packet, an empty ready stack, the shared doorbell. */
static void init_classic(void* buffer, uint32_t num_packets) {
  uint8_t* base = (uint8_t*)buffer;
  device_sim_buffer_header_t* header = (device_sim_buffer_header_t*)buffer;
  device_sim_packet_header_t* headers =
      (device_sim_packet_header_t*)(base + device_sim_headers_offset(num_packets));
  uint64_t mask = device_sim_expected_index_mask(num_packets);
  memset(headers, 0, sizeof(*headers) * num_packets);
  header->headers = (uint64_t)(uintptr_t)headers;
  header->payloads = (uint64_t)(uintptr_t)(base + device_sim_payloads_offset(num_packets));
  header->doorbell = baseline_doorbell.handle;
  header->index_mask = mask;
  /* Relaxed: published by the release store of the free stack below. */
  atomic_store_explicit(&headers[0].next, 0, memory_order_relaxed);
  atomic_store_explicit(&headers[1].next, mask + 1, memory_order_relaxed);
  for (uint32_t i = 2; i < num_packets; ++i) {
    atomic_store_explicit(&headers[i].next, i - 1, memory_order_relaxed);
  }
  atomic_store_explicit(&header->ready_stack, 0, memory_order_relaxed);
  /* Release: the initialized buffer is visible to a wave that reads the
   * free stack with acquire. (The caller publishes the buffer to the device
   * after we return, as with any runtime.) */
  atomic_store_explicit(&header->free_stack, num_packets - 1u, memory_order_release);
}

/* Phase-bit layout: the prefix (addresses of both phase arrays, the
 * caller's occupancy bitmap, headers, payloads; the doorbell; the packet
 * count) and every phase 0, so the host owns every packet. */
static void init_phase(void* buffer, uint32_t num_packets, uint32_t* occupancy) {
  uint8_t* base = (uint8_t*)buffer;
  device_sim_phase_prefix_t* prefix = device_sim_phase_prefix(buffer);
  prefix->device_phase = (uint64_t)(uintptr_t)(base + DEVICE_SIM_PHASE_PREFIX_SIZE);
  prefix->host_phase = (uint64_t)(uintptr_t)(base + device_sim_phase_host_phase_offset(num_packets));
  prefix->occupied = (uint64_t)(uintptr_t)occupancy;
  prefix->headers = (uint64_t)(uintptr_t)(base + device_sim_phase_headers_offset(num_packets));
  prefix->payloads = (uint64_t)(uintptr_t)(base + device_sim_phase_payloads_offset(num_packets));
  prefix->doorbell = baseline_doorbell.handle;
  prefix->num_packets = num_packets;
  prefix->reserved = 0;
  for (uint32_t i = 0; i < num_packets; ++i) {
    /* Relaxed: the caller publishes the buffer to the device afterwards. */
    atomic_store_explicit(device_sim_phase_device(buffer, i), 0, memory_order_relaxed);
    atomic_store_explicit(device_sim_phase_host(buffer, i), 0, memory_order_relaxed);
  }
  memset(occupancy, 0, device_sim_phase_occupancy_size(num_packets));
  atomic_thread_fence(memory_order_release);
}

bool baseline_enable(void* buffer, uint32_t num_packets, const void* queue, bool phase_bit,
                     uint32_t* occupancy) {
  if (buffer == NULL || num_packets < 2 || (phase_bit && occupancy == NULL)) return false;
  pthread_mutex_lock(&baseline_lock);
  bool ok = baseline_count < BASELINE_MAX_BUFFERS && (g_running || start_listener());
  if (ok) {
    if (phase_bit) {
      init_phase(buffer, num_packets, occupancy);
    } else {
      init_classic(buffer, num_packets);
    }
    baseline_buffers[baseline_count++] =
        (baseline_buffer_t){buffer, queue, num_packets, phase_bit, num_packets};
  }
  pthread_mutex_unlock(&baseline_lock);
  return ok;
}

void baseline_disable(void* buffer, const void* queue) {
  pthread_mutex_lock(&baseline_lock);
  for (uint32_t i = 0; i < baseline_count; ++i) {
    if (baseline_buffers[i].buffer == buffer && baseline_buffers[i].queue == queue) {
      baseline_buffers[i] = baseline_buffers[--baseline_count];
      break;
    }
  }
  bool stop = baseline_count == 0 && g_running;
  if (stop) g_running = false;
  pthread_mutex_unlock(&baseline_lock);
  if (stop) {
    /* DONE tells the listener to exit (it may be blocked waiting for a
     * change). As upstream, this assumes no wave rings any more and that no
     * enable runs concurrently with the last disable; the benchmark stops
     * its waves first and enables and disables from one thread. Relaxed:
     * see baseline_stopping. */
    atomic_store_explicit(&baseline_stopping, 1, memory_order_relaxed);
    hsa_signal_store_screlease(baseline_doorbell, BASELINE_SIGNAL_DONE);
    pthread_join(g_thread, NULL);
    hsa_signal_destroy(baseline_doorbell);
  }
}
