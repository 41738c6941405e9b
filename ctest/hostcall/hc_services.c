/* The hostcall extension API (amdgpu_dropin_hostcall.h) as a C caller uses
 * it: argument checks, custom services per lane and per packet, buffer
 * scopes, failing handlers, registration and unregistration while waves post
 * requests (also from inside a handler), and the SANITIZER default and hook,
 * with requests encoded as the device libraries encode them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim.h"
#include "device_sim_services.h"
#include "hc_test.h"
#include "rochostcall.hpp"

#define PACKETS 8u
#define ERROR_VALUE AMDGPU_DROPIN_HOSTCALL_ERROR_VALUE

_Static_assert(sizeof(amdgpu_dropin_hostcall_packet_t) == 24 + 4096, "packet size");
_Static_assert(offsetof(amdgpu_dropin_hostcall_packet_t, buffer) == 0, "buffer offset");
_Static_assert(offsetof(amdgpu_dropin_hostcall_packet_t, service) == 8, "service offset");
_Static_assert(offsetof(amdgpu_dropin_hostcall_packet_t, reserved) == 12, "reserved offset");
_Static_assert(offsetof(amdgpu_dropin_hostcall_packet_t, activemask) == 16, "activemask offset");
_Static_assert(offsetof(amdgpu_dropin_hostcall_packet_t, slots) == 24, "slots offset");
_Static_assert(sizeof(amdgpu_dropin_hostcall_status_t) == 4, "status is 32-bit");

/* One call of `service` from the lanes of `mask`; lane i sends in[i][0..7]
 * = seed + i*8 + w. Returns the device_sim code; answers in lanes. */
static int call_service(void* buffer, uint32_t service, uint64_t mask, uint64_t seed,
                        uint64_t lanes[64][8]) {
  for (uint32_t lane = 0; lane < 64; ++lane) {
    for (uint32_t w = 0; w < 8; ++w) lanes[lane][w] = seed + lane * 8 + w;
  }
  return device_sim_hostcall(buffer, service, mask, lanes, HC_WAVES_TIMEOUT_NS);
}

/* ---- argument checks ------------------------------------------------------ */

static int32_t lane_answer_7(void* user, void* buffer, uint32_t service, uint32_t lane,
                             uint64_t* slot) {
  (void)user, (void)buffer, (void)service, (void)lane;
  slot[0] = 7;
  return 0;
}

static int32_t packet_nop(void* user, amdgpu_dropin_hostcall_packet_t* packet) {
  (void)user, (void)packet;
  return 0;
}

static void test_api_arguments(void) {
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_api_version() == AMDGPU_DROPIN_HOSTCALL_API_VERSION, "version");
  for (int32_t s = 0; s <= 7; ++s) {
    const char* text = amdgpu_dropin_hostcall_status_string(s);
    DROPIN_CHECK_MSG(text != NULL && strcmp(text, "unknown status") != 0, "status %d has no text", s);
  }
  DROPIN_CHECK_MSG(strcmp(amdgpu_dropin_hostcall_status_string(-1), "unknown status") == 0, "unknown");
  const uint32_t reserved[] = {0, AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL,
                               AMDGPU_DROPIN_HOSTCALL_SERVICE_PRINTF};
  for (size_t i = 0; i < 3; ++i) {
    DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_lane_handler(reserved[i], NULL, lane_answer_7, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE, "register reserved %u", reserved[i]);
    DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_packet_handler(reserved[i], NULL, packet_nop, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE, "register reserved %u", reserved[i]);
    DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(reserved[i], NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE, "unregister reserved %u", reserved[i]);
  }
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_lane_handler(50, NULL, NULL, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "NULL lane handler");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_packet_handler(50, NULL, NULL, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "NULL packet handler");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_lane_handler(50, (void*)(uintptr_t)0x1003, lane_answer_7,
                                                        NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "misaligned buffer");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(50, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED, "nothing registered");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_lane_handler(50, NULL, lane_answer_7, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_OK, "register");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_lane_handler(50, NULL, lane_answer_7, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED, "double registration");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_register_packet_handler(50, NULL, packet_nop, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED, "other kind, same scope");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(51, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED, "other id");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(50, (void*)(uintptr_t)0x1000) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED, "other scope");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(50, NULL) == AMDGPU_DROPIN_HOSTCALL_OK, "unregister");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(50, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED, "twice");
  uint64_t agent = 1;
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_devmem_enable(NULL, 0, &agent, 1) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "devmem: zero pool");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_devmem_enable(NULL, 5, NULL, 1) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "devmem: NULL agents");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_devmem_enable(NULL, 5, &agent, 0) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "devmem: no agent");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_devmem_enable(NULL, 5, &agent,
                                                AMDGPU_DROPIN_HOSTCALL_MAX_AGENTS + 1) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "devmem: too many agents");
  uint64_t zero_agent = 0;
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_devmem_enable(NULL, 5, &zero_agent, 1) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "devmem: zero agent handle");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_devmem_enable(NULL, 5, &agent, 1) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_POOL, "devmem: forged pool handle");
}

