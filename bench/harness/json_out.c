/* hostcall_bench: the run's JSON (what bench/report/ reads). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bench.h"

const char* g_host_label = "unnamed";

static void json_number(FILE* f, double v) {
  if (isnan(v) || isinf(v)) {
    fputs("null", f);
  } else {
    fprintf(f, "%.6g", v);
  }
}

static void json_field(FILE* f, const char* name, double v) {
  fprintf(f, ", \"%s\": ", name);
  json_number(f, v);
}

static void json_array(FILE* f, const char* name, const double* v, uint32_t n) {
  fprintf(f, "\"%s\": [", name);
  for (uint32_t i = 0; i < n; ++i) {
    if (i) fputs(", ", f);
    json_number(f, v[i]);
  }
  fputs("]", f);
}

static const char* kind_name(int kind) {
  switch (kind) {
    case KIND_THROUGHPUT: return "threads";
    case KIND_ISOLATION_REF: return "threads_isolation_reference";
    case KIND_ISOLATION_SLOW: return "threads_isolation_slow_buffer";
    case KIND_DEVICE: return "device";
    case KIND_HEAVY: return "device_heavy";
    default: return "device_paced";
  }
}

static void json_counters(FILE* f, const lib_counters_t* c) {
  if (!c->have) return;
  fprintf(f,
          ", \"counters\": {\"packets\": %" PRIu64 ", \"lanes\": %" PRIu64 ", \"doorbell_rings\": %" PRIu64
          ", \"lost_rings\": %" PRIu64 ", \"blocked_waits\": %" PRIu64 ", \"wait_timeouts\": %" PRIu64
          ", \"helper_handoffs\": %" PRIu64 ", \"longest_service_ns\": %" PRIu64
          ", \"forecast_sleeps\": %" PRIu64 ", \"watch_looks\": %" PRIu64 "}",
          c->packets, c->lanes, c->rings_seen, c->lost_rings, c->blocked_waits, c->wait_timeouts,
          c->handoffs, c->longest_service_ns, c->forecast_sleeps, c->watch_looks);
}

static void json_section_names(FILE* f, uint32_t sections) {
  static const char* const kSection[] = {"device", "paced", "wakeup", "threads",
                                         "idle",   "lost",  "heavy",  "harness"};
  bool first = true;
  for (uint32_t i = 0; i < sizeof(kSection) / sizeof(kSection[0]); ++i) {
    if (!(sections & (1u << i))) continue;
    fprintf(f, "%s\"%s\"", first ? "" : ", ", kSection[i]);
    first = false;
  }
}

bool write_json(const options_t* opt, const char* path) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "hostcall_bench: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  struct utsname u;
  uname(&u);
  fprintf(f, "{\n  \"benchmark\": \"hostcall_bench\",\n  \"sections\": [");
  json_section_names(f, opt->sections);
  fprintf(f, "],\n");
  fprintf(f,
          "  \"machine\": {\"cpus_online\": %ld, \"kernel\": \"%s %s\", \"arch\": \"%s\", "
          "\"cpu_model\": \"%s\", \"host\": \"%s\", \"cpu_main\": %d, \"cpu_listener\": %d, "
          "\"cpu_helper\": %d, \"cpu_device\": %d},\n",
          sysconf(_SC_NPROCESSORS_ONLN), u.sysname, u.release, u.machine, cpu_model_name(),
          g_host_label, g_device_pin ? g_cpu_main : -1, g_device_pin ? g_cpu_listener : -1,
          g_device_pin ? g_cpu_helper : -1, g_device_pin ? g_cpu_device : -1);
  fprintf(f,
          "  \"settings\": {\"duration_ms\": %u, \"warmup_ms\": %u, \"idle_ms\": %u, "
          "\"device_rounds\": %u, \"device_round_ms\": %u, \"paced_round_ms\": %u, \"device_pinned\": %s, "
          "\"packets_per_buffer\": %u, \"lanes_per_call\": 64, \"periodic_recheck\": false, "
          "\"slow_function_us\": %llu, \"heavy_packet_us\": %llu, \"wave_sched\": \"%s\", "
          "\"pinned\": %s, \"wave_yield_per_call\": %s, \"lost_rescue_ms\": %u},\n",
          opt->duration_ms, opt->warmup_ms, opt->idle_ms, opt->rounds, opt->device_ms, opt->paced_ms,
          g_device_pin ? "true" : "false", PACKETS_PER_BUFFER,
          (unsigned long long)(SLOW_FUNCTION_NS / 1000), (unsigned long long)(HEAVY_PACKET_NS / 1000),
          kWaveSchedName[g_wave_sched], g_pin ? "true" : "false", g_wave_yield ? "true" : "false",
          opt->lost_rescue_ms);
  fprintf(f, "  \"results\": [\n");
  for (size_t i = 0; i < g_result_count; ++i) {
    const result_t* r = &g_results[i];
    fprintf(f,
            "    {\"kind\": \"%s\", \"mode\": \"%s\", \"harness\": \"%s\", \"wake_delay_us\": %u, "
            "\"waves\": %u, \"buffers\": %u, \"pace_us\": %u, \"ok\": %s, \"scheduler_bound\": %s, "
            "\"calls\": %" PRIu64,
            kind_name(r->kind), kModeName[r->mode], r->harness == HARNESS_LEGACY ? "legacy" : "faithful",
            r->delay_us, r->waves, r->buffers, r->pace_us, r->ok ? "true" : "false",
            scheduler_bound(r) ? "true" : "false", r->calls);
    json_field(f, "seconds", r->seconds);
    json_field(f, "round_trips_per_s", r->rts);
    json_field(f, "p50_us", r->p50_us);
    json_field(f, "p99_us", r->p99_us);
    json_field(f, "p999_us", r->p999_us);
    json_field(f, "max_us", r->max_us);
    json_field(f, "process_cpu_us_per_rt", r->process_cpu_us_per_rt);
    json_field(f, "listener_cpu_us_per_rt", r->listener_cpu_us_per_rt);
    json_field(f, "listener_cpu_pct", r->listener_cpu_pct);
    json_field(f, "other_processes_cpu_cores", r->other_load_cores);
    fprintf(f, ", \"listener_threads\": %d", r->listener_thread_count);
    if (r->kind == KIND_ISOLATION_SLOW) fprintf(f, ", \"slow_calls\": %" PRIu64, r->slow_calls);
    if (r->kind == KIND_DEVICE || r->kind == KIND_PACED || r->kind == KIND_HEAVY) {
      json_field(f, "device_cpu_us_per_rt", r->device_cpu_us_per_rt);
      const struct { const char* name; const double* values; } rounds[] = {
          {"round_trips_per_s", r->round_rts}, {"p50_us", r->round_p50}, {"p99_us", r->round_p99},
          {"p999_us", r->round_p999}, {"listener_cpu_us_per_rt", r->round_lcpu},
          {"listener_cpu_pct", r->round_lpct}};
      fputs(", \"rounds\": {", f);
      for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; ++k) {
        if (k) fputs(", ", f);
        json_array(f, rounds[k].name, rounds[k].values, r->rounds);
      }
      fputs("}", f);
    }
    json_counters(f, &r->counters);
    fprintf(f, "}%s\n", i + 1 < g_result_count ? "," : "");
  }
  fprintf(f, "  ],\n  \"idle\": [\n");
  bool first = true;
  for (int m = 0; m < MODE_COUNT && g_have_idle; ++m) {
    const idle_t* idle = &g_idle[m];
    if (!idle->ok) continue;
    fprintf(f, "%s    {\"mode\": \"%s\", \"buffers\": %u", first ? "" : ",\n", kModeName[m],
            idle->buffers);
    json_field(f, "seconds", idle->seconds);
    json_field(f, "listener_cpu_ms", idle->listener_cpu_ms);
    json_field(f, "listener_cpu_pct", idle->listener_cpu_pct);
    json_field(f, "process_cpu_ms", idle->process_cpu_ms);
    json_field(f, "bare_sleeper_cpu_ms", idle->bare_sleeper_cpu_ms);
    json_field(f, "bare_watch_period_cpu_ms", idle->bare_watch_period_cpu_ms);
    json_counters(f, &idle->counters);
    fputs("}", f);
    first = false;
  }
  fprintf(f, "\n  ],\n  \"wakeup\": [");
  bool first_wake = true;
  for (int paced = 0; paced < 2; ++paced) {
    const wakeup_t* set = paced ? g_paced_wakeup : g_wakeup;
    for (int k = 0; k < WAKE_KINDS; ++k) {
      const wakeup_t* w = &set[k];
      if (!w->ok) continue;
      /* "with": measured in its own section, or in the rounds of paced
       * 1000 us, W=1 (one round after each round of the listeners). */
      fprintf(f, "%s\n    {\"kind\": \"%s\", \"with\": \"%s\", \"pace_us\": 1000, \"count\": %" PRIu64,
              first_wake ? "" : ",", kWakeName[k], paced ? "paced" : "wakeup", w->count);
      first_wake = false;
      json_field(f, "p50_us", w->p50_us);
      json_field(f, "p99_us", w->p99_us);
      fputs(", \"rounds\": {", f);
      json_array(f, "p50_us", w->round_p50, w->rounds);
      fputs(", ", f);
      json_array(f, "p99_us", w->round_p99, w->rounds);
      fputs("}}", f);
    }
  }
  fprintf(f, "\n  ],\n  \"lost_rings\": [");
  for (size_t i = 0; i < g_lost_count; ++i) {
    const lost_t* l = &g_lost[i];
    fprintf(f, "%s\n    {\"mode\": \"%s\", \"gap_ms\": %u, \"which\": \"%s\", \"served\": %s",
            i ? "," : "", kModeName[l->mode], l->gap_ms, l->first ? "first" : "later",
            l->served ? "true" : "false");
    json_field(f, "wait_ms", l->wait_ms);
    if (l->counted >= 0) fprintf(f, ", \"counted_by_library\": %d", l->counted);
    fputs("}", f);
  }
  fprintf(f, "\n  ],\n  \"idle_around_lost_rings\": {");
  bool first_lost_idle = true;
  for (int m = 0; m < MODE_COUNT; ++m) {
    if (isnan(g_lost_idle_before_ms[m]) && isnan(g_lost_idle_after_ms[m])) continue;
    fprintf(f, "%s\"%s\": {\"before_ms_per_2s\": ", first_lost_idle ? "" : ", ", kModeName[m]);
    json_number(f, g_lost_idle_before_ms[m]);
    json_field(f, "after_ms_per_2s", g_lost_idle_after_ms[m]);
    fputs("}", f);
    first_lost_idle = false;
  }
  fprintf(f, "}\n}\n");
  return fclose(f) == 0;
}
