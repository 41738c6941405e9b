/* Registered printf sinks (amdgpu_dropin_hostcall_register_printf_sink):
 * argument checks, each message handed over whole with its stream, a
 * buffer's own sink preferred over the one for every buffer and ending with
 * the buffer's disable, a short write answered -1, unregister waiting for a
 * running sink call (and not for itself when called from the sink), and fds
 * 1 and 2 again once no sink is left. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "pf_device.h"

static void* buffer;

#define MAX_SEEN 128
typedef struct seen_message {
  int sink;
  void* buffer;
  uint32_t stream;
  char bytes[256];
  size_t length;
} seen_message_t;

static seen_message_t seen[MAX_SEEN];
static atomic_int seen_count;

/* What the sinks below do besides recording (set by each test). */
static atomic_int short_by;           /* report this many bytes fewer */
static atomic_int block_in_sink;      /* the next call waits for `release` */
static atomic_int inside_sink;        /* a blocked call has started */
static atomic_int release_sink;
static atomic_int unregistered;       /* set by the unregistering thread after the return */
static atomic_int unregister_done_seen; /* what the blocked call saw at its end */
static atomic_int unregister_self;    /* the next call unregisters its own sink */
static atomic_int self_status;

static void record(int sink, void* buf, uint32_t stream, const char* bytes, size_t length) {
  int i = atomic_fetch_add(&seen_count, 1);
  if (i >= MAX_SEEN) return;
  seen[i].sink = sink;
  seen[i].buffer = buf;
  seen[i].stream = stream;
  seen[i].length = length;
  memcpy(seen[i].bytes, bytes, length < sizeof(seen[i].bytes) ? length : sizeof(seen[i].bytes));
}

static size_t sink_fn(void* user, void* buf, uint32_t stream, const char* bytes, size_t length) {
  int sink = (int)(intptr_t)user;
  record(sink, buf, stream, bytes, length);
  if (atomic_exchange(&block_in_sink, 0)) {
    atomic_store(&inside_sink, 1);
    while (!atomic_load(&release_sink)) sched_yield();
    atomic_store(&unregister_done_seen, atomic_load(&unregistered));
  }
  if (atomic_exchange(&unregister_self, 0)) {
    atomic_store(&self_status, amdgpu_dropin_hostcall_unregister_printf_sink(NULL));
  }
  return length - (size_t)atomic_load(&short_by);
}

static void reset_seen(void) {
  atomic_store(&seen_count, 0);
  memset(seen, 0, sizeof(seen));
}

/* One printf from lane 0 (control word `control`); the fds' output goes to
 * *out / *err (malloc'ed); returns the device's printf result. */
static uint64_t print_one(uint64_t control, const char* format, const pf_arg_t* args, size_t n, char** out,
                          size_t* out_len, char** err, size_t* err_len) {
  static pf_message_t m;
  if (!pf_encode(&m, PF_PER_ARGUMENT, control, format, args, n)) {
    fprintf(stderr, "pf_sink: cannot encode '%s'\n", format);
    exit(1);
  }
  uint64_t result = 0;
  pf_capture_begin();
  int rc = pf_send(buffer, &m, &result);
  pf_capture_end(out, out_len, err, err_len);
  DROPIN_CHECK_MSG(rc == 0, "send: %d", rc);
  return result;
}

/* Prints with nothing expected on fds 1 and 2; returns the result. */
static uint64_t print_to_sink(uint64_t control, const char* format, const pf_arg_t* args, size_t n) {
  char *out, *err;
  size_t out_len, err_len;
  uint64_t result = print_one(control, format, args, n, &out, &out_len, &err, &err_len);
  DROPIN_CHECK_MSG(out_len == 0 && err_len == 0, "'%s': %zu+%zu bytes reached fds 1/2", format, out_len,
                   err_len);
  free(out);
  free(err);
  return result;
}

static void check_seen(int index, int sink, uint32_t stream, const char* text) {
  DROPIN_REQUIRE_MSG(index < atomic_load(&seen_count), "sink call %d missing", index);
  const seen_message_t* s = &seen[index];
  DROPIN_CHECK_MSG(s->sink == sink, "call %d went to sink %d, expected %d", index, s->sink, sink);
  DROPIN_CHECK_MSG(s->buffer == buffer, "call %d: buffer %p", index, s->buffer);
  DROPIN_CHECK_MSG(s->stream == stream, "call %d: stream %u, expected %u", index, s->stream, stream);
  DROPIN_CHECK_MSG(s->length == strlen(text) && memcmp(s->bytes, text, s->length) == 0,
                   "call %d: %zu bytes '%.*s', expected '%s'", index, s->length, (int)s->length, s->bytes,
                   text);
}

static void test_arguments(void) {
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_printf_sink(NULL, NULL, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_printf_sink((void*)0x1001, sink_fn, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink((void*)0x1001) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED);
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)1) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)2) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED);
  /* PRINTF's handler slot stays the library's: a sink is not a handler. */
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_handler(AMDGPU_DROPIN_HOSTCALL_SERVICE_PRINTF, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(NULL) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED);
}

