/* hostcall_bench: the command line. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static uint32_t parse_list(const char* text, uint32_t* out, uint32_t max) {
  uint32_t n = 0;
  char* copy = strdup(text);
  for (char* tok = strtok(copy, ","); tok != NULL && n < max; tok = strtok(NULL, ",")) {
    out[n++] = (uint32_t)strtoul(tok, NULL, 10);
  }
  free(copy);
  return n;
}

static void usage(void) {
  fprintf(stderr,
          "usage: hostcall_bench [--json PATH] [--quick] [--sections LIST] [--harness faithful|legacy]\n"
          "  sections: device,paced,wakeup,threads,idle,lost,heavy,harness or all (the default)\n"
          "  device model: [--rounds N] [--device-ms N] [--paced-ms N]\n"
          "                [--device-waves 1,4,16,32,64]\n"
          "                [--paces 1000,200,50] [--paced-waves 1,16] [--no-pin]\n"
          "  thread per wave: [--no-threads] [--duration-ms N] [--segments N] [--warmup-ms N]\n"
          "                [--delays 20] [--waves 1,4,16,64] [--buffers 1,8] [--no-isolation]\n"
          "                [--wave-sched idle|nice19|normal] [--pin] [--no-wave-yield]\n"
          "  [--idle-ms N] [--modes baseline,ours,phasebit,classic2026,phase2026,floor-db,floor-st]\n"
          "  [--ours-lib PATH] [--baseline-lib PATH] [--lib-dir DIR] [--host LABEL]\n"
          "  [--lost-gaps 5,50,200,1000] [--lost-rescue-ms N]\n");
}

static bool parse_sections(const char* text, uint32_t* out) {
  static const char* const kSection[] = {"device", "paced", "wakeup", "threads",
                                         "idle",   "lost",  "heavy",  "harness"};
  *out = 0;
  char* copy = strdup(text);
  bool ok = copy != NULL;
  for (char* tok = ok ? strtok(copy, ",") : NULL; tok != NULL; tok = strtok(NULL, ",")) {
    bool known = strcmp(tok, "all") == 0;
    if (known) *out |= SECTION_ALL;
    for (uint32_t i = 0; i < sizeof(kSection) / sizeof(kSection[0]); ++i) {
      if (strcmp(tok, kSection[i]) == 0) *out |= 1u << i, known = true;
    }
    if (!known) {
      fprintf(stderr, "hostcall_bench: unknown section %s\n", tok);
      ok = false;
    }
  }
  free(copy);
  return ok && *out != 0;
}

bool parse_options(int argc, char** argv, options_t* opt) {
  memset(opt, 0, sizeof(*opt));
  opt->duration_ms = 2000;
  opt->segments = 4;
  opt->warmup_ms = 150;
  opt->idle_ms = 2000;
  opt->sections = SECTION_ALL;
  opt->json_path = "hostcall_bench.json";
  opt->isolation = true;
  opt->rounds = 5;
  opt->device_ms = 300;
  opt->paced_ms = 1000;
  for (int m = 0; m < MODE_COUNT; ++m) opt->modes[m] = true;
  opt->lost_gap_count = parse_list("5,50,200,1000", opt->lost_gaps, MAX_LIST);
  opt->lost_rescue_ms = 1000;
  opt->delay_count = parse_list("20", opt->delays, MAX_LIST);
  opt->wave_count = parse_list("1,4,16,64", opt->waves, MAX_LIST);
  opt->buffer_count = parse_list("1,8", opt->buffers, MAX_LIST);
  opt->device_wave_count = parse_list("1,4,16,32,64", opt->device_waves, MAX_LIST);
  opt->pace_count = parse_list("1000,200,50", opt->paces, MAX_LIST);
  opt->paced_wave_count = parse_list("1,16", opt->paced_waves, MAX_LIST);
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--quick") == 0) {
      opt->duration_ms = 60;
      opt->segments = 1;
      opt->warmup_ms = 20;
      opt->idle_ms = 100;
      opt->rounds = 1;
      opt->device_ms = 60;
      opt->paced_ms = 60;
      opt->lost_gap_count = parse_list("5", opt->lost_gaps, MAX_LIST);
      opt->lost_rescue_ms = 150;
      g_device_warmup_ms = 10;
    } else if (strcmp(a, "--no-isolation") == 0) {
      opt->isolation = false;
    } else if (strcmp(a, "--no-wave-yield") == 0) {
      g_wave_yield = false;
    } else if (strcmp(a, "--pin") == 0) {
      g_pin = true;
    } else if (strcmp(a, "--no-pin") == 0) {
      g_device_pin = false;
    } else if (v == NULL) {
      usage();
      return false;
    } else if (strcmp(a, "--duration-ms") == 0) {
      opt->duration_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--segments") == 0) {
      opt->segments = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--warmup-ms") == 0) {
      opt->warmup_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--idle-ms") == 0) {
      opt->idle_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--rounds") == 0) {
      opt->rounds = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--device-ms") == 0) {
      opt->device_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--paced-ms") == 0) {
      opt->paced_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--json") == 0) {
      opt->json_path = v, ++i;
    } else if (strcmp(a, "--sections") == 0) {
      if (!parse_sections(v, &opt->sections)) return false;
      ++i;
    } else if (strcmp(a, "--harness") == 0) {
      if (strcmp(v, "legacy") == 0) {
        g_harness = HARNESS_LEGACY;
      } else if (strcmp(v, "faithful") == 0) {
        g_harness = HARNESS_FAITHFUL;
      } else {
        usage();
        return false;
      }
      ++i;
    } else if (strcmp(a, "--ours-lib") == 0) {
      g_lib_paths[MODE_OURS] = g_lib_paths[MODE_PHASE] = v, ++i;
    } else if (strcmp(a, "--baseline-lib") == 0) {
      g_lib_paths[MODE_BASELINE] = v, ++i;
    } else if (strcmp(a, "--modes") == 0) {
      for (int m = 0; m < MODE_COUNT; ++m) opt->modes[m] = false;
      char* copy = strdup(v);
      for (char* tok = strtok(copy, ","); tok != NULL; tok = strtok(NULL, ",")) {
        bool known = false;
        for (int m = 0; m < MODE_COUNT; ++m) {
          if (strcmp(tok, kModeName[m]) == 0) opt->modes[m] = known = true;
        }
        if (!known) {
          fprintf(stderr, "hostcall_bench: unknown mode %s\n", tok);
          free(copy);
          return false;
        }
      }
      free(copy);
      ++i;
    } else if (strcmp(a, "--lib-dir") == 0) {
      set_lib_dir(v), ++i;
    } else if (strcmp(a, "--host") == 0) {
      g_host_label = v, ++i;
    } else if (strcmp(a, "--lost-gaps") == 0) {
      opt->lost_gap_count = parse_list(v, opt->lost_gaps, MAX_LIST), ++i;
    } else if (strcmp(a, "--lost-rescue-ms") == 0) {
      opt->lost_rescue_ms = (uint32_t)strtoul(v, NULL, 10), ++i;
    } else if (strcmp(a, "--delays") == 0) {
      opt->delay_count = parse_list(v, opt->delays, MAX_LIST), ++i;
    } else if (strcmp(a, "--waves") == 0) {
      opt->wave_count = parse_list(v, opt->waves, MAX_LIST), ++i;
    } else if (strcmp(a, "--device-waves") == 0) {
      opt->device_wave_count = parse_list(v, opt->device_waves, MAX_LIST), ++i;
    } else if (strcmp(a, "--paces") == 0) {
      opt->pace_count = strcmp(v, "none") == 0 ? 0 : parse_list(v, opt->paces, MAX_LIST), ++i;
    } else if (strcmp(a, "--paced-waves") == 0) {
      opt->paced_wave_count = parse_list(v, opt->paced_waves, MAX_LIST), ++i;
    } else if (strcmp(a, "--wave-sched") == 0) {
      g_wave_sched = strcmp(v, "normal") == 0   ? WAVE_SCHED_NORMAL
                     : strcmp(v, "nice19") == 0 ? WAVE_SCHED_NICE
                                                : WAVE_SCHED_IDLE;
      ++i;
    } else if (strcmp(a, "--buffers") == 0) {
      opt->buffer_count = parse_list(v, opt->buffers, MAX_LIST), ++i;
    } else {
      usage();
      return false;
    }
  }
  const uint32_t* wave_lists[3] = {opt->waves, opt->device_waves, opt->paced_waves};
  const uint32_t wave_counts[3] = {opt->wave_count, opt->device_wave_count, opt->paced_wave_count};
  for (int l = 0; l < 3; ++l) {
    for (uint32_t i = 0; i < wave_counts[l]; ++i) {
      if (wave_lists[l][i] == 0 || wave_lists[l][i] > MAX_WAVES) {
        fprintf(stderr, "hostcall_bench: waves must be 1..%u\n", MAX_WAVES);
        return false;
      }
    }
  }
  for (uint32_t i = 0; i < opt->buffer_count; ++i) {
    if (opt->buffers[i] == 0 || opt->buffers[i] > MAX_BUFFERS) {
      fprintf(stderr, "hostcall_bench: buffers must be 1..%u\n", MAX_BUFFERS);
      return false;
    }
  }
  if (opt->segments == 0) opt->segments = 1;
  if (opt->rounds == 0) opt->rounds = 1;
  if (opt->rounds > MAX_ROUNDS) opt->rounds = MAX_ROUNDS;
  if (opt->duration_ms == 0 || opt->device_ms == 0 || opt->paced_ms == 0 || opt->delay_count == 0 ||
      opt->wave_count == 0 || opt->buffer_count == 0 || opt->device_wave_count == 0) {
    usage();
    return false;
  }
  return true;
}

