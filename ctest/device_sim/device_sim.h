/* Device simulator: host threads that behave like GPU waves posting hostcall
 * requests into a ROCclr-style hostcall buffer.
 *
 * Each call runs the per-wave device protocol of the classic hostcall layout
 * (the one ROCm's device libraries implement), step by step:
 *
 *   1. pop a packet from the tagged free stack (acquire CAS);
 *   2. write service, activemask and control = READY, and the 8 words of each
 *      active lane into the packet's payload;
 *   3. push the packet onto the ready stack (next = old top, release CAS);
 *   4. add 1 to the doorbell signal (a release add whose interrupt wakes
 *      only a sleeping listener: hsa_sim_signal_add_from_device in the
 *      software runtime, hsa_signal_add_screlease on a system ROCr);
 *   5. spin until the host clears READY (acquire), with a timeout so a broken
 *      listener fails a test instead of hanging it;
 *   6. copy slot[0..1] of each active lane back to the caller;
 *   7. push the packet back on the free stack with its tag incremented.
 *
 * The buffer layout is described here independently of the library (sizes
 * and offsets pinned with _Static_assert), so the simulator checks the
 * library's layout rather than sharing it.
 *
 * Low-level helpers let tests craft malformed traffic directly: push any
 * tagged pointer onto the ready stack without ringing the doorbell, ring the
 * doorbell alone, wait for one packet, and so on.
 */
#ifndef AMDGPU_DROPIN_DEVICE_SIM_H
#define AMDGPU_DROPIN_DEVICE_SIM_H

#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Buffer layout (shared with device code) -------------------------- */

/* Service ids. */
#define DEVICE_SIM_SERVICE_FUNCTION_CALL 1u
#define DEVICE_SIM_SERVICE_PRINTF 2u

/* Packet header control bit 0: the packet waits for the host. */
#define DEVICE_SIM_CONTROL_READY 1u

#define DEVICE_SIM_LANES 64u
#define DEVICE_SIM_SLOT_WORDS 8u
#define DEVICE_SIM_BUFFER_HEADER_SIZE 48u
#define DEVICE_SIM_PACKET_HEADER_SIZE 24u
#define DEVICE_SIM_PAYLOAD_SIZE 4096u
/* Alignment of the payload array (and of the whole buffer), as upstream. */
#define DEVICE_SIM_PAYLOAD_ALIGNMENT 8u

/* The layout types use C11 _Atomic, which C++17 does not have: they are
 * visible to C only; C++ users get the functions. */
#ifndef __cplusplus
typedef struct device_sim_buffer_header {
  uint64_t headers;              /* address of packet header 0 */
  uint64_t payloads;             /* address of payload 0 */
  uint64_t doorbell;             /* hsa_signal_t handle */
  _Atomic uint64_t free_stack;   /* tagged pointer, 0 = empty */
  _Atomic uint64_t ready_stack;  /* tagged pointer, 0 = empty */
  uint64_t index_mask;           /* next_power_of_two(n) - 1 */
} device_sim_buffer_header_t;

typedef struct device_sim_packet_header {
  _Atomic uint64_t next;     /* tagged pointer of the next packet in its stack */
  uint64_t activemask;       /* the wave's exec mask */
  uint32_t service;          /* service id */
  _Atomic uint32_t control;  /* bit 0 = READY */
} device_sim_packet_header_t;

typedef struct device_sim_payload {
  uint64_t slots[DEVICE_SIM_LANES][DEVICE_SIM_SLOT_WORDS];
} device_sim_payload_t;

