/* PRINTF corpus: every call of pf_corpus.inc (437 formats with values) is
 * encoded as the device libraries encode it, printed by the library through
 * the hostcall listener (simulated waves), and the captured output is
 * compared byte for byte with the C library's snprintf of the same call;
 * the printf return value must equal snprintf's.
 *
 * Runs: one argument per packet; up to 7 words per packet; stderr (control
 * bit 0); 64 lanes of one wave printing different calls at once. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "pf_device.h"

#define MAX_ARGS 12
#define MAX_EXPECTED 1024

typedef struct pf_case {
  const char* format;
  pf_arg_t args[MAX_ARGS];
  size_t arg_count;
  char expected[MAX_EXPECTED];
  int expected_len;
} pf_case_t;

static pf_case_t cases[512];
static size_t case_count = 0;
static int pf_n_sink = 0;

static pf_case_t* new_case(const char* format, const pf_arg_t* args, size_t count) {
  if (case_count >= sizeof(cases) / sizeof(cases[0]) || count > MAX_ARGS) {
    fprintf(stderr, "corpus too large\n");
    exit(1);
  }
  pf_case_t* c = &cases[case_count++];
  c->format = format;
  memcpy(c->args, args, count * sizeof(pf_arg_t));
  c->arg_count = count;
  return c;
}

#define PF_ONE(x) PF_ARG(x)

#define PF_NARGS(...) PF_NARGS_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define PF_NARGS_(a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, n, ...) n
#define PF_CAT(a, b) PF_CAT_(a, b)
#define PF_CAT_(a, b) a##b
#define PF_MAP(...) PF_CAT(PF_MAP_, PF_NARGS(__VA_ARGS__))(__VA_ARGS__)
#define PF_MAP_1(a) PF_ONE(a)
#define PF_MAP_2(a, ...) PF_ONE(a), PF_MAP_1(__VA_ARGS__)
#define PF_MAP_3(a, ...) PF_ONE(a), PF_MAP_2(__VA_ARGS__)
#define PF_MAP_4(a, ...) PF_ONE(a), PF_MAP_3(__VA_ARGS__)
#define PF_MAP_5(a, ...) PF_ONE(a), PF_MAP_4(__VA_ARGS__)
#define PF_MAP_6(a, ...) PF_ONE(a), PF_MAP_5(__VA_ARGS__)
#define PF_MAP_7(a, ...) PF_ONE(a), PF_MAP_6(__VA_ARGS__)
#define PF_MAP_8(a, ...) PF_ONE(a), PF_MAP_7(__VA_ARGS__)
#define PF_MAP_9(a, ...) PF_ONE(a), PF_MAP_8(__VA_ARGS__)
#define PF_MAP_10(a, ...) PF_ONE(a), PF_MAP_9(__VA_ARGS__)
#define PF_MAP_11(a, ...) PF_ONE(a), PF_MAP_10(__VA_ARGS__)
#define PF_MAP_12(a, ...) PF_ONE(a), PF_MAP_11(__VA_ARGS__)

/* A call with arguments: the reference is snprintf with the same typed
 * arguments; the device encoding comes from the arguments' types. */
#define CASE(fmt, ...)                                                               \
  {                                                                                  \
    const pf_arg_t args_[] = {PF_MAP(__VA_ARGS__)};                                  \
    pf_case_t* c_ = new_case(fmt, args_, sizeof(args_) / sizeof(args_[0]));          \
    c_->expected_len = snprintf(c_->expected, sizeof(c_->expected), fmt, __VA_ARGS__); \
  }
#define CASE0(fmt)                                                         \
  {                                                                        \
    pf_case_t* c_ = new_case(fmt, NULL, 0);                                \
    c_->expected_len = snprintf(c_->expected, sizeof(c_->expected), fmt); \
  }

#include "pf_corpus.inc"

static void build_corpus(void) { PF_CORPUS(CASE, CASE0) }

/* Index of the case whose expected output covers `offset` in the
 * concatenation of all expected outputs. */
static size_t case_at(size_t offset) {
  size_t at = 0;
  for (size_t i = 0; i < case_count; ++i) {
    at += (size_t)cases[i].expected_len;
    if (offset < at) return i;
  }
  return case_count ? case_count - 1 : 0;
}