/* ---- per-lane custom service under random traffic ------------------------- */

#define SERVICE_LANE 100u

typedef struct lane_state {
  atomic_uint_fast64_t calls;
  void* const* buffers;
  uint32_t buffer_count;
  atomic_uint_fast64_t wrong_args;
} lane_state_t;

static int32_t lane_mix(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  lane_state_t* state = user;
  bool known = false;
  for (uint32_t i = 0; i < state->buffer_count; ++i) known |= state->buffers[i] == buffer;
  if (!known || service != SERVICE_LANE || lane >= 64) atomic_fetch_add(&state->wrong_args, 1);
  atomic_fetch_add(&state->calls, 1);
  uint64_t sum = 0;
  for (int w = 0; w < 8; ++w) sum += slot[w] * (uint64_t)(w + 1);
  slot[0] = sum ^ lane;
  slot[1] = ~slot[1];
  return 0;
}

static void fill_lane_service(void* user, uint32_t wave, uint32_t call, uint64_t* rng,
                              uint32_t* service, uint64_t* activemask, uint64_t lanes[64][8]) {
  (void)user, (void)wave, (void)call;
  *service = SERVICE_LANE;
  *activemask = device_sim_random_mask(rng);
  for (int lane = 0; lane < 64; ++lane) {
    for (int w = 0; w < 8; ++w) lanes[lane][w] = device_sim_rand(rng);
  }
}

static int check_lane_service(void* user, uint32_t wave, uint32_t call, uint32_t service,
                              uint64_t activemask, const uint64_t in[64][8],
                              const uint64_t out[64][8]) {
  (void)user, (void)wave, (void)call, (void)service;
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (!(activemask & (1ull << lane))) continue;
    uint64_t sum = 0;
    for (int w = 0; w < 8; ++w) sum += in[lane][w] * (uint64_t)(w + 1);
    if (out[lane][0] != (sum ^ lane) || out[lane][1] != ~in[lane][1]) return 1;
  }
  return 0;
}

static void test_lane_handler_under_traffic(void) {
  void* buffers[2] = {hc_alloc_buffer(PACKETS), hc_alloc_buffer(PACKETS)};
  DROPIN_REQUIRE_MSG(hc_enable(buffers[0], PACKETS, NULL) && hc_enable(buffers[1], PACKETS, NULL),
             "enable");
  lane_state_t state = {.buffers = buffers, .buffer_count = 2};
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_LANE, NULL, lane_mix, &state) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register");
  device_sim_waves_config_t config = device_sim_waves_config(buffers, 2, 4, 200, 42, HC_WAVES_TIMEOUT_NS);
  config.fill = fill_lane_service;
  config.check = check_lane_service;
  config.check_inactive_lanes = true;
  device_sim_waves_result_t result;
  int rc = device_sim_run_waves(&config, &result);
  DROPIN_CHECK_MSG(rc == 0 && result.calls == 800, "waves: %llu calls, %s", (unsigned long long)result.calls,
           result.first_failure);
  DROPIN_CHECK_MSG(result.inactive_lane_writes == 0, "inactive lanes written");
  DROPIN_CHECK_MSG(atomic_load(&state.calls) == result.lanes_served, "%llu handler calls for %llu lanes",
           (unsigned long long)atomic_load(&state.calls), (unsigned long long)result.lanes_served);
  DROPIN_CHECK_MSG(atomic_load(&state.wrong_args) == 0, "handler saw wrong buffer/service/lane");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_LANE, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister");
  hc_disable_and_free(buffers[0]);
  hc_disable_and_free(buffers[1]);
}

/* ---- per-packet handler, buffer scopes, failures, unknown ids ------------- */

#define SERVICE_PACKET 101u
#define SERVICE_FAILING 102u
#define SERVICE_UNKNOWN 9999u

typedef struct packet_state {
  void* buffer;
  uint64_t last_mask;
  uint32_t calls;
  bool bad;
} packet_state_t;

/* Answers popcount(mask) and the lane; tries to widen the write-back (the
 * library must ignore the header it changes). */