_Static_assert(sizeof(device_sim_buffer_header_t) == 48, "buffer header size");
_Static_assert(offsetof(device_sim_buffer_header_t, headers) == 0, "headers offset");
_Static_assert(offsetof(device_sim_buffer_header_t, payloads) == 8, "payloads offset");
_Static_assert(offsetof(device_sim_buffer_header_t, doorbell) == 16, "doorbell offset");
_Static_assert(offsetof(device_sim_buffer_header_t, free_stack) == 24, "free_stack offset");
_Static_assert(offsetof(device_sim_buffer_header_t, ready_stack) == 32, "ready_stack offset");
_Static_assert(offsetof(device_sim_buffer_header_t, index_mask) == 40, "index_mask offset");
_Static_assert(sizeof(device_sim_packet_header_t) == 24, "packet header size");
_Static_assert(offsetof(device_sim_packet_header_t, next) == 0, "next offset");
_Static_assert(offsetof(device_sim_packet_header_t, activemask) == 8, "activemask offset");
_Static_assert(offsetof(device_sim_packet_header_t, service) == 16, "service offset");
_Static_assert(offsetof(device_sim_packet_header_t, control) == 20, "control offset");
_Static_assert(sizeof(device_sim_payload_t) == 4096, "payload size");
_Static_assert(sizeof(_Atomic uint64_t) == 8, "lock-free 64-bit atomics");
_Static_assert(sizeof(_Atomic uint32_t) == 4, "lock-free 32-bit atomics");

static inline device_sim_buffer_header_t* device_sim_header(void* buffer) {
  return (device_sim_buffer_header_t*)buffer;
}
/* Packet header / payload of index `index`, from the addresses stored in the
 * buffer header (as device code finds them). No bounds check: tests use these
 * only on indices they know are valid. */
static inline device_sim_packet_header_t* device_sim_packet(void* buffer, uint64_t index) {
  return (device_sim_packet_header_t*)(uintptr_t)device_sim_header(buffer)->headers + index;
}
static inline device_sim_payload_t* device_sim_payload(void* buffer, uint64_t index) {
  return (device_sim_payload_t*)(uintptr_t)device_sim_header(buffer)->payloads + index;
}
#endif /* !__cplusplus */

/* Offsets computed from the formula of docs/protocols.md#classic-layout, independently of the library:
 * headers at 48 rounded up to 8, payloads at the end of the headers rounded
 * up to the payload alignment, size = payload start + 4096 * n. */
size_t device_sim_headers_offset(uint32_t num_packets);
size_t device_sim_payloads_offset(uint32_t num_packets);
size_t device_sim_buffer_size(uint32_t num_packets);
/* next_power_of_two(n) - 1 (0 for n <= 1). */
uint64_t device_sim_expected_index_mask(uint32_t num_packets);

/* ---- Errors ------------------------------------------------------------ */

#define DEVICE_SIM_OK 0
#define DEVICE_SIM_ERR_ARGUMENT (-1)  /* NULL buffer, NULL lanes... */
#define DEVICE_SIM_ERR_NO_PACKET (-2) /* free stack stayed empty until the timeout */
#define DEVICE_SIM_ERR_TIMEOUT (-3)   /* READY was not cleared before the timeout */
const char* device_sim_error_string(int error);

/* ---- One wave ------------------------------------------------------------ */

/* Runs the whole device protocol for one wave (the phase-bit protocol for a
 * buffer attached with device_sim_phase_attach, see device_sim_phase.h; the
 * classic one otherwise): lanes[i][0..7] are the inputs
 * of each lane i set in activemask, lanes[i][0..1] receive the host's answer.
 * Lanes not in activemask are neither read nor written (lanes may be NULL
 * when activemask is 0). The timeout covers both waiting for a free packet
 * and waiting for the host; 0 means the default of 10 s (never "forever").
 * Returns DEVICE_SIM_OK or a negative DEVICE_SIM_ERR_*. On
 * DEVICE_SIM_ERR_TIMEOUT the packet is left with the host (not returned to
 * the free stack), as a real wave would still be spinning on it. */
int device_sim_hostcall(void* buffer, uint32_t service, uint64_t activemask,
                        uint64_t lanes[64][8], uint64_t timeout_ns);

/* ---- Protocol steps, for crafting traffic ------------------------------ */

