/*
 * Software HSA runtime: virtual memory (hsa_amd_vmem_*).
 *
 * Model: a reservation is a PROT_NONE anonymous mapping; a handle is a memfd
 * of the handle's size; mapping a handle replaces part of a reservation with
 * a MAP_SHARED|MAP_FIXED view of the memfd, so several mappings of one handle
 * alias the same pages. A new mapping gives no agent access (PROT_NONE) until
 * hsa_amd_vmem_set_access grants some; only the CPU agent's permission is
 * enforced (mprotect), GPU permissions are recorded. Every object lives in a
 * list under the state lock.
 *
 * Choices where ROCr's exact behaviour is not pinned down (documented here and
 * in README):
 *  - A bad pool handle gives HSA_STATUS_ERROR_INVALID_ARGUMENT.
 *  - address_free with mappings still inside the range gives
 *    HSA_STATUS_ERROR_RESOURCE_FREE; so does handle_release of a handle that
 *    is still mapped. Nothing is changed in either case.
 *  - Unknown vmem handles give HSA_STATUS_ERROR_INVALID_ALLOCATION.
 *  - set_access/unmap need the exact range of one mapping.
 *  - The `address` argument of reserve is a hint: used when it is free and
 *    suitably aligned, ignored otherwise.
 *  - WO for the CPU is applied as PROT_READ|PROT_WRITE (x86 cannot map
 *    write-only pages).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hsa_sim_internal.h"

typedef struct sim_reservation {
  struct sim_reservation* next;
  uintptr_t base;
  size_t size;
} sim_reservation_t;

typedef struct sim_handle {
  struct sim_handle* next;
  uint64_t id;
  int fd;
  size_t size;
  uint32_t agent;
  uint32_t type;
  uint64_t map_count;
} sim_handle_t;

typedef struct sim_mapping {
  struct sim_mapping* next;
  uintptr_t va;
  size_t size;
  sim_handle_t* handle;
  uint8_t perms[SIM_MAX_AGENTS]; /* hsa_access_permission_t per agent */
} sim_mapping_t;

/* All under the state lock. */
static sim_reservation_t* g_reservations;
static sim_handle_t* g_handles;
static sim_mapping_t* g_mappings;
static uint64_t g_next_handle_id = 1;

#define SIM_HANDLE_TAG 0xA110C00000000000ull

static size_t sim_page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

static bool sim_is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

static sim_reservation_t* sim_find_reservation_containing(uintptr_t va,
                                                          size_t size) {
  for (sim_reservation_t* r = g_reservations; r != NULL; r = r->next) {
    if (va >= r->base && va - r->base <= r->size &&
        size <= r->size - (va - r->base)) {
      return r;
    }
  }
  return NULL;
}

static sim_handle_t* sim_find_handle(uint64_t id) {
  for (sim_handle_t* h = g_handles; h != NULL; h = h->next) {
    if (h->id == id) return h;
  }
  return NULL;
}

static sim_mapping_t** sim_find_mapping_exact(uintptr_t va) {
  for (sim_mapping_t** m = &g_mappings; *m != NULL; m = &(*m)->next) {
    if ((*m)->va == va) return m;
  }
  return NULL;
}

static bool sim_any_mapping_overlaps(uintptr_t va, size_t size) {
  for (sim_mapping_t* m = g_mappings; m != NULL; m = m->next) {
    if (va < m->va + m->size && m->va < va + size) return true;
  }
  return false;
}

/* Puts a PROT_NONE placeholder over [va, va+size) again. */
static bool sim_placeholder(uintptr_t va, size_t size) {
  void* p = mmap((void*)va, size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  return p != MAP_FAILED;
}

/* ---- Reservations ---------------------------------------------------------- */

static hsa_status_t sim_reserve(void** va, size_t size, uint64_t address,
                                uint64_t alignment, uint64_t flags) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  size_t page = sim_page_size();
  if (va == NULL || size == 0 || size % page != 0 || flags != 0 ||
      (alignment != 0 && !sim_is_pow2(alignment))) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  uint64_t align = alignment > page ? alignment : page;
  if (align - page > SIZE_MAX - size) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  sim_reservation_t* r = calloc(1, sizeof(*r));
  if (r == NULL) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;

  uintptr_t base = 0;
  if (address != 0 && address % align == 0) {
    void* p = mmap((void*)(uintptr_t)address, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
                   -1, 0);
    if (p != MAP_FAILED) {
      if ((uintptr_t)p == address) {
        base = (uintptr_t)p;
      } else {
        munmap(p, size); /* old kernels treat the flag as a hint */
      }
    }
  }
  if (base == 0) {
    size_t total = size + (size_t)(align - page);
    void* p = mmap(NULL, total, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      free(r);
      return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    }
    uintptr_t start = (uintptr_t)p;
    uintptr_t aligned = (start + (uintptr_t)(align - 1)) & ~(uintptr_t)(align - 1);
    if (aligned > start) munmap(p, aligned - start);
    uintptr_t end = start + total;
    if (end > aligned + size) munmap((void*)(aligned + size), end - (aligned + size));
    base = aligned;
  }
  r->base = base;
  r->size = size;
  sim_lock();
  r->next = g_reservations;
  g_reservations = r;
  ++sim_live.reservations;
  sim_unlock();
  *va = (void*)base;
  return HSA_STATUS_SUCCESS;
}

