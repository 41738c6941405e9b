/* Device simulator: whole hostcall calls in either protocol (the steps of
 * device_sim.c and device_sim_phase.c in order), the FUNCTION_CALL checking
 * helpers, and host threads acting as waves. Each atomic access says why its
 * ordering suffices. */
#define _GNU_SOURCE
#include "device_sim.h"
#include "device_sim_internal.h"
#include "device_sim_phase.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One call in either protocol (defined with the wave drivers below). */
static int phase_call(void* buffer, uint32_t service, uint64_t activemask, uint64_t lanes_in[64][8],
                      uint64_t lanes_out[64][8], bool canaries, uint64_t timeout_ns, bool* touched);
static int wave_call(void* buffer, uint32_t service, uint64_t activemask, uint64_t lanes_in[64][8],
                     uint64_t lanes_out[64][8], bool canaries, uint64_t timeout_ns, bool* touched);

int device_sim_hostcall(void* buffer, uint32_t service, uint64_t activemask,
                        uint64_t lanes[64][8], uint64_t timeout_ns) {
  if (buffer == NULL || (lanes == NULL && activemask != 0)) return DEVICE_SIM_ERR_ARGUMENT;
  bool touched = false;
  return wave_call(buffer, service, activemask, lanes, lanes, false, timeout_ns, &touched);
}

int device_sim_phase_hostcall(void* buffer, uint32_t service, uint64_t activemask,
                              uint64_t lanes[64][8], uint64_t timeout_ns) {
  if (buffer == NULL || (lanes == NULL && activemask != 0)) return DEVICE_SIM_ERR_ARGUMENT;
  bool touched = false;
  return phase_call(buffer, service, activemask, lanes, lanes, false, timeout_ns, &touched);
}

/* ---- FUNCTION_CALL helpers ---------------------------------------------- */

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

void device_sim_fc_expected(const uint64_t in[7], uint64_t out[2]) {
  uint64_t a = 0x243f6a8885a308d3ull;
  uint64_t b = 0x13198a2e03707344ull;
  for (int i = 0; i < 7; ++i) {
    a = mix64(a ^ (in[i] + (uint64_t)i));
    b = mix64(b + in[i] * 0x9e3779b97f4a7c15ull + (uint64_t)(i * 7 + 1));
  }
  out[0] = a;
  out[1] = b;
}

void device_sim_fc_hash(uint64_t out[2], const uint64_t in[7]) {
  uint64_t result[2];
  device_sim_fc_expected(in, result);
  out[0] = result[0];
  out[1] = result[1];
}

uint64_t device_sim_rand(uint64_t* state) {
  *state += 0x9e3779b97f4a7c15ull;
  return mix64(*state);
}

uint64_t device_sim_random_mask(uint64_t* state) {
  uint64_t r = device_sim_rand(state);
  uint64_t mask;
  switch (r & 7) {
    case 0: mask = ~0ull; break;                                   /* full wave */
    case 1: mask = 1ull << ((r >> 8) & 63); break;                 /* one lane */
    case 2: mask = 1ull; break;                                    /* lane 0 only */
    case 3: mask = 1ull << 63; break;                              /* last lane only */
    case 4: mask = device_sim_rand(state) & device_sim_rand(state); break; /* sparse */
    case 5: mask = device_sim_rand(state) | device_sim_rand(state); break; /* dense */
    case 6: mask = ~0ull >> ((r >> 8) & 63); break;                /* low prefix */
    default: mask = device_sim_rand(state); break;                 /* uniform */
  }
  return mask != 0 ? mask : 1ull << ((r >> 16) & 63);
}

/* ---- many waves ------------------------------------------------------------ */

#define CANARY 0xC0FFEE00DEADBEEFull

struct device_sim_waves;

typedef struct wave_thread {
  struct device_sim_waves* group;
  uint32_t wave;
  pthread_t thread;
  bool started;
  device_sim_waves_result_t result;
} wave_thread_t;

struct device_sim_waves {
  device_sim_waves_config_t config;
  _Atomic int stop;
  uint64_t start_ns;
  wave_thread_t* threads;
};

static void default_fill(uint32_t wave, uint32_t call, uint64_t* rng, uint32_t* service,
                         uint64_t* activemask, uint64_t lanes[64][8]) {
  *service = DEVICE_SIM_SERVICE_FUNCTION_CALL;
  *activemask = device_sim_random_mask(rng);
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (!(*activemask & (1ull << lane))) continue;
    lanes[lane][0] = (uint64_t)(uintptr_t)&device_sim_fc_hash;
    /* Word 1 names the call and lane, so a result delivered to the wrong
     * lane or the wrong wave is caught. */
    lanes[lane][1] = ((uint64_t)wave << 40) ^ ((uint64_t)call << 8) ^ lane;
    for (int w = 2; w < 8; ++w) lanes[lane][w] = device_sim_rand(rng);
  }
}