static void test_whole_messages_with_their_streams(void) {
  reset_seen();
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)1) == AMDGPU_DROPIN_HOSTCALL_OK);
  pf_arg_t args[] = {pf_i32(42), pf_str("a string argument that spans several packets of the wave")};
  uint64_t result = print_to_sink(0, "out %d %s\n", args, 2);
  const char* line = "out 42 a string argument that spans several packets of the wave\n";
  DROPIN_CHECK_MSG(result == strlen(line), "result %llu", (unsigned long long)result);
  result = print_to_sink(1, "to stderr %d", args, 1);
  DROPIN_CHECK_MSG(result == strlen("to stderr 42"), "stderr result %llu", (unsigned long long)result);
  /* A message with a NUL byte in it is handed over with its length. */
  pf_arg_t nul[] = {pf_i32(0)};
  result = print_to_sink(0, "a%cb", nul, 1);
  DROPIN_CHECK_MSG(result == 3, "NUL result %llu", (unsigned long long)result);
  DROPIN_CHECK_MSG(atomic_load(&seen_count) == 3, "%d sink calls, 3 messages", atomic_load(&seen_count));
  check_seen(0, 1, AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT, line);
  check_seen(1, 1, AMDGPU_DROPIN_HOSTCALL_PRINTF_STDERR, "to stderr 42");
  DROPIN_CHECK_MSG(seen[2].length == 3 && memcmp(seen[2].bytes, "a\0b", 3) == 0, "NUL message");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(NULL) == AMDGPU_DROPIN_HOSTCALL_OK);
}

/* 64 lanes print at once: 64 sink calls, each one lane's whole line. */
static void test_a_wave(void) {
  reset_seen();
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)1) == AMDGPU_DROPIN_HOSTCALL_OK);
  static pf_message_t messages[64];
  pf_message_t* list[64];
  uint64_t results[64] = {0};
  for (int lane = 0; lane < 64; ++lane) {
    pf_arg_t args[] = {pf_i32(lane), pf_str(lane % 2 ? "odd lane with a longer tail" : "even")};
    DROPIN_REQUIRE(pf_encode(&messages[lane], PF_PER_ARGUMENT, 0, "lane %d: %s\n", args, 2));
    list[lane] = &messages[lane];
  }
  DROPIN_REQUIRE(pf_send_wave(buffer, ~0ull, list, results) == 0);
  DROPIN_CHECK_MSG(atomic_load(&seen_count) == 64, "%d sink calls", atomic_load(&seen_count));
  uint64_t lanes_seen = 0;
  for (int i = 0; i < 64 && i < atomic_load(&seen_count); ++i) {
    int lane = -1;
    char tail[64];
    char want[96];
    if (sscanf(seen[i].bytes, "lane %d: %63[^\n]", &lane, tail) != 2 || lane < 0 || lane > 63) {
      DROPIN_CHECK_MSG(0, "call %d: '%.*s'", i, (int)seen[i].length, seen[i].bytes);
      continue;
    }
    int n = snprintf(want, sizeof(want), "lane %d: %s\n", lane, lane % 2 ? "odd lane with a longer tail" : "even");
    DROPIN_CHECK_MSG(seen[i].length == (size_t)n && memcmp(seen[i].bytes, want, (size_t)n) == 0,
                     "call %d: not lane %d's whole line", i, lane);
    DROPIN_CHECK_MSG(results[lane] == (uint64_t)n, "lane %d result %llu", lane, (unsigned long long)results[lane]);
    lanes_seen |= 1ull << lane;
  }
  DROPIN_CHECK_MSG(lanes_seen == ~0ull, "lanes seen %#llx", (unsigned long long)lanes_seen);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(NULL) == AMDGPU_DROPIN_HOSTCALL_OK);
}

static void test_buffer_sink_wins_and_ends_with_the_buffer(void) {
  reset_seen();
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)1) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(buffer, sink_fn, (void*)2) ==
                 AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_printf_sink(buffer, sink_fn, (void*)3) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED);
  print_to_sink(0, "first\n", NULL, 0);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(buffer) == AMDGPU_DROPIN_HOSTCALL_OK);
  print_to_sink(0, "second\n", NULL, 0);
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(buffer, sink_fn, (void*)3) ==
                 AMDGPU_DROPIN_HOSTCALL_OK);
  /* Disable ends the buffer's own sink; the one for every buffer stays. */
  DROPIN_REQUIRE_MSG(pf_reenable(buffer, 16), "re-enable");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(buffer) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED);
  print_to_sink(0, "third\n", NULL, 0);
  check_seen(0, 2, AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT, "first\n");
  check_seen(1, 1, AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT, "second\n");
  check_seen(2, 1, AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT, "third\n");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(NULL) == AMDGPU_DROPIN_HOSTCALL_OK);

  /* No sink left: fd 1 again. */
  char *out, *err;
  size_t out_len, err_len;
  uint64_t result = print_one(0, "fd again\n", NULL, 0, &out, &out_len, &err, &err_len);
  DROPIN_CHECK_MSG(result == 9 && out_len == 9 && memcmp(out, "fd again\n", 9) == 0, "fd 1 got '%s'", out);
  DROPIN_CHECK(atomic_load(&seen_count) == 3);
  free(out);
  free(err);
}