HSA_API hsa_status_t hsa_amd_vmem_address_reserve_align(void** va, size_t size,
                                                        uint64_t address,
                                                        uint64_t alignment,
                                                        uint64_t flags) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_address_reserve_align, &status)) {
    status = sim_reserve(va, size, address, alignment, flags);
  }
  uint64_t args[6] = {SIM_U64(va), size, address, alignment, flags, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_address_reserve_align, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_amd_vmem_address_reserve(void** va, size_t size,
                                                  uint64_t address,
                                                  uint64_t flags) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_address_reserve, &status)) {
    status = sim_reserve(va, size, address, 0, flags);
  }
  uint64_t args[6] = {SIM_U64(va), size, address, flags, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_address_reserve, status, args, NULL, 0);
}

static hsa_status_t sim_address_free(void* va, size_t size) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (va == NULL || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_status_t status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_lock();
  for (sim_reservation_t** pr = &g_reservations; *pr != NULL; pr = &(*pr)->next) {
    sim_reservation_t* r = *pr;
    if (r->base != (uintptr_t)va) continue;
    if (r->size != size) break;
    bool busy = false;
    for (sim_mapping_t* m = g_mappings; m != NULL; m = m->next) {
      if (m->va >= r->base && m->va - r->base < r->size) busy = true;
    }
    if (busy) {
      status = HSA_STATUS_ERROR_RESOURCE_FREE;
      break;
    }
    munmap(va, size);
    *pr = r->next;
    free(r);
    --sim_live.reservations;
    status = HSA_STATUS_SUCCESS;
    break;
  }
  sim_unlock();
  return status;
}

HSA_API hsa_status_t hsa_amd_vmem_address_free(void* va, size_t size) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_address_free, &status)) {
    status = sim_address_free(va, size);
  }
  uint64_t args[6] = {SIM_U64(va), size, 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_address_free, status, args, NULL, 0);
}

/* ---- Handles --------------------------------------------------------------- */

static hsa_status_t sim_handle_create(hsa_amd_memory_pool_t pool, size_t size,
                                      hsa_amd_memory_type_t type, uint64_t flags,
                                      hsa_amd_vmem_alloc_handle_t* out) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  uint32_t agent = 0;
  const hsa_sim_pool_desc_t* d = NULL;
  if (out == NULL || !sim_pool_lookup(pool, &agent, &d) || flags != 0 ||
      size == 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (d->segment != HSA_AMD_SEGMENT_GLOBAL || !d->alloc_allowed) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if ((unsigned)type != MEMORY_TYPE_NONE && (unsigned)type != MEMORY_TYPE_PINNED) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  /* Pinned host memory only exists in CPU (system memory) pools. */
  if (type == MEMORY_TYPE_PINNED && agent != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if ((d->alloc_granule != 0 && size % d->alloc_granule != 0) ||
      size % sim_page_size() != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  if (size > d->size) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  sim_handle_t* h = calloc(1, sizeof(*h));
  if (h == NULL) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  h->fd = memfd_create("hsa_sim_vmem", MFD_CLOEXEC);
  if (h->fd < 0 || ftruncate(h->fd, (off_t)size) != 0) {
    if (h->fd >= 0) close(h->fd);
    free(h);
    return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  }
  h->size = size;
  h->agent = agent;
  h->type = (uint32_t)type;
  sim_lock();
  h->id = SIM_HANDLE_TAG | g_next_handle_id++;
  h->next = g_handles;
  g_handles = h;
  ++sim_live.handles;
  sim_unlock();
  out->handle = h->id;
  return HSA_STATUS_SUCCESS;
}

HSA_API hsa_status_t hsa_amd_vmem_handle_create(
    hsa_amd_memory_pool_t pool, size_t size, hsa_amd_memory_type_t type,
    uint64_t flags, hsa_amd_vmem_alloc_handle_t* memory_handle) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_handle_create, &status)) {
    status = sim_handle_create(pool, size, type, flags, memory_handle);
  }
  uint64_t args[6] = {pool.handle, size, (uint64_t)type, flags,
                      SIM_U64(memory_handle), 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_handle_create, status, args, NULL, 0);
}