static int32_t packet_count(void* user, amdgpu_dropin_hostcall_packet_t* packet) {
  packet_state_t* state = user;
  state->calls++;
  state->last_mask = packet->activemask;
  if (packet->buffer != state->buffer || packet->service != SERVICE_PACKET || packet->reserved != 0) {
    state->bad = true;
  }
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (packet->activemask & (1ull << lane)) {
      packet->slots[lane][0] = (uint64_t)__builtin_popcountll(packet->activemask);
      packet->slots[lane][1] = lane;
    } else if (packet->slots[lane][0] != 0) {
      state->bad = true; /* inactive lanes are zero in the copy */
    } else {
      packet->slots[lane][0] = 0xBADBADu;
    }
  }
  packet->activemask = ~0ull;
  return 0;
}

static int32_t lane_fail_odd(void* user, void* buffer, uint32_t service, uint32_t lane,
                             uint64_t* slot) {
  (void)user, (void)buffer, (void)service;
  slot[1] = 42;
  slot[0] = lane;
  return (lane & 1) ? -5 : 0;
}

static int32_t packet_fail(void* user, amdgpu_dropin_hostcall_packet_t* packet) {
  (void)user;
  for (int lane = 0; lane < 64; ++lane) packet->slots[lane][1] = 43;
  return 1;
}

static void test_packet_handler_scopes_and_failures(void) {
  void* a = hc_alloc_buffer(PACKETS);
  void* b = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(a, PACKETS, NULL) && hc_enable(b, PACKETS, NULL), "enable");
  packet_state_t state = {.buffer = a};
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_packet_handler(SERVICE_PACKET, a, packet_count, &state) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register on A");
  uint64_t lanes[64][8];
  const uint64_t mask = 0x8000000000000013ull;
  DROPIN_REQUIRE_MSG(call_service(a, SERVICE_PACKET, mask, 100, lanes) == DEVICE_SIM_OK, "call A");
  DROPIN_CHECK_MSG(state.calls == 1 && state.last_mask == mask && !state.bad, "packet handler: %u calls, "
           "mask %llx, bad %d", state.calls, (unsigned long long)state.last_mask, state.bad);
  DROPIN_CHECK_MSG(lanes[0][0] == 4 && lanes[1][1] == 1 && lanes[63][0] == 4 && lanes[63][1] == 63,
           "packet answers");
  /* The device_sim only copies back active lanes; check the buffer itself. */
  DROPIN_CHECK_MSG(lanes[2][0] == 100 + 2 * 8, "inactive lane's words changed on the caller side");
  /* B has no handler: unknown. */
  DROPIN_REQUIRE_MSG(call_service(b, SERVICE_PACKET, 0x3, 200, lanes) == DEVICE_SIM_OK, "call B");
  DROPIN_CHECK_MSG(lanes[0][0] == ERROR_VALUE && lanes[1][0] == ERROR_VALUE && lanes[0][1] == 201,
           "B without handler: %llx", (unsigned long long)lanes[0][0]);
  /* A handler for every buffer: B uses it, A keeps its own. */
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_PACKET, NULL, lane_answer_7, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register global");
  DROPIN_REQUIRE_MSG(call_service(b, SERVICE_PACKET, 0x1, 300, lanes) == DEVICE_SIM_OK, "call B");
  DROPIN_CHECK_MSG(lanes[0][0] == 7, "B: global handler");
  DROPIN_REQUIRE_MSG(call_service(a, SERVICE_PACKET, 0x1, 300, lanes) == DEVICE_SIM_OK, "call A");
  DROPIN_CHECK_MSG(lanes[0][0] == 1 && state.calls == 2, "A: own handler first");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_PACKET, a) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister A's");
  DROPIN_REQUIRE_MSG(call_service(a, SERVICE_PACKET, 0x1, 300, lanes) == DEVICE_SIM_OK, "call A");
  DROPIN_CHECK_MSG(lanes[0][0] == 7 && state.calls == 2, "A falls back to the global handler");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_PACKET, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister global");

  /* Failing handlers: the lane (or every lane) gets the error value. */
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_FAILING, NULL, lane_fail_odd, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register failing");
  DROPIN_REQUIRE_MSG(call_service(a, SERVICE_FAILING, 0xF, 400, lanes) == DEVICE_SIM_OK, "call failing");
  DROPIN_CHECK_MSG(lanes[0][0] == 0 && lanes[2][0] == 2, "even lanes answered");
  DROPIN_CHECK_MSG(lanes[1][0] == ERROR_VALUE && lanes[3][0] == ERROR_VALUE && lanes[1][1] == 42,
           "odd lanes failed: %llx %llx", (unsigned long long)lanes[1][0],
           (unsigned long long)lanes[1][1]);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_FAILING, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_packet_handler(SERVICE_FAILING, b, packet_fail, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register failing packet handler");
  DROPIN_REQUIRE_MSG(call_service(b, SERVICE_FAILING, 0x5, 500, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(lanes[0][0] == ERROR_VALUE && lanes[2][0] == ERROR_VALUE && lanes[2][1] == 43,
           "packet failure");

  /* Unknown ids keep today's answer; the buffers keep working. */
  DROPIN_REQUIRE_MSG(call_service(a, SERVICE_UNKNOWN, 0x80000001ull, 600, lanes) == DEVICE_SIM_OK, "unknown");
  DROPIN_CHECK_MSG(lanes[0][0] == ERROR_VALUE && lanes[31][0] == ERROR_VALUE && lanes[31][1] == 600 + 31 * 8 + 1,
           "unknown id answer");
  DROPIN_CHECK_MSG(device_sim_fc_checked_call(a, ~0ull, 9, HC_WAVES_TIMEOUT_NS) == 0, "FUNCTION_CALL still served");

  /* Disabling B ends B's own registration. */
  hc_disable(b, NULL);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_FAILING, b) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED, "B's handler ended with B");
  hc_disable(a, NULL);
  hc_free_buffer(a);
  hc_free_buffer(b);
}

