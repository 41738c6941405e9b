/*
 * Software HSA runtime: memory pool allocations (hsa_amd_memory_pool_allocate,
 * hsa_amd_memory_pool_free, hsa_amd_agents_allow_access).
 *
 * Contract, from ROCr (runtime/hsa-runtime/core/runtime: hsa_ext_amd.cpp,
 * runtime.cpp, amd_memory_region.cpp), kept or made stricter:
 *  - allocate: size 0 or a NULL out pointer -> INVALID_ARGUMENT; a bad pool
 *    handle -> INVALID_MEMORY_POOL; a pool that is not GLOBAL or does not
 *    allow runtime allocation, or a size above the pool's size ->
 *    INVALID_ALLOCATION. The size is rounded up to the page size. Stricter:
 *    flag bits other than PCIE (1), CONTIGUOUS (2), EXECUTABLE (4) ->
 *    INVALID_ARGUMENT (ROCr ignores unknown bits). The block's only agent
 *    with access is the pool's owner.
 *  - free: NULL -> SUCCESS (as ROCr); an address that is not the start of a
 *    live block (an interior pointer, a double free) -> INVALID_ALLOCATION.
 *  - allow_access: 0 agents, NULL agents, non-NULL flags or NULL ptr ->
 *    INVALID_ARGUMENT; an unknown agent -> INVALID_AGENT, nothing applied.
 *    Stricter: ptr must be the start of a live block (ROCr also accepts vmem
 *    mappings; the project never relies on that) -> INVALID_ARGUMENT.
 *  - The last hsa_shut_down frees every live block (as ROCr does) and counts
 *    it in hsa_sim_get_leaked_at_shutdown().pool_allocations.
 *
 * Blocks are anonymous read-write mappings (CPU-visible even for a GPU
 * coarse-grained pool: the device simulator's waves are host threads).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hsa_sim_internal.h"

#define SIM_POOL_FLAGS_KNOWN 0x7u

typedef struct sim_block {
  struct sim_block* next;
  uintptr_t base;
  size_t size;
  uint32_t owner;                 /* agent index of the pool */
  uint8_t access[SIM_MAX_AGENTS]; /* 1 = the agent may access the block */
} sim_block_t;

/* Under the state lock. */
static sim_block_t* g_blocks;

static hsa_status_t sim_pool_allocate(hsa_amd_memory_pool_t pool, size_t size,
                                      uint32_t flags, void** ptr) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (size == 0 || ptr == NULL || (flags & ~SIM_POOL_FLAGS_KNOWN) != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t agent = 0;
  const hsa_sim_pool_desc_t* d = NULL;
  if (!sim_pool_lookup(pool, &agent, &d)) {
    return (hsa_status_t)HSA_STATUS_ERROR_INVALID_MEMORY_POOL;
  }
  if (d->segment != HSA_AMD_SEGMENT_GLOBAL || !d->alloc_allowed || size > d->size) {
    return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  }
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t rounded = (size + page - 1) / page * page;
  if (rounded < size) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  sim_block_t* block = calloc(1, sizeof(*block));
  if (block == NULL) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  void* base = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    free(block);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  block->base = (uintptr_t)base;
  block->size = rounded;
  block->owner = agent;
  block->access[agent] = 1;
  sim_lock();
  block->next = g_blocks;
  g_blocks = block;
  ++sim_live.pool_allocations;
  sim_unlock();
  *ptr = base;
  return HSA_STATUS_SUCCESS;
}

HSA_API hsa_status_t hsa_amd_memory_pool_allocate(hsa_amd_memory_pool_t memory_pool,
                                                  size_t size, uint32_t flags, void** ptr) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_memory_pool_allocate, &status)) {
    status = sim_pool_allocate(memory_pool, size, flags, ptr);
  }
  uint64_t args[6] = {memory_pool.handle, size, flags, SIM_U64(ptr), 0, 0};
  return sim_leave(SIM_FN_hsa_amd_memory_pool_allocate, status, args, NULL, 0);
}

static hsa_status_t sim_pool_free(void* ptr) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (ptr == NULL) return HSA_STATUS_SUCCESS;
  sim_block_t* found = NULL;
  sim_lock();
  for (sim_block_t** p = &g_blocks; *p != NULL; p = &(*p)->next) {
    if ((*p)->base == (uintptr_t)ptr) {
      found = *p;
      *p = found->next;
      --sim_live.pool_allocations;
      break;
    }
  }
  sim_unlock();
  if (found == NULL) return HSA_STATUS_ERROR_INVALID_ALLOCATION;
  munmap((void*)found->base, found->size);
  free(found);
  return HSA_STATUS_SUCCESS;
}

HSA_API hsa_status_t hsa_amd_memory_pool_free(void* ptr) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_memory_pool_free, &status)) {
    status = sim_pool_free(ptr);
  }
  uint64_t args[6] = {SIM_U64(ptr), 0, 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_memory_pool_free, status, args, NULL, 0);
}

static hsa_status_t sim_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                     const uint32_t* flags, const void* ptr) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (num_agents == 0 || agents == NULL || flags != NULL || ptr == NULL) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint32_t indices[SIM_MAX_AGENTS];
  uint32_t count = 0;
  for (uint32_t i = 0; i < num_agents; ++i) {
    uint32_t index = 0;
    if (!sim_agent_index(agents[i], &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
    if (count < SIM_MAX_AGENTS) indices[count++] = index;
  }
  hsa_status_t status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_lock();
  for (sim_block_t* b = g_blocks; b != NULL; b = b->next) {
    if (b->base != (uintptr_t)ptr) continue;
    for (uint32_t i = 0; i < count; ++i) b->access[indices[i]] = 1;
    status = HSA_STATUS_SUCCESS;
    break;
  }
  sim_unlock();
  return status;
}

HSA_API hsa_status_t hsa_amd_agents_allow_access(uint32_t num_agents, const hsa_agent_t* agents,
                                                 const uint32_t* flags, const void* ptr) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_agents_allow_access, &status)) {
    status = sim_allow_access(num_agents, agents, flags, ptr);
  }
  uint64_t args[6] = {num_agents, SIM_U64(agents), SIM_U64(flags), SIM_U64(ptr), 0, 0};
  return sim_leave(SIM_FN_hsa_amd_agents_allow_access, status, args, NULL, 0);
}

HSA_API bool hsa_sim_pool_block_accessible(const void* ptr, hsa_agent_t agent) {
  uint32_t index = 0;
  if (!sim_agent_index(agent, &index)) return false;
  bool accessible = false;
  sim_lock();
  for (sim_block_t* b = g_blocks; b != NULL; b = b->next) {
    if (b->base <= (uintptr_t)ptr && (uintptr_t)ptr < b->base + b->size) {
      accessible = b->access[index] != 0;
      break;
    }
  }
  sim_unlock();
  return accessible;
}

void sim_pool_memory_shutdown(hsa_sim_live_t* leaked) {
  while (g_blocks != NULL) {
    sim_block_t* b = g_blocks;
    g_blocks = b->next;
    munmap((void*)b->base, b->size);
    free(b);
    --sim_live.pool_allocations;
    ++leaked->pool_allocations;
  }
}