static hsa_status_t sim_handle_release(hsa_amd_vmem_alloc_handle_t handle) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  hsa_status_t status = HSA_STATUS_ERROR_INVALID_ALLOCATION;
  sim_lock();
  for (sim_handle_t** ph = &g_handles; *ph != NULL; ph = &(*ph)->next) {
    sim_handle_t* h = *ph;
    if (h->id != handle.handle) continue;
    if (h->map_count != 0) {
      status = HSA_STATUS_ERROR_RESOURCE_FREE;
      break;
    }
    *ph = h->next;
    close(h->fd);
    free(h);
    --sim_live.handles;
    status = HSA_STATUS_SUCCESS;
    break;
  }
  sim_unlock();
  return status;
}

HSA_API hsa_status_t hsa_amd_vmem_handle_release(
    hsa_amd_vmem_alloc_handle_t memory_handle) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_handle_release, &status)) {
    status = sim_handle_release(memory_handle);
  }
  uint64_t args[6] = {memory_handle.handle, 0, 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_handle_release, status, args, NULL, 0);
}

/* ---- Mappings -------------------------------------------------------------- */

static hsa_status_t sim_map(void* va_ptr, size_t size, size_t in_offset,
                            hsa_amd_vmem_alloc_handle_t handle, uint64_t flags) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  uintptr_t va = (uintptr_t)va_ptr;
  size_t page = sim_page_size();
  if (va == 0 || size == 0 || flags != 0 || va % page != 0 || size % page != 0 ||
      in_offset % page != 0 || size > UINTPTR_MAX - va) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  sim_mapping_t* m = calloc(1, sizeof(*m));
  if (m == NULL) return HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  hsa_status_t status = HSA_STATUS_SUCCESS;
  sim_lock();
  sim_handle_t* h = sim_find_handle(handle.handle);
  if (h == NULL) {
    status = HSA_STATUS_ERROR_INVALID_ALLOCATION;
  } else if (in_offset > h->size || size > h->size - in_offset) {
    status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  } else if (sim_find_reservation_containing(va, size) == NULL ||
             sim_any_mapping_overlaps(va, size)) {
    status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  } else {
    void* p = mmap((void*)va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd,
                   (off_t)in_offset);
    if (p == MAP_FAILED) {
      (void)sim_placeholder(va, size);
      status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    } else {
      m->va = va;
      m->size = size;
      m->handle = h;
      ++h->map_count;
      m->next = g_mappings;
      g_mappings = m;
      m = NULL;
      ++sim_live.mappings;
    }
  }
  sim_unlock();
  free(m);
  return status;
}

HSA_API hsa_status_t hsa_amd_vmem_map(void* va, size_t size, size_t in_offset,
                                      hsa_amd_vmem_alloc_handle_t memory_handle,
                                      uint64_t flags) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_map, &status)) {
    status = sim_map(va, size, in_offset, memory_handle, flags);
  }
  uint64_t args[6] = {SIM_U64(va), size, in_offset, memory_handle.handle, flags, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_map, status, args, NULL, 0);
}

static hsa_status_t sim_unmap(void* va, size_t size) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (va == NULL || size == 0) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_status_t status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_lock();
  sim_mapping_t** pm = sim_find_mapping_exact((uintptr_t)va);
  if (pm != NULL && (*pm)->size == size) {
    sim_mapping_t* m = *pm;
    if (!sim_placeholder(m->va, m->size)) {
      status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    } else {
      *pm = m->next;
      --m->handle->map_count;
      free(m);
      --sim_live.mappings;
      status = HSA_STATUS_SUCCESS;
    }
  }
  sim_unlock();
  return status;
}

HSA_API hsa_status_t hsa_amd_vmem_unmap(void* va, size_t size) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_unmap, &status)) {
    status = sim_unmap(va, size);
  }
  uint64_t args[6] = {SIM_U64(va), size, 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_unmap, status, args, NULL, 0);
}

