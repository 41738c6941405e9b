/* hostcall_bench: the host functions the simulated waves call. */
#include <errno.h>

#include "bench.h"

/* The trivial host function of every normal request. */
void bench_function(uint64_t out[2], const uint64_t in[7]) {
  out[0] = in[0] + 1;
  out[1] = in[1] ^ 0x5A5A5A5A5A5A5A5Aull;
}

/* The slow buffer's host function: 1 ms (sleeping, like a blocked write). */
void slow_function(uint64_t out[2], const uint64_t in[7]) {
  struct timespec ts = {0, (long)SLOW_FUNCTION_NS};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  bench_function(out, in);
}

/* The heavy case's host function: HEAVY_PACKET_NS of work per packet,
 * spread evenly over its 64 lanes (spinning, as formatting a line does). */
void heavy_function(uint64_t out[2], const uint64_t in[7]) {
  uint64_t until = device_sim_now_ns() + HEAVY_PACKET_NS / 64u;
  while (device_sim_now_ns() < until) {
  }
  bench_function(out, in);
}
