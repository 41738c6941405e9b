/* Buffers sized by the library under test (kept apart from hc_test.c so that
 * binaries which must not link the library can use the rest). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "hc_test.h"
#include "rochostcall.hpp"

void* hc_alloc_buffer(uint32_t num_packets) {
  size_t size = getHostcallBufferSize(num_packets);
  if (size == 0) size = 1;
  void* buffer = NULL;
  if (posix_memalign(&buffer, 4096, size) != 0) return NULL;
  memset(buffer, 0, size);
  return buffer;
}

void hc_free_buffer(void* buffer) { free(buffer); }


void hc_disable_and_free(void* buffer) {
  disableHostcalls(buffer, NULL);
  hc_free_buffer(buffer);
}
