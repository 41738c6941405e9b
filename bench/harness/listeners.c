/* hostcall_bench: the listeners (each a shared library with the hostcall
 * functions, dlopen'ed RTLD_LOCAL side by side) and the buffers they serve. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amdgpu_dropin_hostcall.h"
#include "bench.h"

const char* const kModeName[MODE_COUNT] = {"baseline",  "ours",     "phasebit", "classic2026",
                                           "phase2026", "floor-db", "floor-st"};
/* The name each listener gives its (main) thread. */
const char* const kModeThread[MODE_COUNT] = {
    "amdgpu-hc-base",  "amdgpu-hostcall", "amdgpu-hostcall", "amdgpu-hc-c2026",
    "amdgpu-hc-p2026", "amdgpu-hc-fldb",  "amdgpu-hc-flst"};

void* g_buffers[MAX_BUFFERS];

/* The two listeners, each a shared library exporting the four hostcall
 * functions, dlopen'ed RTLD_LOCAL side by side: the product library and
 * bench/baseline's libhostcall_baseline.so. Paths from the build
 * (overridable with --ours-lib / --baseline-lib). */
typedef struct {
  void* handle;
  size_t (*size)(uint32_t);
  uint32_t (*alignment)(void);
  bool (*enable)(void*, uint32_t, const void*);
  void (*disable)(void*, const void*);
  /* The product's protocol choice (extension API), for MODE_PHASE. */
  size_t (*protocol_size)(uint32_t, uint32_t);
  int32_t (*protocol_enable)(void*, uint32_t, const void*, uint32_t, uint32_t*);
  /* The product's per-buffer counters (NULL for the references). */
  int32_t (*get_counters)(const void*, void*);
} hostcall_lib_t;

/* amdgpu_dropin_hostcall_protocol_t's phase-bit value. */
#define PROTOCOL_PHASE_BIT 1u

static hostcall_lib_t g_libs[MODE_COUNT];
const char* g_lib_paths[MODE_COUNT] = {
    HOSTCALL_BENCH_BASELINE_LIB,       HOSTCALL_BENCH_OURS_LIB,          HOSTCALL_BENCH_OURS_LIB,
    HOSTCALL_BENCH_CLASSIC2026_LIB,    HOSTCALL_BENCH_PHASE2026_LIB,     HOSTCALL_BENCH_FLOOR_DOORBELL_LIB,
    HOSTCALL_BENCH_FLOOR_STACK_LIB};
/* --lib-dir DIR: every library from DIR by its file name (a copied run). */
static char g_lib_storage[MODE_COUNT][512];

void set_lib_dir(const char* dir) {
  static const char* const kFile[MODE_COUNT] = {
      "libhostcall_baseline.so", "libamdgpu_dropin.so", "libamdgpu_dropin.so",
      "libhostcall_classic2026.so", "libhostcall_phase2026.so", "libhostcall_floor_doorbell.so",
      "libhostcall_floor_stack.so"};
  for (int m = 0; m < MODE_COUNT; ++m) {
    snprintf(g_lib_storage[m], sizeof(g_lib_storage[m]), "%s/%s", dir, kFile[m]);
    g_lib_paths[m] = g_lib_storage[m];
  }
}
/* Occupancy bitmaps of the phase-bit buffers (64 packets: 2 words). */
static uint32_t g_bitmaps[MAX_BUFFERS][(PACKETS_PER_BUFFER + 31) / 32];
/* The mode whose library enabled the buffers currently enabled. */
static int g_mode;

bool load_libraries(const bool* modes) {
  for (int m = 0; m < MODE_COUNT; ++m) {
    hostcall_lib_t* lib = &g_libs[m];
    /* The layout checks need ours and the 2019-20 baseline; the others only
     * when measured. */
    if (!modes[m] && m != MODE_OURS && m != MODE_BASELINE && m != MODE_PHASE) continue;
    lib->handle = dlopen(g_lib_paths[m], RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == NULL) {
      fprintf(stderr, "hostcall_bench: cannot load the %s listener: %s\n", kModeName[m], dlerror());
      return false;
    }
    /* POSIX: a function's address round-trips through dlsym's void*
     * (copied, as ISO C has no cast between the two). */
    void* f[4] = {dlsym(lib->handle, "getHostcallBufferSize"),
                  dlsym(lib->handle, "getHostcallBufferAlignment"),
                  dlsym(lib->handle, "enableHostcalls"), dlsym(lib->handle, "disableHostcalls")};
    memcpy(&lib->size, &f[0], sizeof(f[0]));
    memcpy(&lib->alignment, &f[1], sizeof(f[1]));
    memcpy(&lib->enable, &f[2], sizeof(f[2]));
    memcpy(&lib->disable, &f[3], sizeof(f[3]));
    void* c = dlsym(lib->handle, "amdgpu_dropin_hostcall_get_counters");
    memcpy(&lib->get_counters, &c, sizeof(c));
    if (!lib->size || !lib->alignment || !lib->enable || !lib->disable) {
      fprintf(stderr, "hostcall_bench: %s lacks a hostcall function\n", g_lib_paths[m]);
      return false;
    }
    if (mode_is_phase(m)) {
      void* p[2] = {dlsym(lib->handle, "amdgpu_dropin_hostcall_buffer_size"),
                    dlsym(lib->handle, "amdgpu_dropin_hostcall_enable")};
      memcpy(&lib->protocol_size, &p[0], sizeof(p[0]));
      memcpy(&lib->protocol_enable, &p[1], sizeof(p[1]));
      if (!lib->protocol_size || !lib->protocol_enable) {
        fprintf(stderr, "hostcall_bench: %s lacks amdgpu_dropin_hostcall_enable\n", g_lib_paths[m]);
        return false;
      }
    }
  }
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (g_libs[m].handle == NULL) continue;
    if (g_libs[m].size(PACKETS_PER_BUFFER) != g_libs[MODE_OURS].size(PACKETS_PER_BUFFER) ||
        g_libs[m].alignment() != g_libs[MODE_OURS].alignment()) {
      fprintf(stderr, "hostcall_bench: %s and ours disagree on the buffer layout\n", kModeName[m]);
      return false;
    }
    if (mode_is_phase(m) && g_libs[m].protocol_size(PROTOCOL_PHASE_BIT, PACKETS_PER_BUFFER) !=
                                g_libs[MODE_PHASE].protocol_size(PROTOCOL_PHASE_BIT, PACKETS_PER_BUFFER)) {
      fprintf(stderr, "hostcall_bench: %s and ours disagree on the phase-bit layout\n", kModeName[m]);
      return false;
    }
  }
  return true;
}