/* ---- registration churn under traffic ------------------------------------- */

#define SERVICE_CHURN 103u
#define CHURN_ROUNDS 300

typedef struct churn_round {
  atomic_int inside;
  atomic_int calls;
} churn_round_t;

static atomic_int g_churn_violations;

static int32_t churn_lane(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  (void)buffer, (void)service, (void)lane;
  churn_round_t* round = user; /* freed right after its unregister returns */
  atomic_fetch_add(&round->inside, 1);
  atomic_fetch_add(&round->calls, 1);
  for (int i = 0; i < 50; ++i) __asm__ volatile("" ::: "memory");
  slot[0] = slot[0] + 1;
  atomic_fetch_sub(&round->inside, 1);
  return 0;
}

static int32_t churn_packet(void* user, amdgpu_dropin_hostcall_packet_t* packet) {
  churn_round_t* round = user;
  atomic_fetch_add(&round->inside, 1);
  atomic_fetch_add(&round->calls, 1);
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (packet->activemask & (1ull << lane)) packet->slots[lane][0] += 1;
  }
  sched_yield();
  atomic_fetch_sub(&round->inside, 1);
  return 0;
}

static void fill_churn(void* user, uint32_t wave, uint32_t call, uint64_t* rng, uint32_t* service,
                       uint64_t* activemask, uint64_t lanes[64][8]) {
  (void)user, (void)wave, (void)call;
  *service = SERVICE_CHURN;
  *activemask = device_sim_random_mask(rng);
  for (int lane = 0; lane < 64; ++lane) lanes[lane][0] = device_sim_rand(rng) >> 1;
}

/* Every active lane is answered by a handler (input + 1) or, while none is
 * registered, with the error value; never anything else. */
static atomic_ullong g_churn_wave_calls; /* answered wave calls so far */

static int check_churn(void* user, uint32_t wave, uint32_t call, uint32_t service, uint64_t activemask,
                       const uint64_t in[64][8], const uint64_t out[64][8]) {
  (void)user, (void)wave, (void)call, (void)service;
  atomic_fetch_add(&g_churn_wave_calls, 1);
  for (uint32_t lane = 0; lane < 64; ++lane) {
    if (!(activemask & (1ull << lane))) continue;
    if (out[lane][0] != in[lane][0] + 1 && out[lane][0] != ERROR_VALUE) return 1;
  }
  return 0;
}

