/* hostcall_bench: the measured configurations, one result per listener. */
#include <string.h>
#include <unistd.h>

#include "bench.h"

result_t g_results[MAX_RESULTS];
size_t g_result_count;

/* The results of one configuration, one per enabled mode (NULL for the others). */
void new_result_pair(const options_t* opt, int kind, uint32_t delay_us, uint32_t waves,
                     uint32_t buffers, uint32_t pace_us, result_t* pair[MODE_COUNT]) {
  for (int m = 0; m < MODE_COUNT; ++m) {
    pair[m] = NULL;
    if (!opt->modes[m] || g_result_count >= MAX_RESULTS) continue;
    result_t* r = &g_results[g_result_count++];
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->mode = m;
    r->delay_us = delay_us;
    r->waves = waves;
    r->buffers = buffers;
    r->pace_us = pace_us;
    r->harness = g_harness;
    pair[m] = r;
  }
}

/* Thread-per-wave figures with more wave threads than this machine's cores
 * can run measure the host scheduler more than the listener. */
bool scheduler_bound(const result_t* r) {
  return (r->kind == KIND_THROUGHPUT || r->kind == KIND_ISOLATION_REF ||
          r->kind == KIND_ISOLATION_SLOW) &&
         r->waves + 1 > 8u * (uint32_t)sysconf(_SC_NPROCESSORS_ONLN);
}

/* One line of progress per result (the tables come from the JSON). */
void print_result_line(const result_t* r) {
  static const char* const kKind[] = {"threads", "isolation", "isolation+slow", "device", "paced",
                                      "heavy"};
  if (!r->ok) {
    printf("%-14s %-11s W=%-2u B=%u P=%-4u %s\n", kKind[r->kind], kModeName[r->mode], r->waves,
           r->buffers, r->pace_us, r->failed ? "FAILED" : "no figures (machine too busy)");
    return;
  }
  printf("%-14s %-11s W=%-2u B=%u P=%-4u %10.0f rt/s  p99 %8.1f us  listener %6.2f us/rt (%5.1f%% of a "
         "core)%s%s\n",
         kKind[r->kind], kModeName[r->mode], r->waves, r->buffers, r->pace_us, r->rts, r->p99_us,
         r->listener_cpu_us_per_rt, r->listener_cpu_pct, scheduler_bound(r) ? " *" : "",
         r->harness == HARNESS_LEGACY ? " [legacy harness]" : "");
}
