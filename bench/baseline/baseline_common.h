/* What the benchmark's reference listeners share (bench/baseline): the
 * registry of enabled buffers under one global lock, the listener thread's
 * lifetime, the shared doorbell signal, and serving one buffer in either
 * protocol (FUNCTION_CALL only; any other service id is answered without
 * touching the payload). Each strategy (hostcall_baseline.c: 2019-20;
 * hostcall_classic2026.c; hostcall_phase2026.c; hostcall_floor.c) is its
 * own shared library built from its file and baseline_common.c, and defines
 * `baseline_strategy` and the exported entry points (see BASELINE_EXPORTS).
 *
 * The buffer layouts are the device simulator's (ctest/device_sim, pinned
 * there with static assertions), so no baseline carries a copy. */
#ifndef HOSTCALL_BASELINE_COMMON_H
#define HOSTCALL_BASELINE_COMMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hsa/hsa.h>

#include "device_sim.h"
#include "device_sim_phase.h"

#define BASELINE_EXPORT __attribute__((visibility("default")))
#define BASELINE_MAX_BUFFERS 256u

/* The doorbell's first value; 0 tells the listener to exit. */
#define BASELINE_SIGNAL_INIT 1
#define BASELINE_SIGNAL_DONE 0

/* ROCclr's timeouts are in ticks of the runtime's timestamp clock. */
#define BASELINE_MI (1024ull * 1024ull)

typedef struct {
  void* buffer;
  const void* queue;
  uint32_t packets;
  bool phase_bit;
  /* Phase-bit only: scan packets [0, scan_limit) (the 2026 strategy's
   * narrowing; see baseline_serve_phase). */
  uint32_t scan_limit;
} baseline_buffer_t;

typedef struct {
  const char* thread_name; /* <= 15 chars, starts with "amdgpu-h" */
  void* (*listener_main)(void*);
} baseline_strategy_t;

/* Defined by each strategy's file. */
extern const baseline_strategy_t baseline_strategy;

/* The one global lock: registry, listener lifetime, and (for the strategies
 * that do so) every serve pass. */
extern pthread_mutex_t baseline_lock;
extern baseline_buffer_t baseline_buffers[BASELINE_MAX_BUFFERS];
extern uint32_t baseline_count;
extern hsa_signal_t baseline_doorbell;
/* Set (relaxed is enough: the listener only needs to see it eventually, and
 * it reads nothing published with it) before the last disable wakes the
 * listener with BASELINE_SIGNAL_DONE; for the spinning floors, which may not
 * look at the doorbell. */
extern _Atomic int baseline_stopping;

/* Serves one classic buffer's ready stack: detach, then answer every packet
 * of the chain. Returns the packets served. Caller holds baseline_lock. */
uint32_t baseline_serve_classic(const baseline_buffer_t* reg);
/* True when the buffer's ready stack holds a packet (one relaxed load). */
bool baseline_classic_has_work(const baseline_buffer_t* reg);

/* Result of a phase-bit scan, ordered as the 2026 strategy merges them
 * (the minimum over buffers). */
enum { BASELINE_PROCESSED = 0, BASELINE_IDLE_NARROW = 1, BASELINE_IDLE_FULL = 2 };
/* Scans packets [0, scan_limit) of a phase-bit buffer and answers every one
 * the device handed over; narrows scan_limit to just past the last packet
 * served. Caller holds baseline_lock. */
int baseline_serve_phase(baseline_buffer_t* reg);

/* A spin-wait hint for the spinning loops. */
static inline void baseline_spin_hint(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* The runtime timestamp clock's ticks per second (1 GHz if it does not say). */
uint64_t baseline_timestamp_frequency(void);

/* The entry points, identical in every strategy. */
#define BASELINE_EXPORTS                                                                       \
  BASELINE_EXPORT size_t getHostcallBufferSize(uint32_t num_packets) {                         \
    return device_sim_buffer_size(num_packets);                                                \
  }                                                                                            \
  BASELINE_EXPORT uint32_t getHostcallBufferAlignment(void) {                                  \
    return DEVICE_SIM_PAYLOAD_ALIGNMENT;                                                       \
  }                                                                                            \
  BASELINE_EXPORT bool enableHostcalls(void* buffer, uint32_t num_packets, const void* queue) { \
    return baseline_enable(buffer, num_packets, queue, false, NULL);                           \
  }                                                                                            \
  BASELINE_EXPORT void disableHostcalls(void* buffer, const void* queue) {                     \
    baseline_disable(buffer, queue);                                                           \
  }                                                                                            \
  /* The product's extension signatures (protocol 1 = phase-bit), so the                     \
   * benchmark drives a phase-bit baseline as it drives the product. */                       \
  BASELINE_EXPORT size_t amdgpu_dropin_hostcall_buffer_size(uint32_t protocol,                  \
                                                            uint32_t num_packets) {            \
    return protocol == 1 ? device_sim_phase_buffer_size(num_packets)                           \
                         : device_sim_buffer_size(num_packets);                                \
  }                                                                                            \
  BASELINE_EXPORT int32_t amdgpu_dropin_hostcall_enable(void* buffer, uint32_t num_packets,     \
                                                        const void* queue, uint32_t protocol,  \
                                                        uint32_t* occupancy) {                 \
    return baseline_enable(buffer, num_packets, queue, protocol == 1, occupancy) ? 0 : 1;      \
  }

bool baseline_enable(void* buffer, uint32_t num_packets, const void* queue, bool phase_bit,
                     uint32_t* occupancy);
void baseline_disable(void* buffer, const void* queue);

#endif /* HOSTCALL_BASELINE_COMMON_H */