static void test_register_unregister_under_traffic(void) {
  void* buffers[2] = {hc_alloc_buffer(PACKETS), hc_alloc_buffer(PACKETS)};
  DROPIN_REQUIRE_MSG(hc_enable(buffers[0], PACKETS, NULL) && hc_enable(buffers[1], PACKETS, NULL),
             "enable");
  device_sim_waves_config_t config = device_sim_waves_config(buffers, 2, 4, 0, 7, HC_WAVES_TIMEOUT_NS);
  config.fill = fill_churn;
  config.check = check_churn;
  device_sim_waves_t* waves = device_sim_waves_start(&config);
  DROPIN_REQUIRE_MSG(waves != NULL, "start waves");
  /* Traffic first (wave threads start slowly under sanitizers): the rounds
   * below should meet calls. The wait is a hang detector. */
  uint64_t deadline = hc_now_ms() + 20000;
  while (atomic_load(&g_churn_wave_calls) < 20 && hc_now_ms() < deadline) hc_sleep_ms(1);
  DROPIN_CHECK_MSG(atomic_load(&g_churn_wave_calls) >= 20, "the waves made %llu calls in 20 s",
           (unsigned long long)atomic_load(&g_churn_wave_calls));
  int served_rounds = 0;
  for (int i = 0; i < CHURN_ROUNDS; ++i) {
    churn_round_t* round = calloc(1, sizeof(*round));
    void* scope = (i % 3 == 2) ? buffers[i % 2] : NULL;
    amdgpu_dropin_hostcall_status_t rc =
        (i & 1) ? amdgpu_dropin_hostcall_register_packet_handler(SERVICE_CHURN, scope, churn_packet, round)
                : amdgpu_dropin_hostcall_register_lane_handler(SERVICE_CHURN, scope, churn_lane, round);
    DROPIN_CHECK_MSG(rc == AMDGPU_DROPIN_HOSTCALL_OK, "round %d: register: %d", i, rc);
    /* Until a call reaches the handler, or 2 ms (the round then sees none). */
    uint64_t round_end = hc_now_ms() + 2;
    for (int spin = 0; atomic_load(&round->calls) == 0 && (spin < 20 || hc_now_ms() < round_end); ++spin) {
      sched_yield();
    }
    rc = amdgpu_dropin_hostcall_unregister_handler(SERVICE_CHURN, scope);
    DROPIN_CHECK_MSG(rc == AMDGPU_DROPIN_HOSTCALL_OK, "round %d: unregister: %d", i, rc);
    if (atomic_load(&round->inside) != 0) atomic_fetch_add(&g_churn_violations, 1);
    if (atomic_load(&round->calls) > 0) served_rounds++;
    /* A call after the return would touch freed memory (ASan reports it). */
    free(round);
  }
  device_sim_waves_stop(waves);
  device_sim_waves_result_t result;
  device_sim_waves_join(waves, &result);
  DROPIN_CHECK_MSG(result.errors == 0 && result.mismatches == 0, "waves: %s", result.first_failure);
  DROPIN_CHECK_MSG(atomic_load(&g_churn_violations) == 0, "%d handler calls still running after unregister",
           atomic_load(&g_churn_violations));
  DROPIN_CHECK_MSG(served_rounds > 0, "no round saw a call (%llu calls in total)",
           (unsigned long long)result.calls);
  printf("  churn: %d rounds, %d with calls, %llu wave calls\n", CHURN_ROUNDS, served_rounds,
         (unsigned long long)result.calls);
  hc_disable_and_free(buffers[0]);
  hc_disable_and_free(buffers[1]);
}

/* ---- unregistering from inside a handler ---------------------------------- */

#define SERVICE_SELF 104u
#define SERVICE_OTHER 105u
#define SERVICE_FREEING 106u

static amdgpu_dropin_hostcall_status_t g_self_rc = -1;
static amdgpu_dropin_hostcall_status_t g_other_rc = -1;

static int g_self_calls;

static int32_t unregister_self(void* user, void* buffer, uint32_t service, uint32_t lane,
                               uint64_t* slot) {
  (void)user, (void)buffer, (void)lane;
  g_self_calls++;
  if (g_self_rc == (amdgpu_dropin_hostcall_status_t)-1) {
    g_self_rc = amdgpu_dropin_hostcall_unregister_handler(service, NULL);
  }
  slot[0] = 5;
  return 0;
}

/* The handler's own data, freed by the lane that unregisters it: once the
 * unregister returned, no other lane of the packet may call the handler
 * (ASan reports a use after free if one does; the count says it too). */
typedef struct self_freeing {
  uint64_t answer;
  int calls;
} self_freeing_t;

static int g_freeing_calls_at_free;

static int32_t unregister_and_free(void* user, void* buffer, uint32_t service, uint32_t lane,
                                   uint64_t* slot) {
  (void)buffer, (void)lane;
  self_freeing_t* data = user;
  data->calls++;
  slot[0] = data->answer;
  if (amdgpu_dropin_hostcall_unregister_handler(service, NULL) != AMDGPU_DROPIN_HOSTCALL_OK) return 1;
  g_freeing_calls_at_free = data->calls;
  free(data);
  return 0;
}

static void test_lane_handler_frees_its_data_after_unregistering(void) {
  void* buffer = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "enable");
  self_freeing_t* data = calloc(1, sizeof *data);
  DROPIN_REQUIRE_MSG(data != NULL, "calloc");
  data->answer = 31;
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_FREEING, NULL, unregister_and_free,
                                                          data) == AMDGPU_DROPIN_HOSTCALL_OK,
             "register");
  uint64_t lanes[64][8];
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_FREEING, ~0ull, 1, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(g_freeing_calls_at_free == 1, "%d calls before the free", g_freeing_calls_at_free);
  DROPIN_CHECK_MSG(lanes[0][0] == 31, "lane 0 (the unregistering call) answered: %llu",
           (unsigned long long)lanes[0][0]);
  int wrong = 0;
  for (int lane = 1; lane < 64; ++lane) wrong += lanes[lane][0] != ERROR_VALUE;
  DROPIN_CHECK_MSG(wrong == 0, "%d of the 63 lanes after the unregister did not get the error value", wrong);
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_FREEING, 0x3, 1, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(lanes[0][0] == ERROR_VALUE && lanes[1][0] == ERROR_VALUE, "unregistered");
  hc_disable_and_free(buffer);
}

