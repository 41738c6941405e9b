/* Concurrent device printf: many simulated waves (threads) on two buffers
 * print at once, each call from a random set of lanes whose messages have
 * different lengths (lanes diverge), some to stderr. Every line must come
 * out intact, exactly once, equal to snprintf's output for that
 * (wave, call, lane), and every lane must get its line's length back. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device_sim.h"
#include "pf_device.h"
#include "rochostcall.hpp"

#define WAVES 16
#define CALLS 40
#define BUFFERS 2
#define PACKETS 6 /* fewer packets than waves: waves wait for free packets */

static const char* const FORMAT = "w=%u c=%u l=%u %s|%d|%.3f|%#lx|%c\n";

static void* buffers[BUFFERS];

/* The arguments of (wave, call, lane): deterministic, so the checker can
 * recompute the line. */
typedef struct line_args {
  char text[96];
  int number;
  double real;
  unsigned long address;
  int ch;
} line_args_t;

static void make_args(unsigned w, unsigned c, unsigned l, line_args_t* a) {
  uint64_t state = ((uint64_t)w << 40) ^ ((uint64_t)c << 20) ^ l ^ 0x5eedull;
  size_t len = (size_t)(device_sim_rand(&state) % 90);
  for (size_t i = 0; i < len; ++i) a->text[i] = (char)('a' + device_sim_rand(&state) % 26);
  a->text[len] = '\0';
  a->number = (int)(int32_t)device_sim_rand(&state);
  a->real = (double)(int64_t)device_sim_rand(&state) / 1e12;
  a->address = (unsigned long)device_sim_rand(&state);
  a->ch = 'A' + (int)(device_sim_rand(&state) % 26);
}

static int expected_line(unsigned w, unsigned c, unsigned l, char* out, size_t size) {
  line_args_t a;
  make_args(w, c, l, &a);
  return snprintf(out, size, FORMAT, w, c, l, a.text, a.number, a.real, a.address, a.ch);
}

static bool to_stderr(unsigned w, unsigned c, unsigned l) { return ((w + c + l) % 5) == 0; }

typedef struct wave {
  unsigned index;
  uint64_t masks[CALLS];
  uint64_t bad_returns;
  int rc;
  pf_message_t* messages[64];
} wave_t;

static void* wave_main(void* arg) {
  wave_t* wave = arg;
  uint64_t state = 0xabcdef ^ wave->index;
  for (unsigned c = 0; c < CALLS; ++c) {
    uint64_t mask = device_sim_random_mask(&state);
    wave->masks[c] = mask;
    for (unsigned l = 0; l < 64; ++l) {
      if (!((mask >> l) & 1)) continue;
      line_args_t a;
      make_args(wave->index, c, l, &a);
      pf_arg_t args[] = {pf_u32(wave->index), pf_u32(c), pf_u32(l), pf_str(a.text),
                         pf_i32(a.number), pf_f64(a.real), pf_u64(a.address), pf_i32(a.ch)};
      pf_packing_t packing = (l + c) % 4 == 0 ? PF_PACKED : PF_PER_ARGUMENT;
      if (!pf_encode(wave->messages[l], packing, to_stderr(wave->index, c, l) ? 1 : 0, FORMAT,
                     args, sizeof(args) / sizeof(args[0]))) {
        wave->rc = -100;
        return NULL;
      }
    }
    uint64_t results[64];
    int rc = pf_send_wave(buffers[wave->index % BUFFERS], mask, wave->messages, results);
    if (rc != 0) {
      wave->rc = rc;
      return NULL;
    }
    for (unsigned l = 0; l < 64; ++l) {
      if (!((mask >> l) & 1)) continue;
      char line[256];
      int n = expected_line(wave->index, c, l, line, sizeof(line));
      if (results[l] != (uint64_t)n) wave->bad_returns++;
    }
  }
  return NULL;
}

/* Checks one captured stream: every line parses, equals its expected text,
 * and is seen once; returns the number of lines. */