static void compare_stream(const char* what, const char* got, size_t got_len, const char* want,
                           size_t want_len) {
  if (got_len == want_len && memcmp(got, want, want_len) == 0) return;
  size_t diff = 0;
  while (diff < got_len && diff < want_len && got[diff] == want[diff]) ++diff;
  size_t c = case_at(diff);
  DROPIN_CHECK_MSG(false, "%s: output differs at byte %zu (case %zu, format follows)", what, diff, c);
  pf_print_escaped(stderr, cases[c].format, strlen(cases[c].format));
  fprintf(stderr, "\n  want: ");
  pf_print_escaped(stderr, cases[c].expected, (size_t)cases[c].expected_len);
  fprintf(stderr, "\n  got:  ");
  pf_print_escaped(stderr, got + (diff > 40 ? diff - 40 : 0), got_len - diff > 80 ? 120 : got_len - (diff > 40 ? diff - 40 : 0));
  fputc('\n', stderr);
}

static void* buffer;
static pf_message_t message;
static char* all_expected;
static size_t all_expected_len;

/* Prints every case from lane 0 with `control`, captured; checks the output
 * stream (stdout or stderr) and each return value. */
static void run_sequential(pf_packing_t packing, uint64_t control, const char* what) {
  uint64_t* results = calloc(case_count, sizeof(uint64_t));
  int* rcs = calloc(case_count, sizeof(int));
  if (results == NULL || rcs == NULL) exit(1);
  pf_capture_begin();
  for (size_t i = 0; i < case_count; ++i) {
    if (!pf_encode(&message, packing, control, cases[i].format, cases[i].args, cases[i].arg_count)) {
      rcs[i] = -100;
      continue;
    }
    rcs[i] = pf_send(buffer, &message, &results[i]);
  }
  char *out, *err;
  size_t out_len, err_len;
  pf_capture_end(&out, &out_len, &err, &err_len);
  for (size_t i = 0; i < case_count; ++i) {
    DROPIN_CHECK_MSG(rcs[i] == 0, "%s case %zu: send failed %d", what, i, rcs[i]);
    DROPIN_CHECK_MSG(results[i] == (uint64_t)(int64_t)cases[i].expected_len,
             "%s case %zu (%s): return %lld, snprintf %d", what, i, cases[i].format,
             (long long)results[i], cases[i].expected_len);
  }
  const char* got = control & 1 ? err : out;
  size_t got_len = control & 1 ? err_len : out_len;
  compare_stream(what, got, got_len, all_expected, all_expected_len);
  DROPIN_CHECK_MSG((control & 1 ? out_len : err_len) == 0, "%s: %zu bytes on the other stream", what,
           control & 1 ? out_len : err_len);
  free(out);
  free(err);
  free(results);
  free(rcs);
}

static void test_corpus_one_argument_per_packet(void) {
  run_sequential(PF_PER_ARGUMENT, 0, "per-argument");
}

static void test_corpus_packed_seven_words(void) { run_sequential(PF_PACKED, 0, "packed"); }

static void test_corpus_to_stderr(void) { run_sequential(PF_PER_ARGUMENT, 1, "stderr"); }

/* 64 lanes of one wave print 64 different cases at once (lanes finish after
 * different numbers of packets); repeated over the whole corpus. A message
 * is printed when its END packet is served, lanes of a packet in ascending
 * order, so the expected stream is ordered by (last packet, lane). */
