/* Unloading the library (dlclose) while a buffer is enabled and the listener
 * runs: no crash, and no thread left running code that is gone. The library
 * is loaded with dlopen from the path CMake passes in, so this binary holds
 * no other reference to it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "device_sim.h"
#include "device_sim_phase.h"
#include "hc_test.h"

#ifndef AMDGPU_DROPIN_SO_PATH
#error "AMDGPU_DROPIN_SO_PATH must name the library's shared object"
#endif

typedef size_t (*size_fn)(uint32_t);
typedef bool (*enable_fn)(void*, uint32_t, const void*);
typedef void (*disable_fn)(void*, const void*);

typedef struct api {
  void* handle;
  size_fn size;
  enable_fn enable;
  disable_fn disable;
} api_t;

static bool load(api_t* api) {
  memset(api, 0, sizeof(*api));
  api->handle = dlopen(AMDGPU_DROPIN_SO_PATH, RTLD_NOW | RTLD_LOCAL);
  if (api->handle == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return false;
  }
  /* POSIX: converting dlsym's object pointer to a function pointer goes
   * through memcpy to stay within ISO C. */
  void* sym;
  sym = dlsym(api->handle, "getHostcallBufferSize");
  memcpy(&api->size, &sym, sizeof(sym));
  sym = dlsym(api->handle, "enableHostcalls");
  memcpy(&api->enable, &sym, sizeof(sym));
  sym = dlsym(api->handle, "disableHostcalls");
  memcpy(&api->disable, &sym, sizeof(sym));
  return api->size != NULL && api->enable != NULL && api->disable != NULL;
}

/* Is the library still mapped in this process? */
static bool library_mapped(void) {
  void* probe = dlopen(AMDGPU_DROPIN_SO_PATH, RTLD_NOW | RTLD_NOLOAD);
  if (probe != NULL) {
    dlclose(probe);
    return true;
  }
  return false;
}

static void test_dlclose_with_buffer_enabled(void) {
  int threads0 = hc_thread_count();
  /* 3 rounds in the suite; HC_DLCLOSE_ROUNDS=N for a churn soak. */
  const char* env = getenv("HC_DLCLOSE_ROUNDS");
  int rounds = env != NULL ? atoi(env) : 3;
  for (int round = 0; round < rounds; ++round) {
    api_t api;
    DROPIN_REQUIRE_MSG(load(&api), "load round %d", round);
    uint32_t n = 4;
    void* buffer = NULL;
    DROPIN_REQUIRE_MSG(posix_memalign(&buffer, 4096, api.size(n)) == 0, "alloc");
    DROPIN_REQUIRE_MSG(api.enable(buffer, n, NULL), "enable round %d", round);
    DROPIN_CHECK_MSG(hc_call_ok(buffer, (uint64_t)round) == 0, "call before dlclose");
    DROPIN_CHECK_MSG(hc_thread_count() > threads0, "listener thread not running");
    /* Traffic in flight right up to the unload. */
    device_sim_waves_result_t result;
    DROPIN_CHECK_MSG(hc_run_waves(buffer, 2, 100, 1, HC_CALL_TIMEOUT_NS, &result) == 0, "waves: %s", result.first_failure);
    DROPIN_CHECK_MSG(dlclose(api.handle) == 0, "dlclose: %s", dlerror());
    hc_sleep_ms(round < 3 ? 200 : 2);
    bool mapped = library_mapped();
    int threads = hc_thread_count();
    printf("  round %d: after dlclose the library is %s, %d threads (%d before enable)\n", round,
           mapped ? "still mapped (pinned)" : "unloaded", threads, threads0);
    if (!mapped) {
      /* Unloaded: its listener must be gone too. */
      DROPIN_CHECK_MSG(threads == threads0, "library unloaded but %d threads remain (want %d)", threads,
               threads0);
    } else {
      /* Pinned: it must still serve the buffer it has. */
      DROPIN_CHECK_MSG(hc_call_ok(buffer, 100 + (uint64_t)round) == 0, "pinned library stopped serving");
    }
    /* Leave the buffer's memory alive: a pinned library still owns it. */
  }
}

typedef size_t (*protocol_size_fn)(uint32_t, uint32_t);
typedef int32_t (*protocol_enable_fn)(void*, uint32_t, const void*, uint32_t, uint32_t*);

/* The same with a phase-bit buffer (enabled through the extension API) and
 * its occupancy bitmap: traffic up to the unload, then served afterwards
 * while the library stays (it pinned itself when its listener started). */
static void test_dlclose_with_phase_bit_buffer_enabled(void) {
  api_t api;
  DROPIN_REQUIRE_MSG(load(&api), "load");
  protocol_size_fn size = NULL;
  protocol_enable_fn enable = NULL;
  void* sym = dlsym(api.handle, "amdgpu_dropin_hostcall_buffer_size");
  memcpy(&size, &sym, sizeof(sym));
  sym = dlsym(api.handle, "amdgpu_dropin_hostcall_enable");
  memcpy(&enable, &sym, sizeof(sym));
  DROPIN_REQUIRE_MSG(size != NULL && enable != NULL, "extension API exported");
  const uint32_t n = 4, phase_bit = 1;
  void* buffer = NULL;
  DROPIN_REQUIRE_MSG(posix_memalign(&buffer, 4096, size(phase_bit, n)) == 0, "alloc");
  uint32_t* bitmap = calloc(1, sizeof(uint32_t));
  DROPIN_REQUIRE_MSG(bitmap != NULL && device_sim_phase_attach(buffer), "bitmap");
  DROPIN_REQUIRE_MSG(enable(buffer, n, NULL, phase_bit, bitmap) == 0, "enable");
  DROPIN_CHECK_MSG(hc_call_ok(buffer, 7) == 0, "call before dlclose");
  device_sim_waves_result_t result;
  DROPIN_CHECK_MSG(hc_run_waves(buffer, 2, 100, 2, HC_CALL_TIMEOUT_NS, &result) == 0, "waves: %s", result.first_failure);
  DROPIN_CHECK_MSG(dlclose(api.handle) == 0, "dlclose: %s", dlerror());
  hc_sleep_ms(50);
  if (library_mapped()) {
    DROPIN_CHECK_MSG(hc_call_ok(buffer, 8) == 0, "pinned library stopped serving the phase-bit buffer");
  }
  /* Buffer and bitmap stay alive: a pinned library still owns them. */
}

int main(void) {
  hc_hsa_init();
  HC_RUN(test_dlclose_with_buffer_enabled);
  HC_RUN(test_dlclose_with_phase_bit_buffer_enabled);
  return dropin_check_exit_code();
}
