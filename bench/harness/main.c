/* hostcall_bench: FUNCTION_CALL round trips from simulated GPU waves (the
 * device simulator) through the hostcall listener, on the software HSA
 * runtime, for the product listener ("ours", the product library) and the
 * reference strategies of bench/baseline, each a library dlopen'ed
 * RTLD_LOCAL into the same process and measured in alternating rounds.
 *
 * This half measures and writes one JSON file; bench/report/ computes the
 * targets, tables and plots and generates docs/performance.md from it. The
 * sections (bench.h) can run in separate processes and be joined after.
 * Options: options.c and bench/README.md. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

int main(int argc, char** argv) {
  options_t opt;
  if (!parse_options(argc, argv, &opt)) return 2;
  setvbuf(stdout, NULL, _IOLBF, 0);
  apply_harness(g_harness);
  if (hsa_init() != HSA_STATUS_SUCCESS) {
    fprintf(stderr, "hostcall_bench: hsa_init failed\n");
    return 1;
  }
  for (int m = 0; m < MODE_COUNT; ++m) g_lost_idle_before_ms[m] = g_lost_idle_after_ms[m] = NAN;
  if (!load_libraries(opt.modes)) return 1;
  if (!alloc_buffers()) {
    fprintf(stderr, "hostcall_bench: out of memory\n");
    return 1;
  }
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) g_pin = g_device_pin = false;
  choose_cpus();
  if (g_device_pin && g_cpu_main >= 0) pin_current_thread_to(g_cpu_main);
  printf("hostcall_bench: %ld CPUs online (%s); harness %s; host %s\n", sysconf(_SC_NPROCESSORS_ONLN),
         cpu_model_name(), g_harness == HARNESS_LEGACY ? "legacy" : "faithful", g_host_label);
  if (g_device_pin) {
    printf("device-model pinning: main thread %s%d, listener CPU %d, its helper CPU %d, device "
           "thread CPU %d\n", g_cpu_main < 0 ? "unpinned " : "CPU ", g_cpu_main < 0 ? -1 : g_cpu_main,
           g_cpu_listener, g_cpu_helper, g_cpu_device);
  }
  int failures = 0;
  if (opt.sections & SECTION_DEVICE) failures += run_device_section(&opt, false);
  if (opt.sections & SECTION_HEAVY) failures += run_heavy_section(&opt);
  if (opt.sections & SECTION_PACED) failures += run_device_section(&opt, true);
  if (opt.sections & SECTION_HARNESS) failures += run_harness_section(&opt);
  if (opt.sections & SECTION_WAKEUP) run_wakeup_section(&opt);
  if (opt.sections & SECTION_LOST) failures += run_lost_ring_section(&opt);
  if (opt.sections & SECTION_THREADS) failures += run_thread_section(&opt);
  if (opt.sections & SECTION_IDLE) failures += run_idle_section(&opt);
  bool wrote = write_json(&opt, opt.json_path);
  if (wrote) printf("wrote %s\n", opt.json_path);
  hsa_shut_down();
  return failures == 0 && wrote ? 0 : 1;
}