static int32_t unregister_other(void* user, amdgpu_dropin_hostcall_packet_t* packet) {
  (void)user;
  g_other_rc = amdgpu_dropin_hostcall_unregister_handler(SERVICE_OTHER, NULL);
  for (int lane = 0; lane < 64; ++lane) packet->slots[lane][0] = 6;
  return 0;
}

static void test_unregister_from_inside(void) {
  void* buffer = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "enable");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_SELF, NULL, unregister_self, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register");
  uint64_t lanes[64][8];
  /* A deadlock would show as a timeout here. */
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_SELF, 0x7, 1, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(g_self_rc == AMDGPU_DROPIN_HOSTCALL_OK, "unregister from inside: %d", g_self_rc);
  DROPIN_CHECK_MSG(g_self_calls == 1, "%d handler calls (want 1: none after the unregister)", g_self_calls);
  DROPIN_CHECK_MSG(lanes[0][0] == 5, "the unregistering call answered its lane");
  DROPIN_CHECK_MSG(lanes[1][0] == ERROR_VALUE && lanes[2][0] == ERROR_VALUE,
           "the lanes after the unregister get the error value (%llu, %llu)",
           (unsigned long long)lanes[1][0], (unsigned long long)lanes[2][0]);
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_SELF, 0x1, 1, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(lanes[0][0] == ERROR_VALUE, "unregistered");

  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_OTHER, NULL, lane_answer_7, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register other");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_packet_handler(SERVICE_SELF, buffer, unregister_other,
                                                            NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
             "register");
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_OTHER, 0x1, 1, lanes) == DEVICE_SIM_OK, "call other");
  DROPIN_CHECK_MSG(lanes[0][0] == 7, "other served");
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_SELF, 0x1, 1, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(g_other_rc == AMDGPU_DROPIN_HOSTCALL_OK && lanes[0][0] == 6, "unregister another: %d",
           g_other_rc);
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_OTHER, 0x1, 1, lanes) == DEVICE_SIM_OK, "call other");
  DROPIN_CHECK_MSG(lanes[0][0] == ERROR_VALUE, "other unregistered");
  hc_disable_and_free(buffer);
}

/* ---- disable, then re-enable, from inside the buffer's own handler --------- */

#define SERVICE_REENABLE 108u

typedef struct reenable {
  void* buffer;
  int calls;
  amdgpu_dropin_hostcall_status_t disable_rc;
  amdgpu_dropin_hostcall_status_t enable_rc;
  bool seed_enable;
} reenable_t;

static int32_t disable_and_reenable(void* user, amdgpu_dropin_hostcall_packet_t* packet) {
  reenable_t* r = user;
  r->calls++;
  r->disable_rc = amdgpu_dropin_hostcall_disable(r->buffer, NULL);
  /* The bitmap is not cleared: a wave holds its bit right now. */
  uint32_t* bitmap = hc_bitmap_of(r->buffer);
  r->enable_rc = amdgpu_dropin_hostcall_enable(r->buffer, PACKETS, NULL,
                                               bitmap != NULL ? AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT
                                                              : AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC,
                                               bitmap);
  r->seed_enable = enableHostcalls(r->buffer, PACKETS, NULL);
  for (int lane = 0; lane < 64; ++lane) {
    if (packet->activemask >> lane & 1) packet->slots[lane][0] = 6000 + (uint64_t)lane;
  }
  return 0;
}

/* The listener is still inside the buffer while its handler runs: enable
 * from there is refused (nothing lost: the packet is answered once); from
 * the test thread afterwards it works (waiting for the listener to leave). */
static void test_reenable_from_inside_the_buffers_own_handler(void) {
  void* buffer = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "enable");
  reenable_t r = {.buffer = buffer};
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_packet_handler(SERVICE_REENABLE, NULL, disable_and_reenable,
                                                            &r) == AMDGPU_DROPIN_HOSTCALL_OK,
             "register");
  uint64_t lanes[64][8];
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_REENABLE, 0x5, 1, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(r.disable_rc == AMDGPU_DROPIN_HOSTCALL_OK, "disable from inside: %d", r.disable_rc);
  DROPIN_CHECK_MSG(r.enable_rc == AMDGPU_DROPIN_HOSTCALL_ERROR_BUSY, "enable from inside: %d (want BUSY)",
           r.enable_rc);
  DROPIN_CHECK_MSG(!r.seed_enable, "enableHostcalls from inside must be refused");
  DROPIN_CHECK_MSG(lanes[0][0] == 6000 && lanes[2][0] == 6002, "the packet's answer (%llu, %llu)",
           (unsigned long long)lanes[0][0], (unsigned long long)lanes[2][0]);
  DROPIN_CHECK_MSG(r.calls == 1, "%d handler calls for 1 request", r.calls);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_disable(buffer, NULL) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED,
           "the buffer stayed disabled");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_REENABLE, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
             "unregister");
  /* From outside the handler: enabled again and served. */
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "re-enable from the test thread");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_REENABLE, NULL, lane_answer_7, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register");
  DROPIN_REQUIRE_MSG(call_service(buffer, SERVICE_REENABLE, 0x1, 1, lanes) == DEVICE_SIM_OK, "call");
  DROPIN_CHECK_MSG(lanes[0][0] == 7, "served after re-enable: %llu", (unsigned long long)lanes[0][0]);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_REENABLE, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister");
  hc_disable_and_free(buffer);
}

