/* Self-test of the software HSA runtime's memory pool allocations
 * (hsa_sim_pool_memory.c): ROCr's argument and status contract, the
 * stricter choices, access recording, live counts, fault injection, and the
 * release of leftovers by the last hsa_shut_down. */
#define _GNU_SOURCE
#include "dropin_check.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hsa_sim.h"

DROPIN_CHECK_DEFINE_FAILURES;


typedef struct pools {
  hsa_agent_t cpu, gpu, other_gpu;
  hsa_amd_memory_pool_t vram, group, cpu_fine;
} pools_t;

static hsa_status_t collect_agent(hsa_agent_t agent, void* data) {
  pools_t* p = data;
  hsa_device_type_t type;
  hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type);
  if (type == HSA_DEVICE_TYPE_CPU) {
    p->cpu = agent;
  } else if (p->gpu.handle == 0) {
    p->gpu = agent;
  } else if (p->other_gpu.handle == 0) {
    p->other_gpu = agent;
  }
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t collect_gpu_pool(hsa_amd_memory_pool_t pool, void* data) {
  pools_t* p = data;
  uint32_t segment = 0, flags = 0;
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &segment);
  hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags);
  if (segment == HSA_AMD_SEGMENT_GROUP) p->group = pool;
  if (segment == HSA_AMD_SEGMENT_GLOBAL && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED) &&
      p->vram.handle == 0) {
    p->vram = pool;
  }
  return HSA_STATUS_SUCCESS;
}

static hsa_status_t collect_cpu_pool(hsa_amd_memory_pool_t pool, void* data) {
  pools_t* p = data;
  if (p->cpu_fine.handle == 0) p->cpu_fine = pool;
  return HSA_STATUS_SUCCESS;
}

static uint64_t live_blocks(void) {
  hsa_sim_live_t live;
  memset(&live, 0, sizeof(live));
  hsa_sim_get_live(&live);
  return live.pool_allocations;
}

int main(void) {
  void* ptr = NULL;
  hsa_amd_memory_pool_t forged = {0x1234};
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(forged, 4096, 0, &ptr) == HSA_STATUS_ERROR_NOT_INITIALIZED);
  DROPIN_CHECK(hsa_amd_memory_pool_free(NULL) == HSA_STATUS_ERROR_NOT_INITIALIZED);
  DROPIN_CHECK(hsa_init() == HSA_STATUS_SUCCESS);
  pools_t p;
  memset(&p, 0, sizeof(p));
  hsa_iterate_agents(collect_agent, &p);
  hsa_amd_agent_iterate_memory_pools(p.gpu, collect_gpu_pool, &p);
  hsa_amd_agent_iterate_memory_pools(p.cpu, collect_cpu_pool, &p);
  DROPIN_CHECK(p.gpu.handle && p.other_gpu.handle && p.vram.handle && p.group.handle && p.cpu_fine.handle);

  /* allocate: arguments (ROCr's checks, then the stricter flag check). */
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.vram, 0, 0, &ptr) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.vram, 4096, 0, NULL) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.vram, 4096, 0x100, &ptr) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(forged, 4096, 0, &ptr) ==
        (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL);
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.group, 4096, 0, &ptr) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.vram, (size_t)1 << 62, 0, &ptr) ==
        HSA_STATUS_ERROR_INVALID_ALLOCATION);
  DROPIN_CHECK(live_blocks() == 0);

  /* A block: page-rounded, writable, owned by the pool's agent only. */
  void* block = NULL;
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.vram, 100, 0, &block) == HSA_STATUS_SUCCESS && block != NULL);
  DROPIN_CHECK(live_blocks() == 1);
  memset(block, 0x5A, (size_t)sysconf(_SC_PAGESIZE)); /* the whole page is there */
  DROPIN_CHECK(hsa_sim_pool_block_accessible(block, p.gpu));
  DROPIN_CHECK(!hsa_sim_pool_block_accessible(block, p.other_gpu));
  DROPIN_CHECK(!hsa_sim_pool_block_accessible(block, p.cpu));

  /* allow_access: arguments, unknown agents apply nothing, then a grant. */
  hsa_agent_t agents[2] = {p.other_gpu, {0xBAD}};
  uint32_t flags = 0;
  DROPIN_CHECK(hsa_amd_agents_allow_access(0, agents, NULL, block) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_agents_allow_access(1, NULL, NULL, block) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_agents_allow_access(1, agents, &flags, block) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_agents_allow_access(1, agents, NULL, NULL) == HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_agents_allow_access(2, agents, NULL, block) == HSA_STATUS_ERROR_INVALID_AGENT);
  DROPIN_CHECK(!hsa_sim_pool_block_accessible(block, p.other_gpu));
  DROPIN_CHECK(hsa_amd_agents_allow_access(1, agents, NULL, (char*)block + 64) ==
        HSA_STATUS_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(hsa_amd_agents_allow_access(1, agents, NULL, block) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_sim_pool_block_accessible(block, p.other_gpu));
  DROPIN_CHECK(hsa_sim_pool_block_accessible((char*)block + 99, p.other_gpu));

  /* free: NULL is fine; interior pointers, unknown and double frees are not. */
  DROPIN_CHECK(hsa_amd_memory_pool_free(NULL) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_amd_memory_pool_free((char*)block + 64) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  DROPIN_CHECK(hsa_amd_memory_pool_free(&p) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  DROPIN_CHECK(hsa_amd_memory_pool_free(block) == HSA_STATUS_SUCCESS);
  DROPIN_CHECK(hsa_amd_memory_pool_free(block) == HSA_STATUS_ERROR_INVALID_ALLOCATION);
  DROPIN_CHECK(!hsa_sim_pool_block_accessible(block, p.gpu));
  DROPIN_CHECK(live_blocks() == 0);

  /* Fault injection: the call does nothing. */
  hsa_sim_fail_nth_call("hsa_amd_memory_pool_allocate", 1, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  ptr = NULL;
  DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.cpu_fine, 4096, 0, &ptr) == HSA_STATUS_ERROR_OUT_OF_RESOURCES);
  DROPIN_CHECK(ptr == NULL && live_blocks() == 0);

  /* The last shutdown releases leftovers and reports them. */
  void* left[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; ++i) DROPIN_CHECK(hsa_amd_memory_pool_allocate(p.cpu_fine, 8192, 0, &left[i]) == 0);
  DROPIN_CHECK(live_blocks() == 3);
  DROPIN_CHECK(hsa_shut_down() == HSA_STATUS_SUCCESS);
  hsa_sim_live_t leaked;
  memset(&leaked, 0, sizeof(leaked));
  hsa_sim_get_leaked_at_shutdown(&leaked);
  DROPIN_CHECK(leaked.pool_allocations == 3);
  DROPIN_CHECK(live_blocks() == 0);
  DROPIN_CHECK(hsa_amd_memory_pool_free(left[0]) == HSA_STATUS_ERROR_NOT_INITIALIZED);
  return dropin_check_exit_code();
}