/* Step 1: pops a tagged packet pointer from the free stack into *ptr_out.
 * Retries while the stack is empty until timeout_ns. */
int device_sim_pop_free(void* buffer, uint64_t* ptr_out, uint64_t timeout_ns);
/* Step 2: writes service, activemask, control = READY and the active lanes'
 * words into the packet that `ptr` designates (index = ptr & index_mask). */
void device_sim_fill(void* buffer, uint64_t ptr, uint32_t service, uint64_t activemask,
                     const uint64_t lanes[64][8]);
/* Step 3: pushes `ptr` onto the ready stack (next = old top, release CAS).
 * Writes the `next` word of the packet header at index ptr & index_mask. */
void device_sim_push_ready(void* buffer, uint64_t ptr);
/* Pushes `ptr` onto the ready stack only if the stack is empty, without
 * touching any packet header (for indices outside the buffer whose header
 * must not be written). Returns true if pushed. */
bool device_sim_push_ready_raw_if_empty(void* buffer, uint64_t ptr);
/* Step 4: adds 1 to the doorbell signal named in the buffer header, as a
 * wave rings (step 4 above). */
void device_sim_ring_doorbell(void* buffer);
/* Step 5: spins until READY of the packet `ptr` designates is clear. */
int device_sim_wait_served(void* buffer, uint64_t ptr, uint64_t timeout_ns);
/* Step 6: copies slot[0..1] of each lane in activemask back into lanes. */
void device_sim_read_results(void* buffer, uint64_t ptr, uint64_t activemask,
                             uint64_t lanes[64][8]);
/* Step 7: pushes the packet back on the free stack with its tag incremented. */
void device_sim_push_free(void* buffer, uint64_t ptr);
/* The tagged pointer step 7 pushes for `ptr` (ptr + index_mask + 1, or
 * index_mask + 1 if that wraps to 0). */
uint64_t device_sim_next_tag(void* buffer, uint64_t ptr);

/* Non-blocking steps, for a driver that plays many waves on one thread as a
 * GPU does (each wave a state machine; see bench/hostcall_bench.c):
 * step 1 without waiting: pops a packet into *ptr_out and returns true, or
 * returns false at once when the free stack is empty. */
bool device_sim_try_pop_free(void* buffer, uint64_t* ptr_out);
/* Step 5 without waiting: true when the host has cleared READY of the packet
 * `ptr` designates (acquire, so its answer words may then be read). */
bool device_sim_is_served(void* buffer, uint64_t ptr);

/* Spins (yielding) until the ready stack is empty, i.e. the host detached it.
 * Returns DEVICE_SIM_OK or DEVICE_SIM_ERR_TIMEOUT. */
int device_sim_wait_ready_stack_empty(void* buffer, uint64_t timeout_ns);

/* Monotonic clock in nanoseconds. */
uint64_t device_sim_now_ns(void);

/* ---- FUNCTION_CALL helpers ----------------------------------------------- */

/* A host function with the FUNCTION_CALL signature: out = two independent
 * 64-bit mixes of all 7 inputs. */
void device_sim_fc_hash(uint64_t out[2], const uint64_t in[7]);
/* The same computation, for checking. */
void device_sim_fc_expected(const uint64_t in[7], uint64_t out[2]);
/* One FUNCTION_CALL of device_sim_fc_hash from every lane of `activemask`,
 * with inputs derived from `salt`, every active lane's answer checked.
 * Returns DEVICE_SIM_OK, a negative DEVICE_SIM_ERR_*, or 1 for a wrong answer. */
int device_sim_fc_checked_call(void* buffer, uint64_t activemask, uint64_t salt,
                               uint64_t timeout_ns);
/* Small deterministic PRNG (splitmix64) used by the wave drivers. */
uint64_t device_sim_rand(uint64_t* state);
/* A random non-zero lane mask: a mix of full, single-lane, sparse and dense
 * masks. */
uint64_t device_sim_random_mask(uint64_t* state);