bool alloc_buffers(void) {
  size_t size = g_libs[MODE_OURS].size(PACKETS_PER_BUFFER);
  size_t phase_size = g_libs[MODE_PHASE].protocol_size(PROTOCOL_PHASE_BIT, PACKETS_PER_BUFFER);
  if (phase_size > size) size = phase_size;
  size_t rounded = (size + 4095u) & ~(size_t)4095u;
  for (uint32_t i = 0; i < MAX_BUFFERS; ++i) {
    g_buffers[i] = aligned_alloc(4096, rounded);
    if (g_buffers[i] == NULL) return false;
    memset(g_buffers[i], 0, rounded);
  }
  return true;
}

/* Enables `count` buffers with the listener of `mode` (the listener starts
 * with the first enable and reads the mode then) and checks that the
 * library really runs that listener. */
bool enable_buffers(int mode, uint32_t count) {
  g_mode = mode;
  for (uint32_t i = 0; i < count; ++i) {
    bool enabled;
    if (mode_is_phase(mode)) {
      memset(g_bitmaps[i], 0, sizeof(g_bitmaps[i]));
      enabled = device_sim_phase_attach(g_buffers[i]) &&
                g_libs[mode].protocol_enable(g_buffers[i], PACKETS_PER_BUFFER, g_buffers[i],
                                             PROTOCOL_PHASE_BIT, g_bitmaps[i]) == 0;
    } else {
      enabled = g_libs[mode].enable(g_buffers[i], PACKETS_PER_BUFFER, g_buffers[i]);
    }
    if (!enabled) {
      fprintf(stderr, "hostcall_bench: %s enableHostcalls failed (AMD_LOG_LEVEL=1 says why)\n",
              kModeName[mode]);
      disable_buffers(i);
      return false;
    }
  }
  /* The new thread names itself when it starts running: give it a moment. */
  thread_set_t set;
  const char* want = kModeThread[mode];
  for (int attempt = 0; attempt < 1000; ++attempt) { /* up to 5 s on a busy machine */
    listener_threads(&set);
    if (has_thread(&set, want)) break;
    sleep_ms(5);
  }
  pin_listener_threads(&set, g_pin_listener);
  if (!has_thread(&set, want)) {
    disable_buffers(count);
    fprintf(stderr, "hostcall_bench: no listener thread named \"%s\" after enabling buffers\n",
            want);
    return false;
  }
  return true;
}

void disable_buffers(uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    /* disableHostcalls disables either protocol. */
    g_libs[g_mode].disable(g_buffers[i], g_buffers[i]);
    device_sim_phase_detach(g_buffers[i]);
  }
}


#ifdef AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES
/* Adds one buffer's counters to *sum; the listener's own counts (rings,
 * waits), which every buffer reports alike, only when `listener_too`. */
static bool read_counters(void* buffer, lib_counters_t* sum, bool listener_too) {
  hostcall_lib_t* lib = &g_libs[g_mode];
  if (lib->get_counters == NULL) return false;
  amdgpu_dropin_hostcall_counters_t c;
  memset(&c, 0, sizeof(c));
  c.size = (uint32_t)sizeof(c);
  if (lib->get_counters(buffer, &c) != 0) return false;
  for (uint32_t s = 0; s < AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES; ++s) {
    sum->packets += c.packets[s];
    sum->lanes += c.lanes[s];
  }
  if (listener_too) {
    sum->rings_seen += c.doorbell_rings;
    sum->blocked_waits += c.blocked_waits;
    sum->wait_timeouts += c.wait_timeouts;
    /* A library of version 4 writes a smaller struct and says so in size. */
    if (c.size >= sizeof(c)) {
      sum->forecast_sleeps += c.forecast_sleeps;
      sum->watch_looks += c.watch_looks;
    }
  }
  sum->lost_rings += c.lost_rings;
  sum->handoffs += c.helper_handoffs;
  if (c.longest_service_ns > sum->longest_service_ns) sum->longest_service_ns = c.longest_service_ns;
  sum->have = true;
  return true;
}
#else
/* A library header without the counters API: no counters. */
static bool read_counters(void* buffer, lib_counters_t* sum, bool listener_too) {
  (void)buffer;
  (void)sum;
  (void)listener_too;
  return false;
}
#endif

void add_buffer_counters(uint32_t count, lib_counters_t* sum) {
  for (uint32_t i = 0; i < count; ++i) {
    if (!read_counters(g_buffers[i], sum, i == 0)) return;
  }
}

lib_counters_t buffer0_counters(void) {
  lib_counters_t c;
  memset(&c, 0, sizeof(c));
  read_counters(g_buffers[0], &c, true);
  return c;
}