/* ---- fork while a handler runs --------------------------------------------- */

#define SERVICE_FORK 107u

static atomic_int g_fork_inside;
static atomic_int g_fork_release;
static uint64_t g_fork_answer;

static int32_t blocking_lane(void* user, void* buffer, uint32_t service, uint32_t lane, uint64_t* slot) {
  (void)user, (void)buffer, (void)service, (void)lane;
  atomic_store(&g_fork_inside, 1);
  while (!atomic_load(&g_fork_release)) sched_yield();
  slot[0] = 8;
  return 0;
}

static void* fork_wave(void* buffer) {
  uint64_t lanes[64][8];
  g_fork_answer = call_service(buffer, SERVICE_FORK, 1, 0, lanes) == DEVICE_SIM_OK ? lanes[0][0] : 0;
  return NULL;
}

/* In the child the parent's running call never ends (its thread is not
 * there), and the parent's registrations are not the child's (a child
 * inherits none): unregistering finds nothing and waits for nothing; the
 * child registers and unregisters its own. */
static int child_unregister_after_fork(void) {
  if (amdgpu_dropin_hostcall_unregister_handler(SERVICE_FORK, NULL) != AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED) {
    return 1;
  }
  if (amdgpu_dropin_hostcall_register_lane_handler(SERVICE_FORK, NULL, blocking_lane, NULL) !=
      AMDGPU_DROPIN_HOSTCALL_OK) {
    return 2;
  }
  return amdgpu_dropin_hostcall_unregister_handler(SERVICE_FORK, NULL) == AMDGPU_DROPIN_HOSTCALL_OK ? 0 : 3;
}

static void test_fork_while_a_handler_runs(void) {
  void* buffer = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "enable");
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_lane_handler(SERVICE_FORK, NULL, blocking_lane, NULL) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register");
  pthread_t wave;
  DROPIN_REQUIRE_MSG(pthread_create(&wave, NULL, fork_wave, buffer) == 0, "wave thread");
  while (!atomic_load(&g_fork_inside)) sched_yield();
  hc_child_result_t r;
  bool forked = hc_fork_child(child_unregister_after_fork, HC_CHILD_TIMEOUT_MS, &r);
  atomic_store(&g_fork_release, 1);
  pthread_join(wave, NULL);
  DROPIN_CHECK_MSG(forked && r.exited && r.exit_code == 0, "child: %s", hc_child_describe(&r));
  DROPIN_CHECK_MSG(g_fork_answer == 8, "the parent's call completed: %llu", (unsigned long long)g_fork_answer);
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(SERVICE_FORK, NULL) == AMDGPU_DROPIN_HOSTCALL_OK,
           "unregister in the parent");
  hc_disable_and_free(buffer);
}

/* ---- SANITIZER ------------------------------------------------------------ */

static const uint64_t kWorkgroup[3] = {3, 1, 2};

/* Child: reports through the default (printed, no abort), malformed ones too. */
static int child_sanitizer_default(void) {
  hc_hsa_init();
  void* buffer = hc_alloc_buffer(PACKETS);
  if (!hc_enable(buffer, PACKETS, NULL)) return 2;
  uint64_t address[64];
  for (int lane = 0; lane < 64; ++lane) address[lane] = 0x7000000000ull + 16u * (uint64_t)lane;
  if (device_sim_sanitizer_report(buffer, 0x8000000000000005ull, address, 0xabcdef, kWorkgroup, true,
                                  false, 8, HC_WAVES_TIMEOUT_NS) != DEVICE_SIM_OK) {
    return 3;
  }
  /* Malformed: every word all-ones; an empty packet. */
  uint64_t lanes[64][8];
  memset(lanes, 0xFF, sizeof(lanes));
  if (device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_SANITIZER, 1ull << 40, lanes, HC_WAVES_TIMEOUT_NS) !=
      DEVICE_SIM_OK) {
    return 4;
  }
  if (device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_SANITIZER, 0, lanes, HC_WAVES_TIMEOUT_NS) != DEVICE_SIM_OK) {
    return 5;
  }
  if (device_sim_fc_checked_call(buffer, ~0ull, 3, HC_WAVES_TIMEOUT_NS) != 0) return 6;
  hc_disable_and_free(buffer);
  return 0;
}