/* ---- Many waves ----------------------------------------------------------- */

/* Per-call hooks of device_sim_run_waves. `fill` chooses the call: service,
 * activemask and the lanes' inputs (lanes is zeroed before). `check` sees the
 * inputs (in) and the returned words (out) and returns 0 if they are right;
 * a non-zero value is counted as a mismatch. Either may be NULL (fill NULL:
 * FUNCTION_CALL of device_sim_fc_hash with random masks and random inputs;
 * check NULL: with fill NULL, compare against device_sim_fc_expected,
 * otherwise accept everything). Called from the wave threads concurrently. */
typedef void (*device_sim_fill_fn)(void* user, uint32_t wave, uint32_t call, uint64_t* rng,
                                   uint32_t* service, uint64_t* activemask,
                                   uint64_t lanes[64][8]);
typedef int (*device_sim_check_fn)(void* user, uint32_t wave, uint32_t call, uint32_t service,
                                   uint64_t activemask, const uint64_t in[64][8],
                                   const uint64_t out[64][8]);

typedef struct device_sim_waves_config {
  /* wave w uses buffers[w % buffer_count], in the buffer's protocol
   * (phase-bit if attached with device_sim_phase_attach) */
  void* const* buffers;
  uint32_t buffer_count;
  uint32_t waves;           /* number of wave threads */
  uint32_t calls_per_wave;  /* calls per wave; 0 = until device_sim_waves_stop */
  uint64_t seed;
  uint64_t timeout_ns;      /* per call; 0 = 10 s */
  device_sim_fill_fn fill;
  device_sim_check_fn check;
  void* user;
  /* Optional: waves * calls_per_wave round-trip latencies, wave-major. */
  uint64_t* latencies_ns;
  /* Before each call, write a canary into slot[0..7] of the lanes not in
   * activemask and check after the call that the host left them alone. */
  bool check_inactive_lanes;
} device_sim_waves_config_t;

typedef struct device_sim_waves_result {
  uint64_t calls;         /* calls that completed (host answered) */
  uint64_t lanes_served;  /* active lanes over all completed calls */
  uint64_t mismatches;    /* calls whose check failed */
  uint64_t inactive_lane_writes; /* calls where an inactive lane's slot changed */
  uint64_t errors;        /* calls that returned an error */
  int first_error;        /* first negative return code, 0 if none */
  uint64_t elapsed_ns;    /* wall time from start to the last wave's end */
  char first_failure[256]; /* text describing the first mismatch or error */
} device_sim_waves_result_t;

/* A config for `waves` threads doing `calls_per_wave` calls each on
 * buffers[0..buffer_count) with the default FUNCTION_CALL fill and check,
 * `seed`, and `timeout_ns` per call; every other field zero. */
device_sim_waves_config_t device_sim_waves_config(void* const* buffers, uint32_t buffer_count,
                                                  uint32_t waves, uint32_t calls_per_wave,
                                                  uint64_t seed, uint64_t timeout_ns);

/* Starts config->waves threads, each doing its calls, joins them and fills
 * *result. Returns 0 if every call completed with a matching answer,
 * otherwise -1 (details in *result). */
int device_sim_run_waves(const device_sim_waves_config_t* config,
                         device_sim_waves_result_t* result);

/* Asynchronous variant: starts the threads and returns a handle; join with
 * device_sim_waves_join (which fills *result). */
typedef struct device_sim_waves device_sim_waves_t;
device_sim_waves_t* device_sim_waves_start(const device_sim_waves_config_t* config);
/* Asks every wave to stop after its current call (needed when
 * calls_per_wave is 0). Safe from any thread while the waves run. */
void device_sim_waves_stop(device_sim_waves_t* waves);
int device_sim_waves_join(device_sim_waves_t* waves, device_sim_waves_result_t* result);

#ifdef __cplusplus
}
#endif

#endif /* AMDGPU_DROPIN_DEVICE_SIM_H */