static size_t check_stream(const char* what, char* data, size_t len, unsigned char* seen,
                           bool stderr_stream) {
  size_t lines = 0;
  char* at = data;
  char* end = data + len;
  while (at < end) {
    char* nl = memchr(at, '\n', (size_t)(end - at));
    if (nl == NULL) {
      DROPIN_CHECK_MSG(false, "%s: unterminated last line", what);
      break;
    }
    unsigned w, c, l;
    char line[256];
    if (sscanf(at, "w=%u c=%u l=%u ", &w, &c, &l) != 3 || w >= WAVES || c >= CALLS || l >= 64) {
      DROPIN_CHECK_MSG(false, "%s: garbled line at byte %zu", what, (size_t)(at - data));
      pf_print_escaped(stderr, at, (size_t)(nl - at) + 1);
      fputc('\n', stderr);
      at = nl + 1;
      continue;
    }
    int n = expected_line(w, c, l, line, sizeof(line));
    size_t got = (size_t)(nl - at) + 1;
    DROPIN_CHECK_MSG(got == (size_t)n && memcmp(at, line, got) == 0, "%s: line w=%u c=%u l=%u differs",
             what, w, c, l);
    DROPIN_CHECK_MSG(to_stderr(w, c, l) == stderr_stream, "%s: line w=%u c=%u l=%u on the wrong stream",
             what, w, c, l);
    size_t key = ((size_t)w * CALLS + c) * 64 + l;
    DROPIN_CHECK_MSG(seen[key] == 0, "%s: line w=%u c=%u l=%u printed twice", what, w, c, l);
    seen[key] = 1;
    lines++;
    at = nl + 1;
  }
  return lines;
}

static void test_many_waves_print_intact_lines(void) {
  static wave_t waves[WAVES];
  pthread_t threads[WAVES];
  for (unsigned w = 0; w < WAVES; ++w) {
    memset(&waves[w], 0, sizeof(waves[w]));
    waves[w].index = w;
    for (int l = 0; l < 64; ++l) {
      waves[w].messages[l] = malloc(sizeof(pf_message_t));
      if (waves[w].messages[l] == NULL) exit(1);
    }
  }
  pf_capture_begin();
  for (unsigned w = 0; w < WAVES; ++w) pthread_create(&threads[w], NULL, wave_main, &waves[w]);
  for (unsigned w = 0; w < WAVES; ++w) pthread_join(threads[w], NULL);
  char *out, *err;
  size_t out_len, err_len;
  pf_capture_end(&out, &out_len, &err, &err_len);

  size_t expected_lines = 0;
  uint64_t bad_returns = 0;
  for (unsigned w = 0; w < WAVES; ++w) {
    DROPIN_CHECK_MSG(waves[w].rc == 0, "wave %u failed: %d", w, waves[w].rc);
    bad_returns += waves[w].bad_returns;
    for (unsigned c = 0; c < CALLS; ++c) expected_lines += (size_t)__builtin_popcountll(waves[w].masks[c]);
  }
  DROPIN_CHECK_MSG(bad_returns == 0, "%llu lanes got a wrong return value", (unsigned long long)bad_returns);
  unsigned char* seen = calloc((size_t)WAVES * CALLS * 64, 1);
  if (seen == NULL) exit(1);
  size_t lines = check_stream("stdout", out, out_len, seen, false);
  lines += check_stream("stderr", err, err_len, seen, true);
  DROPIN_CHECK_MSG(lines == expected_lines, "%zu lines printed, %zu expected", lines, expected_lines);
  for (unsigned w = 0; w < WAVES; ++w) {
    for (unsigned c = 0; c < CALLS; ++c) {
      for (unsigned l = 0; l < 64; ++l) {
        bool printed = seen[((size_t)w * CALLS + c) * 64 + l] != 0;
        bool active = (waves[w].masks[c] >> l) & 1;
        DROPIN_CHECK_MSG(printed == active, "w=%u c=%u l=%u printed=%d active=%d", w, c, l, printed, active);
      }
    }
  }
  printf("  %zu lines (%zu + %zu bytes) from %d waves on %d buffers\n", lines, out_len, err_len,
         WAVES, BUFFERS);
  free(seen);
  free(out);
  free(err);
  for (unsigned w = 0; w < WAVES; ++w) {
    for (int l = 0; l < 64; ++l) free(waves[w].messages[l]);
  }
}

int main(void) {
  buffers[0] = pf_setup(PACKETS);
  size_t size = getHostcallBufferSize(PACKETS);
  if (posix_memalign(&buffers[1], 4096, size) != 0) return 1;
  memset(buffers[1], 0, size);
  if (!enableHostcalls(buffers[1], PACKETS, (const void*)0x6160)) {
    fprintf(stderr, "enable second buffer failed\n");
    return 1;
  }
  HC_RUN(test_many_waves_print_intact_lines);
  disableHostcalls(buffers[1], (const void*)0x6160);
  free(buffers[1]);
  pf_teardown(buffers[0]);
  return dropin_check_exit_code();
}