static int sim_cpu_prot(uint8_t perm) {
  switch (perm) {
    case HSA_ACCESS_PERMISSION_RO:
      return PROT_READ;
    case HSA_ACCESS_PERMISSION_WO: /* no write-only pages on x86 */
    case HSA_ACCESS_PERMISSION_RW:
      return PROT_READ | PROT_WRITE;
    default:
      return PROT_NONE;
  }
}

static hsa_status_t sim_set_access(void* va, size_t size,
                                   const hsa_amd_memory_access_desc_t* desc,
                                   size_t desc_cnt) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (va == NULL || size == 0 || desc == NULL || desc_cnt == 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  /* Validate every descriptor before changing anything. */
  for (size_t i = 0; i < desc_cnt; ++i) {
    uint32_t index = 0;
    if (!sim_agent_index(desc[i].agent_handle, &index)) {
      return HSA_STATUS_ERROR_INVALID_AGENT;
    }
    if ((unsigned)desc[i].permissions > HSA_ACCESS_PERMISSION_RW) {
      return HSA_STATUS_ERROR_INVALID_ARGUMENT;
    }
  }
  hsa_status_t status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_lock();
  sim_mapping_t** pm = sim_find_mapping_exact((uintptr_t)va);
  if (pm != NULL && (*pm)->size == size) {
    sim_mapping_t* m = *pm;
    uint8_t perms[SIM_MAX_AGENTS];
    memcpy(perms, m->perms, sizeof(perms));
    for (size_t i = 0; i < desc_cnt; ++i) {
      uint32_t index = 0;
      (void)sim_agent_index(desc[i].agent_handle, &index);
      perms[index] = (uint8_t)desc[i].permissions;
    }
    if (perms[0] == m->perms[0] ||
        mprotect((void*)m->va, m->size, sim_cpu_prot(perms[0])) == 0) {
      memcpy(m->perms, perms, sizeof(perms));
      status = HSA_STATUS_SUCCESS;
    } else {
      status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    }
  }
  sim_unlock();
  return status;
}

HSA_API hsa_status_t hsa_amd_vmem_set_access(
    void* va, size_t size, const hsa_amd_memory_access_desc_t* desc,
    size_t desc_cnt) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_set_access, &status)) {
    status = sim_set_access(va, size, desc, desc_cnt);
  }
  uint64_t args[6] = {SIM_U64(va), size, SIM_U64(desc), desc_cnt, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_set_access, status, args, desc, desc_cnt);
}

static hsa_status_t sim_get_access(void* va, hsa_access_permission_t* perms,
                                   hsa_agent_t agent) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  uint32_t index = 0;
  if (!sim_agent_index(agent, &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  if (va == NULL || perms == NULL) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_status_t status = HSA_STATUS_ERROR_INVALID_ARGUMENT;
  sim_lock();
  for (sim_mapping_t* m = g_mappings; m != NULL; m = m->next) {
    if ((uintptr_t)va >= m->va && (uintptr_t)va - m->va < m->size) {
      *perms = (hsa_access_permission_t)m->perms[index];
      status = HSA_STATUS_SUCCESS;
      break;
    }
  }
  sim_unlock();
  return status;
}

HSA_API hsa_status_t hsa_amd_vmem_get_access(void* va,
                                             hsa_access_permission_t* perms,
                                             hsa_agent_t agent_handle) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_vmem_get_access, &status)) {
    status = sim_get_access(va, perms, agent_handle);
  }
  uint64_t args[6] = {SIM_U64(va), SIM_U64(perms), agent_handle.handle, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_amd_vmem_get_access, status, args, NULL, 0);
}

/* ---- Shutdown -------------------------------------------------------------- */

void sim_vmem_shutdown(hsa_sim_live_t* leaked) {
  while (g_mappings != NULL) {
    sim_mapping_t* m = g_mappings;
    g_mappings = m->next;
    (void)sim_placeholder(m->va, m->size);
    free(m);
    ++leaked->mappings;
  }
  while (g_handles != NULL) {
    sim_handle_t* h = g_handles;
    g_handles = h->next;
    close(h->fd);
    free(h);
    ++leaked->handles;
  }
  while (g_reservations != NULL) {
    sim_reservation_t* r = g_reservations;
    g_reservations = r->next;
    munmap((void*)r->base, r->size);
    free(r);
    ++leaked->reservations;
  }
  sim_live.mappings = 0;
  sim_live.handles = 0;
  sim_live.reservations = 0;
}