device_sim_waves_config_t device_sim_waves_config(void* const* buffers, uint32_t buffer_count,
                                                  uint32_t waves, uint32_t calls_per_wave,
                                                  uint64_t seed, uint64_t timeout_ns) {
  device_sim_waves_config_t config;
  memset(&config, 0, sizeof(config));
  config.buffers = buffers;
  config.buffer_count = buffer_count;
  config.waves = waves;
  config.calls_per_wave = calls_per_wave;
  config.seed = seed;
  config.timeout_ns = timeout_ns;
  return config;
}

int device_sim_fc_checked_call(void* buffer, uint64_t activemask, uint64_t salt,
                               uint64_t timeout_ns) {
  uint64_t lanes[DEVICE_SIM_LANES][DEVICE_SIM_SLOT_WORDS];
  uint64_t in[DEVICE_SIM_LANES][DEVICE_SIM_SLOT_WORDS];
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    lanes[lane][0] = (uint64_t)(uintptr_t)&device_sim_fc_hash;
    for (uint32_t w = 1; w < DEVICE_SIM_SLOT_WORDS; ++w) {
      lanes[lane][w] = salt * 0x9E3779B97F4A7C15ull + lane * DEVICE_SIM_SLOT_WORDS + w;
    }
  }
  memcpy(in, lanes, sizeof(in));
  int rc = device_sim_hostcall(buffer, DEVICE_SIM_SERVICE_FUNCTION_CALL, activemask, lanes,
                               timeout_ns);
  if (rc != DEVICE_SIM_OK) return rc;
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (!(activemask & (1ull << lane))) continue;
    uint64_t expected[2];
    device_sim_fc_expected(&in[lane][1], expected);
    if (lanes[lane][0] != expected[0] || lanes[lane][1] != expected[1]) return 1;
  }
  return DEVICE_SIM_OK;
}

static int default_check(uint64_t activemask, const uint64_t in[64][8], const uint64_t out[64][8],
                         char* why, size_t why_size) {
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (!(activemask & (1ull << lane))) continue;
    uint64_t expected[2];
    device_sim_fc_expected(&in[lane][1], expected);
    if (out[lane][0] != expected[0] || out[lane][1] != expected[1]) {
      snprintf(why, why_size,
               "lane %u: got {0x%016llx, 0x%016llx}, expected {0x%016llx, 0x%016llx}", lane,
               (unsigned long long)out[lane][0], (unsigned long long)out[lane][1],
               (unsigned long long)expected[0], (unsigned long long)expected[1]);
      return 1;
    }
  }
  return 0;
}

static void note_failure(device_sim_waves_result_t* result, const char* fmt, uint32_t wave,
                         uint32_t call, const char* detail) {
  if (result->first_failure[0] != '\0') return;
  snprintf(result->first_failure, sizeof(result->first_failure), fmt, wave, call, detail);
}

static void write_canaries(device_sim_payload_t* payload, uint64_t activemask) {
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (activemask & (1ull << lane)) continue;
    for (uint32_t w = 0; w < DEVICE_SIM_SLOT_WORDS; ++w) payload->slots[lane][w] = CANARY ^ lane ^ ((uint64_t)w << 56);
  }
}

static bool canaries_touched(const device_sim_payload_t* payload, uint64_t activemask) {
  for (uint32_t lane = 0; lane < DEVICE_SIM_LANES; ++lane) {
    if (activemask & (1ull << lane)) continue;
    for (uint32_t w = 0; w < DEVICE_SIM_SLOT_WORDS; ++w) {
      if (payload->slots[lane][w] != (CANARY ^ lane ^ ((uint64_t)w << 56))) return true;
    }
  }
  return false;
}

/* One phase-bit call (device_sim_phase.h steps 1-7): results land in
 * lanes_out[..][0..1]; with `canaries`, the inactive lanes' slots are
 * checked for host writes (*touched). lanes_in may equal lanes_out. */