static void test_a_short_write_answers_minus_one(void) {
  reset_seen();
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)1) == AMDGPU_DROPIN_HOSTCALL_OK);
  atomic_store(&short_by, 1);
  uint64_t result = print_to_sink(0, "cut short\n", NULL, 0);
  atomic_store(&short_by, 0);
  DROPIN_CHECK_MSG(result == PF_ERROR, "result %llu", (unsigned long long)result);
  DROPIN_CHECK_MSG(print_to_sink(0, "whole\n", NULL, 0) == 6, "the next message is fine");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_printf_sink(NULL) == AMDGPU_DROPIN_HOSTCALL_OK);
}

static void* unregister_thread(void* arg) {
  (void)arg;
  amdgpu_dropin_hostcall_status_t status = amdgpu_dropin_hostcall_unregister_printf_sink(NULL);
  atomic_store(&unregistered, status == AMDGPU_DROPIN_HOSTCALL_OK ? 1 : -1);
  return NULL;
}

static void* print_thread(void* arg) {
  (void)arg;
  static pf_message_t m;
  uint64_t result = 0;
  if (!pf_encode(&m, PF_PER_ARGUMENT, 0, "blocked\n", NULL, 0) || pf_send(buffer, &m, &result) != 0) {
    return (void*)1;
  }
  return result == 8 ? NULL : (void*)2;
}

/* Unregister returns only after the sink call running on the listener has
 * returned: the call records, at its end, whether unregister had returned. */
static void test_unregister_waits_for_a_running_call(void) {
  reset_seen();
  atomic_store(&inside_sink, 0);
  atomic_store(&release_sink, 0);
  atomic_store(&unregistered, 0);
  atomic_store(&unregister_done_seen, -7);
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)1) == AMDGPU_DROPIN_HOSTCALL_OK);
  atomic_store(&block_in_sink, 1);
  pthread_t printer, unregisterer;
  DROPIN_REQUIRE(pthread_create(&printer, NULL, print_thread, NULL) == 0);
  while (!atomic_load(&inside_sink)) sched_yield();
  DROPIN_REQUIRE(pthread_create(&unregisterer, NULL, unregister_thread, NULL) == 0);
  /* Give a non-waiting unregister every chance to return first. */
  for (int i = 0; i < 20000 && !atomic_load(&unregistered); ++i) sched_yield();
  DROPIN_CHECK_MSG(atomic_load(&unregistered) == 0, "unregister returned while the sink was running");
  atomic_store(&release_sink, 1);
  void* printed = NULL;
  pthread_join(printer, &printed);
  pthread_join(unregisterer, NULL);
  DROPIN_CHECK_MSG(printed == NULL, "the blocked printf failed (%p)", printed);
  DROPIN_CHECK_MSG(atomic_load(&unregister_done_seen) == 0, "the sink call saw unregister done: %d",
                   atomic_load(&unregister_done_seen));
  DROPIN_CHECK_MSG(atomic_load(&unregistered) == 1, "unregister: %d", atomic_load(&unregistered));
}

/* From inside the sink: no wait for itself; the next message goes to fd 1. */
static void test_unregister_from_inside(void) {
  reset_seen();
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_printf_sink(NULL, sink_fn, (void*)1) == AMDGPU_DROPIN_HOSTCALL_OK);
  atomic_store(&self_status, -1);
  atomic_store(&unregister_self, 1);
  DROPIN_CHECK(print_to_sink(0, "last\n", NULL, 0) == 5);
  DROPIN_CHECK_MSG(atomic_load(&self_status) == AMDGPU_DROPIN_HOSTCALL_OK, "unregister from inside: %d",
                   atomic_load(&self_status));
  char *out, *err;
  size_t out_len, err_len;
  print_one(0, "after\n", NULL, 0, &out, &out_len, &err, &err_len);
  DROPIN_CHECK_MSG(out_len == 6 && memcmp(out, "after\n", 6) == 0, "fd 1 got '%s'", out);
  DROPIN_CHECK(atomic_load(&seen_count) == 1);
  free(out);
  free(err);
}

int main(void) {
  buffer = pf_setup(16);
  HC_RUN(test_arguments);
  HC_RUN(test_whole_messages_with_their_streams);
  HC_RUN(test_a_wave);
  HC_RUN(test_buffer_sink_wins_and_ends_with_the_buffer);
  HC_RUN(test_a_short_write_answers_minus_one);
  HC_RUN(test_unregister_waits_for_a_running_call);
  HC_RUN(test_unregister_from_inside);
  pf_teardown(buffer);
  return dropin_check_exit_code();
}