static void test_corpus_64_lanes_at_once(void) {
  pf_message_t* messages[64];
  for (int i = 0; i < 64; ++i) {
    messages[i] = malloc(sizeof(pf_message_t));
    if (messages[i] == NULL) exit(1);
  }
  char* want = malloc(all_expected_len + 1);
  if (want == NULL) exit(1);
  size_t want_len = 0;
  uint64_t bad_returns = 0;
  pf_capture_begin();
  int rc_all = 0;
  for (size_t base = 0; base < case_count; base += 64) {
    uint64_t mask = 0;
    size_t which[64];
    for (int lane = 0; lane < 64 && base + (size_t)lane < case_count; ++lane) {
      /* Spread the cases over the lanes in a scrambled order. */
      size_t i = base + (size_t)((lane * 37) % 64);
      if (i >= case_count) i = base + (size_t)lane;
      which[lane] = i;
      pf_packing_t packing = (lane % 3 == 0) ? PF_PACKED : PF_PER_ARGUMENT;
      if (!pf_encode(messages[lane], packing, 0, cases[i].format, cases[i].args, cases[i].arg_count)) exit(1);
      mask |= 1ull << lane;
    }
    uint64_t results[64];
    int rc = pf_send_wave(buffer, mask, messages, results);
    if (rc != 0) rc_all = rc;
    /* Expected order: by packet count (when the lane's END is served), then lane. */
    uint32_t max_packets = 0;
    for (int lane = 0; lane < 64; ++lane) {
      if ((mask >> lane) & 1 && messages[lane]->packet_count > max_packets) {
        max_packets = messages[lane]->packet_count;
      }
    }
    for (uint32_t round = 1; round <= max_packets; ++round) {
      for (int lane = 0; lane < 64; ++lane) {
        if (!((mask >> lane) & 1) || messages[lane]->packet_count != round) continue;
        const pf_case_t* c = &cases[which[lane]];
        memcpy(want + want_len, c->expected, (size_t)c->expected_len);
        want_len += (size_t)c->expected_len;
        if (results[lane] != (uint64_t)(int64_t)c->expected_len) bad_returns++;
      }
    }
  }
  char *out, *err;
  size_t out_len, err_len;
  pf_capture_end(&out, &out_len, &err, &err_len);
  DROPIN_CHECK_MSG(rc_all == 0, "wave send failed: %d", rc_all);
  DROPIN_CHECK_MSG(bad_returns == 0, "%llu lanes got a wrong return value", (unsigned long long)bad_returns);
  DROPIN_CHECK_MSG(out_len == want_len && memcmp(out, want, want_len) == 0,
           "64-lane output differs (%zu bytes, want %zu)", out_len, want_len);
  DROPIN_CHECK_MSG(err_len == 0, "stderr not empty");
  free(out);
  free(err);
  free(want);
  for (int i = 0; i < 64; ++i) free(messages[i]);
}

/* Cases the C reference cannot express directly. */
static void test_special_cases(void) {
  struct {
    const char* format;
    pf_arg_t args[3];
    size_t n;
    const char* want;
  } special[] = {
      /* A NULL %s arrives as one zero word and prints as "" (glibc's
       * snprintf would print "(null)"). */
      {"[%s]", {{PF_STR, 0, NULL}}, 1, "[]"},
      {"[%5s|%-3s]", {{PF_STR, 0, NULL}, {PF_STR, 0, NULL}}, 2, "[     |   ]"},
      /* Empty format: nothing printed, return 0. */
      {"", {{PF_I32, 0, NULL}}, 0, ""},
      /* long double is a double on the GPU: %La prints like %a. */
      {"%La", {{PF_F64, 0x3ff8000000000000ull, NULL}}, 1, "0x1.8p+0"},
      /* %n writes nothing and consumes its pointer word. */
      {"a%nb%d", {{PF_PTR, 0x1000, NULL}, {PF_I32, 7, NULL}}, 2, "ab7"},
  };
  for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); ++i) {
    uint64_t result = 0;
    DROPIN_CHECK_MSG(pf_encode(&message, PF_PER_ARGUMENT, 0, special[i].format, special[i].args, special[i].n),
             "encode");
    pf_output_t o;
    int rc = pf_send_captured(buffer, &message, &result, &o);
    DROPIN_CHECK_MSG(rc == 0, "send %d", rc);
    DROPIN_CHECK_MSG(o.out_len == strlen(special[i].want) && memcmp(o.out, special[i].want, o.out_len) == 0,
             "special %zu (%s): got %zu bytes '%s'", i, special[i].format, o.out_len, o.out);
    DROPIN_CHECK_MSG(result == strlen(special[i].want), "special %zu: return %llu", i, (unsigned long long)result);
    pf_output_free(&o);
  }
}

int main(void) {
  build_corpus();
  all_expected_len = 0;
  for (size_t i = 0; i < case_count; ++i) {
    if (cases[i].expected_len < 0 || cases[i].expected_len >= MAX_EXPECTED) {
      fprintf(stderr, "case %zu: reference too long\n", i);
      return 1;
    }
    all_expected_len += (size_t)cases[i].expected_len;
  }
  all_expected = malloc(all_expected_len + 1);
  if (all_expected == NULL) return 1;
  size_t at = 0;
  for (size_t i = 0; i < case_count; ++i) {
    memcpy(all_expected + at, cases[i].expected, (size_t)cases[i].expected_len);
    at += (size_t)cases[i].expected_len;
  }
  printf("printf corpus: %zu calls, %zu bytes of expected output\n", case_count, all_expected_len);
  buffer = pf_setup(16);
  HC_RUN(test_corpus_one_argument_per_packet);
  HC_RUN(test_corpus_packed_seven_words);
  HC_RUN(test_corpus_to_stderr);
  HC_RUN(test_corpus_64_lanes_at_once);
  HC_RUN(test_special_cases);
  pf_teardown(buffer);
  free(all_expected);
  return dropin_check_exit_code();
}