static int phase_call(void* buffer, uint32_t service, uint64_t activemask, uint64_t lanes_in[64][8],
                      uint64_t lanes_out[64][8], bool canaries, uint64_t timeout_ns, bool* touched) {
  uint64_t deadline = device_sim_now_ns() + (timeout_ns ? timeout_ns : DEFAULT_TIMEOUT_NS);
  uint32_t index = 0;
  int rc = device_sim_phase_claim(buffer, &index, timeout_ns);
  if (rc != DEVICE_SIM_OK) return rc;
  device_sim_payload_t* payload = device_sim_phase_payload(buffer, index);
  if (canaries) write_canaries(payload, activemask);
  device_sim_phase_fill(buffer, index, service, activemask, (const uint64_t(*)[8])lanes_in);
  device_sim_phase_flip(buffer, index);
  device_sim_phase_ring_throttled(buffer);
  uint64_t now = device_sim_now_ns();
  rc = device_sim_phase_wait_answered(buffer, index, deadline > now ? deadline - now : 1);
  if (rc != DEVICE_SIM_OK) return rc;
  if (activemask != 0) device_sim_phase_read_results(buffer, index, activemask, lanes_out);
  if (canaries) *touched = canaries_touched(payload, activemask);
  device_sim_phase_clear_bit(buffer, index);
  return DEVICE_SIM_OK;
}

/* One call in the buffer's protocol (phase-bit if attached, else classic:
 * steps 1-7 of device_sim.h), as phase_call. */
static int wave_call(void* buffer, uint32_t service, uint64_t activemask, uint64_t lanes_in[64][8],
                     uint64_t lanes_out[64][8], bool canaries, uint64_t timeout_ns, bool* touched) {
  if (device_sim_phase_is_attached(buffer)) {
    return phase_call(buffer, service, activemask, lanes_in, lanes_out, canaries, timeout_ns, touched);
  }
  uint64_t deadline = device_sim_now_ns() + (timeout_ns ? timeout_ns : DEFAULT_TIMEOUT_NS);
  uint64_t ptr = 0;
  int rc = device_sim_pop_free(buffer, &ptr, timeout_ns);
  if (rc != DEVICE_SIM_OK) return rc;
  device_sim_payload_t* payload = device_sim_payload(buffer, ptr & device_sim_header(buffer)->index_mask);
  if (canaries) write_canaries(payload, activemask);
  device_sim_fill(buffer, ptr, service, activemask, (const uint64_t(*)[8])lanes_in);
  device_sim_push_ready(buffer, ptr);
  device_sim_ring_doorbell(buffer);
  uint64_t now = device_sim_now_ns();
  rc = device_sim_wait_served(buffer, ptr, deadline > now ? deadline - now : 1);
  if (rc != DEVICE_SIM_OK) return rc;
  if (activemask != 0) device_sim_read_results(buffer, ptr, activemask, lanes_out);
  if (canaries) *touched = canaries_touched(payload, activemask);
  device_sim_push_free(buffer, ptr);
  return DEVICE_SIM_OK;
}

static void* wave_main(void* arg) {
  wave_thread_t* self = (wave_thread_t*)arg;
  struct device_sim_waves* group = self->group;
  const device_sim_waves_config_t* config = &group->config;
  device_sim_waves_result_t* result = &self->result;
  void* buffer = config->buffers[self->wave % config->buffer_count];
  uint64_t rng = config->seed ^ mix64((uint64_t)self->wave + 1);
  uint64_t lanes_in[64][8];
  uint64_t lanes_out[64][8];
  char why[200];

  for (uint32_t call = 0; config->calls_per_wave == 0 || call < config->calls_per_wave; ++call) {
    /* Relaxed: a stop request only needs to be seen eventually. */
    if (atomic_load_explicit(&group->stop, memory_order_relaxed)) break;
    uint32_t service = DEVICE_SIM_SERVICE_FUNCTION_CALL;
    uint64_t activemask = 0;
    memset(lanes_in, 0, sizeof(lanes_in));
    if (config->fill != NULL) {
      config->fill(config->user, self->wave, call, &rng, &service, &activemask, lanes_in);
    } else {
      default_fill(self->wave, call, &rng, &service, &activemask, lanes_in);
    }
    memcpy(lanes_out, lanes_in, sizeof(lanes_out));

    uint64_t t0 = device_sim_now_ns();
    bool touched = false;
    int rc = wave_call(buffer, service, activemask, lanes_in, lanes_out, config->check_inactive_lanes,
                       config->timeout_ns, &touched);
    if (rc != DEVICE_SIM_OK) {
      result->errors++;
      if (result->first_error == 0) result->first_error = rc;
      note_failure(result, "wave %u call %u: %s", self->wave, call, device_sim_error_string(rc));
      /* The packet (if any) is stuck with the host: this wave cannot go on. */
      break;
    }
    if (touched) {
      result->inactive_lane_writes++;
      note_failure(result, "wave %u call %u: %s", self->wave, call,
                   "the host wrote the slot of an inactive lane");
    }
    uint64_t t1 = device_sim_now_ns();
    if (config->latencies_ns != NULL && config->calls_per_wave != 0) {
      config->latencies_ns[(uint64_t)self->wave * config->calls_per_wave + call] = t1 - t0;
    }
    result->calls++;
    result->lanes_served += (uint64_t)__builtin_popcountll(activemask);

    int bad;
    if (config->check != NULL) {
      bad = config->check(config->user, self->wave, call, service, activemask,
                          (const uint64_t(*)[8])lanes_in, (const uint64_t(*)[8])lanes_out);
      if (bad) snprintf(why, sizeof(why), "check callback returned %d", bad);
    } else if (config->fill == NULL) {
      bad = default_check(activemask, (const uint64_t(*)[8])lanes_in,
                          (const uint64_t(*)[8])lanes_out, why, sizeof(why));
    } else {
      bad = 0;
    }
    if (bad) {
      result->mismatches++;
      note_failure(result, "wave %u call %u: %s", self->wave, call, why);
    }
  }
  result->elapsed_ns = device_sim_now_ns() - group->start_ns;
  return NULL;
}

