/* hostcall_bench: the latency histogram and medians. */
#include <math.h>
#include <string.h>

#include "bench.h"

uint32_t bucket_of(uint64_t v) {
  if (v < SUB_COUNT) return (uint32_t)v;
  uint32_t msb = 63u - (uint32_t)__builtin_clzll(v);
  return ((msb - SUB_BITS + 1u) << SUB_BITS) + (uint32_t)((v >> (msb - SUB_BITS)) & (SUB_COUNT - 1u));
}

/* Lowest value of bucket b, and its width. */
static void bucket_range(uint32_t b, uint64_t* low, uint64_t* width) {
  if (b < SUB_COUNT) {
    *low = b;
    *width = 1;
    return;
  }
  uint32_t msb = (b >> SUB_BITS) + SUB_BITS - 1u;
  uint64_t sub = b & (SUB_COUNT - 1u);
  *width = 1ull << (msb - SUB_BITS);
  *low = (1ull << msb) + sub * *width;
}

/* Value at quantile q (0..1): midpoint of the bucket holding it. */
double hist_quantile(const uint64_t* hist, uint64_t total, double q) {
  if (total == 0) return 0.0;
  uint64_t rank = (uint64_t)ceil(q * (double)total);
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (uint32_t b = 0; b < BUCKETS; ++b) {
    seen += hist[b];
    if (seen >= rank) {
      uint64_t low, width;
      bucket_range(b, &low, &width);
      return (double)low + (double)(width - 1) / 2.0;
    }
  }
  return 0.0;
}

double median_of(const double* values, uint32_t n) {
  double sorted[MAX_ROUNDS];
  memcpy(sorted, values, n * sizeof(double));
  for (uint32_t i = 1; i < n; ++i) {
    for (uint32_t j = i; j > 0 && sorted[j - 1] > sorted[j]; --j) {
      double t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  }
  if (n == 0) return NAN;
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
}