static void test_sanitizer_default(void) {
  static const char* const env[] = {"AMD_LOG_LEVEL=0", NULL};
  hc_child_result_t r;
  HC_CHILD_OK("sanitizer_default", env, HC_CHILD_TIMEOUT_MS, &r);
  DROPIN_CHECK_MSG(hc_contains(r.err, "write of 8 bytes, pc 0xabcdef, workgroup (3, 1, 2)"),
           "decoded report missing; stderr: %s", r.err);
  DROPIN_CHECK_MSG(hc_contains(r.err, "lane 63: address 0x00000070000003f0 id 63"), "lane 63; stderr: %s", r.err);
  DROPIN_CHECK_MSG(hc_contains(r.err, "lane  2: address 0x0000007000000020 id 2"), "lane 2; stderr: %s", r.err);
  DROPIN_CHECK_MSG(hc_contains(r.err, "lane 40: address 0xffffffffffffffff"), "malformed report; stderr: %s",
           r.err);
  int headers = hc_count_occurrences(r.err, "address sanitizer report");
  DROPIN_CHECK_MSG(headers == 2, "%d reports printed (want 2: the empty packet prints nothing)", headers);
}

typedef struct sanitizer_capture {
  uint64_t mask;
  uint64_t slots[64][8];
  int packets;
} sanitizer_capture_t;

static int32_t sanitizer_hook(void* user, amdgpu_dropin_hostcall_packet_t* packet) {
  sanitizer_capture_t* capture = user;
  capture->packets++;
  capture->mask = packet->activemask;
  memcpy(capture->slots, packet->slots, sizeof(capture->slots));
  return 0;
}

static void test_sanitizer_hook(void) {
  void* buffer = hc_alloc_buffer(PACKETS);
  DROPIN_REQUIRE_MSG(hc_enable(buffer, PACKETS, NULL), "enable");
  static sanitizer_capture_t capture;
  DROPIN_REQUIRE_MSG(amdgpu_dropin_hostcall_register_packet_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_SANITIZER,
                                                            NULL, sanitizer_hook, &capture) ==
                 AMDGPU_DROPIN_HOSTCALL_OK, "register hook");
  uint64_t address[64] = {0};
  address[1] = 0x1000;
  address[7] = 0x2000;
  DROPIN_REQUIRE_MSG(device_sim_sanitizer_report(buffer, 0x82, address, 0x4444, kWorkgroup, false, true, 2,
                                         HC_WAVES_TIMEOUT_NS) == DEVICE_SIM_OK, "report");
  DROPIN_CHECK_MSG(capture.packets == 1 && capture.mask == 0x82, "one whole packet: %d, %llx", capture.packets,
           (unsigned long long)capture.mask);
  uint64_t expect[8];
  device_sim_encode_sanitizer(expect, 0x2000, 0x4444, kWorkgroup, 7, false, true, 2);
  DROPIN_CHECK_MSG(memcmp(capture.slots[7], expect, sizeof(expect)) == 0, "lane 7 words as encoded");
  DROPIN_CHECK_MSG(capture.slots[7][6] == DEVICE_SIM_SANITIZER_RECOVERABLE, "recoverable read");
  DROPIN_CHECK_MSG(capture.slots[0][0] == 0, "inactive lane is zero in the copy");
  DROPIN_CHECK_MSG(amdgpu_dropin_hostcall_unregister_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_SANITIZER, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_OK, "unregister");
  hc_disable_and_free(buffer);
}

int main(int argc, char** argv) {
  static const hc_child_case_t cases[] = {
      {"sanitizer_default", child_sanitizer_default},
      {NULL, NULL},
  };
  hc_child_main(argc, argv, cases);
  hc_hsa_init();
  HC_RUN(test_api_arguments);
  HC_RUN(test_lane_handler_under_traffic);
  HC_RUN(test_packet_handler_scopes_and_failures);
  HC_RUN(test_register_unregister_under_traffic);
  HC_RUN(test_unregister_from_inside);
  HC_RUN(test_lane_handler_frees_its_data_after_unregistering);
  HC_RUN(test_reenable_from_inside_the_buffers_own_handler);
  HC_RUN(test_fork_while_a_handler_runs);
  HC_RUN(test_sanitizer_default);
  HC_RUN(test_sanitizer_hook);
  return dropin_check_exit_code();
}