device_sim_waves_t* device_sim_waves_start(const device_sim_waves_config_t* config) {
  if (config == NULL || config->buffers == NULL || config->buffer_count == 0 ||
      config->waves == 0) {
    return NULL;
  }
  for (uint32_t i = 0; i < config->buffer_count; ++i) {
    if (config->buffers[i] == NULL) return NULL;
  }
  struct device_sim_waves* group = calloc(1, sizeof(*group));
  if (group == NULL) return NULL;
  group->config = *config;
  atomic_init(&group->stop, 0);
  group->threads = calloc(config->waves, sizeof(wave_thread_t));
  if (group->threads == NULL) {
    free(group);
    return NULL;
  }
  group->start_ns = device_sim_now_ns();
  for (uint32_t w = 0; w < config->waves; ++w) {
    wave_thread_t* thread = &group->threads[w];
    thread->group = group;
    thread->wave = w;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    thread->started = pthread_create(&thread->thread, &attr, wave_main, thread) == 0;
    pthread_attr_destroy(&attr);
    if (!thread->started) {
      thread->result.errors = 1;
      thread->result.first_error = DEVICE_SIM_ERR_ARGUMENT;
      snprintf(thread->result.first_failure, sizeof(thread->result.first_failure),
               "wave %u: pthread_create failed", w);
    }
  }
  return group;
}

void device_sim_waves_stop(device_sim_waves_t* waves) {
  if (waves == NULL) return;
  /* Relaxed: see the load in wave_main. */
  atomic_store_explicit(&waves->stop, 1, memory_order_relaxed);
}

int device_sim_waves_join(device_sim_waves_t* waves, device_sim_waves_result_t* result) {
  if (waves == NULL) return -1;
  device_sim_waves_result_t total;
  memset(&total, 0, sizeof(total));
  for (uint32_t w = 0; w < waves->config.waves; ++w) {
    wave_thread_t* thread = &waves->threads[w];
    if (thread->started) pthread_join(thread->thread, NULL);
    device_sim_waves_result_t* r = &thread->result;
    total.calls += r->calls;
    total.lanes_served += r->lanes_served;
    total.mismatches += r->mismatches;
    total.inactive_lane_writes += r->inactive_lane_writes;
    total.errors += r->errors;
    if (total.first_error == 0) total.first_error = r->first_error;
    if (total.first_failure[0] == '\0' && r->first_failure[0] != '\0') {
      memcpy(total.first_failure, r->first_failure, sizeof(total.first_failure));
    }
    if (r->elapsed_ns > total.elapsed_ns) total.elapsed_ns = r->elapsed_ns;
  }
  free(waves->threads);
  free(waves);
  if (result != NULL) *result = total;
  return (total.errors == 0 && total.mismatches == 0 && total.inactive_lane_writes == 0) ? 0 : -1;
}

int device_sim_run_waves(const device_sim_waves_config_t* config,
                         device_sim_waves_result_t* result) {
  device_sim_waves_t* waves = device_sim_waves_start(config);
  if (waves == NULL) {
    if (result != NULL) {
      memset(result, 0, sizeof(*result));
      result->errors = 1;
      result->first_error = DEVICE_SIM_ERR_ARGUMENT;
      snprintf(result->first_failure, sizeof(result->first_failure), "invalid wave configuration");
    }
    return -1;
  }
  return device_sim_waves_join(waves, result);
}
