/* Buffers sized by the library under test (kept apart from hc_test.c so that
 * binaries which must not link the library can use the rest), in the
 * protocol HC_PROTOCOL names: "phase-bit" or unset/"classic". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim_phase.h"
#include "hc_test.h"
#include "rochostcall.hpp"

#define MAX_PHASE_BUFFERS 64

/* Phase-bit buffers and their occupancy bitmaps (the "device memory" a
 * runtime would allocate beside the buffer). */
static struct {
  void* buffer;
  uint32_t* bitmap;
  size_t bitmap_size;
} phase_buffers[MAX_PHASE_BUFFERS];
static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;

/* A test that forks while other threads make and free buffers (hc_fork's
 * churn) must not hand its child this lock held: taken around fork, released
 * on both sides. Its holders call nothing that takes another lock but free(),
 * which fork itself makes safe. */
static void phase_lock_take(void) { pthread_mutex_lock(&phase_lock); }
static void phase_lock_give(void) { pthread_mutex_unlock(&phase_lock); }
__attribute__((constructor)) static void phase_lock_around_fork(void) {
  pthread_atfork(phase_lock_take, phase_lock_give, phase_lock_give);
}

bool hc_phase_bit(void) {
  const char* protocol = getenv("HC_PROTOCOL");
  return protocol != NULL && strcmp(protocol, "phase-bit") == 0;
}

static void* alloc_zeroed(size_t size) {
  void* buffer = NULL;
  if (posix_memalign(&buffer, 4096, size == 0 ? 1 : size) != 0) return NULL;
  memset(buffer, 0, size == 0 ? 1 : size);
  return buffer;
}

void* hc_alloc_buffer(uint32_t num_packets) {
  if (!hc_phase_bit()) return alloc_zeroed(getHostcallBufferSize(num_packets));
  void* buffer =
      alloc_zeroed(amdgpu_dropin_hostcall_buffer_size(AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT, num_packets));
  size_t bitmap_size = amdgpu_dropin_hostcall_occupancy_size(num_packets);
  uint32_t* bitmap = alloc_zeroed(bitmap_size);
  if (buffer == NULL || bitmap == NULL || !device_sim_phase_attach(buffer)) {
    free(buffer);
    free(bitmap);
    return NULL;
  }
  pthread_mutex_lock(&phase_lock);
  for (int i = 0; i < MAX_PHASE_BUFFERS; ++i) {
    if (phase_buffers[i].buffer == NULL) {
      phase_buffers[i].buffer = buffer;
      phase_buffers[i].bitmap = bitmap;
      phase_buffers[i].bitmap_size = bitmap_size;
      pthread_mutex_unlock(&phase_lock);
      return buffer;
    }
  }
  pthread_mutex_unlock(&phase_lock);
  device_sim_phase_detach(buffer);
  free(buffer);
  free(bitmap);
  return NULL;
}

uint32_t* hc_bitmap_of(void* buffer) {
  uint32_t* bitmap = NULL;
  pthread_mutex_lock(&phase_lock);
  for (int i = 0; i < MAX_PHASE_BUFFERS; ++i) {
    if (phase_buffers[i].buffer == buffer) bitmap = phase_buffers[i].bitmap;
  }
  pthread_mutex_unlock(&phase_lock);
  return bitmap;
}

bool hc_enable(void* buffer, uint32_t num_packets, const void* queue) {
  uint32_t* bitmap = hc_bitmap_of(buffer);
  if (bitmap == NULL) return enableHostcalls(buffer, num_packets, queue);
  memset(bitmap, 0, amdgpu_dropin_hostcall_occupancy_size(num_packets));
  return amdgpu_dropin_hostcall_enable(buffer, num_packets, queue, AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT,
                                       bitmap) == AMDGPU_DROPIN_HOSTCALL_OK;
}

void hc_disable(void* buffer, const void* queue) { disableHostcalls(buffer, queue); }

void hc_free_buffer(void* buffer) {
  pthread_mutex_lock(&phase_lock);
  for (int i = 0; i < MAX_PHASE_BUFFERS; ++i) {
    if (phase_buffers[i].buffer == buffer && buffer != NULL) {
      device_sim_phase_detach(buffer);
      free(phase_buffers[i].bitmap);
      phase_buffers[i].buffer = NULL;
      phase_buffers[i].bitmap = NULL;
    }
  }
  pthread_mutex_unlock(&phase_lock);
  free(buffer);
}

void hc_disable_and_free(void* buffer) {
  disableHostcalls(buffer, NULL);
  hc_free_buffer(buffer);
}
