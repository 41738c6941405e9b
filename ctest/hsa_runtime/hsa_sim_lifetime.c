/*
 * Software HSA runtime: its lifetime. hsa_sim_configure and the default
 * configuration, hsa_init and hsa_shut_down (the last one releases what is
 * still alive in every part of the runtime, as ROCr does), and what that
 * shutdown found leaked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsa_sim_internal.h"

/* What the last shutdown released (under the state lock). */
static hsa_sim_live_t g_leaked;

/* Configuration for the next initialization (under the state lock). */
static hsa_sim_config_t g_next_config;
static bool g_next_configured;

HSA_API void hsa_sim_get_leaked_at_shutdown(hsa_sim_live_t* out) {
  if (out == NULL) return;
  sim_lock();
  *out = g_leaked;
  sim_unlock();
}

/* ---- Configuration ------------------------------------------------------ */

#define SIM_KIB(x) ((uint64_t)(x) << 10)
#define SIM_GIB(x) ((uint64_t)(x) << 30)

static hsa_sim_pool_desc_t sim_global_pool(uint32_t flags, uint64_t size) {
  hsa_sim_pool_desc_t d;
  memset(&d, 0, sizeof(d));
  d.segment = HSA_AMD_SEGMENT_GLOBAL;
  d.global_flags = flags;
  d.alloc_allowed = true;
  d.size = size;
  d.alloc_granule = SIM_KIB(4);
  d.rec_granule = SIM_KIB(64);
  d.alignment = SIM_KIB(4);
  return d;
}

HSA_API void hsa_sim_config_default(hsa_sim_config_t* config) {
  if (config == NULL) return;
  memset(config, 0, sizeof(*config));
  config->gpu_count = 2;
  const char* env = getenv("HSA_SIM_GPU_COUNT");
  if (env != NULL && *env != '\0') {
    char* end = NULL;
    errno = 0;
    unsigned long n = strtoul(env, &end, 10);
    if (errno == 0 && end != NULL && *end == '\0' && n <= HSA_SIM_MAX_GPUS) {
      config->gpu_count = (uint32_t)n;
    } else {
      fprintf(stderr, "hsa_sim: ignoring HSA_SIM_GPU_COUNT='%s' (0..%d)\n", env,
              HSA_SIM_MAX_GPUS);
    }
  }
  config->cpu_pools[0] = sim_global_pool(
      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED |
          HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT,
      SIM_GIB(64));
  config->cpu_pools[1] =
      sim_global_pool(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, SIM_GIB(64));
  config->cpu_pool_count = 2;
  config->gpu_pools[0] =
      sim_global_pool(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, SIM_GIB(16));
  config->gpu_pools[1] =
      sim_global_pool(HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, SIM_GIB(16));
  config->gpu_pools[2] = sim_global_pool(
      HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED, SIM_GIB(16));
  hsa_sim_pool_desc_t group;
  memset(&group, 0, sizeof(group));
  group.segment = HSA_AMD_SEGMENT_GROUP;
  group.alloc_allowed = false;
  group.size = SIM_KIB(64);
  config->gpu_pools[3] = group;
  config->gpu_pool_count = 4;
  config->max_signals = 4096;
}

static bool sim_config_valid(const hsa_sim_config_t* c) {
  return c->gpu_count <= HSA_SIM_MAX_GPUS &&
         c->cpu_pool_count <= HSA_SIM_MAX_POOLS_PER_AGENT &&
         c->gpu_pool_count <= HSA_SIM_MAX_POOLS_PER_AGENT &&
         c->max_signals >= 1 && c->max_signals <= HSA_SIM_MAX_SIGNALS;
}

HSA_API hsa_status_t hsa_sim_configure(const hsa_sim_config_t* config) {
  if (config == NULL || !sim_config_valid(config)) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  hsa_status_t status = HSA_STATUS_SUCCESS;
  sim_lock();
  /* relaxed: sim_refcount is only written under the lock we hold. */
  if (atomic_load_explicit(&sim_refcount, memory_order_relaxed) != 0) {
    status = HSA_STATUS_ERROR_INVALID_RUNTIME_STATE;
  } else {
    g_next_config = *config;
    g_next_configured = true;
  }
  sim_unlock();
  return status;
}

/* ---- Lifetime ------------------------------------------------------------ */

HSA_API hsa_status_t hsa_init(void) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_init, &status)) {
    status = HSA_STATUS_SUCCESS;
    sim_lock();
    /* relaxed: written only under the lock we hold. */
    uint32_t rc = atomic_load_explicit(&sim_refcount, memory_order_relaxed);
    if (rc == UINT32_MAX) {
      status = HSA_STATUS_ERROR_REFCOUNT_OVERFLOW;
    } else {
      if (rc == 0) {
        if (g_next_configured) {
          sim_active_config = g_next_config;
        } else {
          hsa_sim_config_default(&sim_active_config);
        }
      }
      /* release: publishes sim_active_config (see sim_initialized). */
      atomic_store_explicit(&sim_refcount, rc + 1, memory_order_release);
    }
    sim_unlock();
  }
  return sim_leave(SIM_FN_hsa_init, status, NULL, NULL, 0);
}

HSA_API hsa_status_t hsa_shut_down(void) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_shut_down, &status)) {
    status = HSA_STATUS_SUCCESS;
    sim_lock();
    /* relaxed: written only under the lock we hold. */
    uint32_t rc = atomic_load_explicit(&sim_refcount, memory_order_relaxed);
    if (rc == 0) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else {
      if (rc == 1) {
        /* Like ROCr, the last shutdown releases everything still alive. */
        hsa_sim_live_t leaked;
        memset(&leaked, 0, sizeof(leaked));
        sim_vmem_shutdown(&leaked);
        sim_signal_shutdown(&leaked);
        sim_pool_memory_shutdown(&leaked);
        g_leaked = leaked;
      }
      /* release: pairs with sim_initialized's acquire (no data published on
       * the way down, but keeps the two directions symmetric). */
      atomic_store_explicit(&sim_refcount, rc - 1, memory_order_release);
    }
    sim_unlock();
  }
  return sim_leave(SIM_FN_hsa_shut_down, status, NULL, NULL, 0);
}
