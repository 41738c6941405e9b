/* Small test harness shared by the hostcall tests: checks (dropin_check.h), buffers (plain and guarded), process-level probes (threads, live
 * signals) and child processes with a timeout and captured stderr. */
#ifndef AMDGPU_DROPIN_HC_TEST_H
#define AMDGPU_DROPIN_HC_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dropin_check.h"
#ifndef HC_NO_HSA
#include "device_sim.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Runs one named test function and prints its outcome. */
#define HC_RUN(fn)                                                                   \
  do {                                                                               \
    int before_ = dropin_failures;                                                       \
    uint64_t t0_ = hc_now_ms();                                                      \
    fn();                                                                            \
    printf("%s %s (%llu ms)\n", dropin_failures == before_ ? "ok  " : "FAIL", #fn,      \
           (unsigned long long)(hc_now_ms() - t0_));                                 \
    fflush(stdout);                                                                  \
  } while (0)

/* First line of a test that forks a child of this multi-threaded process:
 * under ThreadSanitizer the test returns at once, since TSan cannot follow
 * threads in such a child ("dup thread with used id": its thread registry is
 * the parent's); the test runs in every other build. */
#if defined(__SANITIZE_THREAD__)
#define HC_SKIP_FORK_UNDER_TSAN()                                                   \
  do {                                                                              \
    printf("skip %s: TSan does not support threads in a forked child\n", __func__); \
    return;                                                                         \
  } while (0)
#else
#define HC_SKIP_FORK_UNDER_TSAN() ((void)0)
#endif

uint64_t hc_now_ms(void);
uint64_t hc_now_us(void);
void hc_sleep_ms(uint32_t ms);

/* Hang detectors only (no test compares a figure with them): how long a
 * test waits for one call (HC_CALL_TIMEOUT_NS), for one call among many
 * waves (HC_WAVES_TIMEOUT_NS) and for a child process (HC_CHILD_TIMEOUT_MS). */
#define HC_CALL_TIMEOUT_NS (5ull * 1000 * 1000 * 1000)
#define HC_WAVES_TIMEOUT_NS (10ull * 1000 * 1000 * 1000)
#define HC_CHILD_TIMEOUT_MS 20000u

/* One FUNCTION_CALL from all 64 lanes of a wave on `buffer`, every answer
 * checked (device_sim_fc_checked_call with `salt`), waiting at most
 * HC_CALL_TIMEOUT_NS; 0 when it was served right, else a device_sim code. */
int hc_call_ok(void* buffer, uint64_t salt);
#ifndef HC_NO_HSA
/* `waves` waves of `calls` calls each on `buffer` alone (the default
 * FUNCTION_CALL traffic of device_sim_waves_config, `seed`, `timeout_ns` a
 * call), writes to inactive lanes checked; device_sim_run_waves's code. */
int hc_run_waves(void* buffer, uint32_t waves, uint32_t calls, uint64_t seed, uint64_t timeout_ns,
                 device_sim_waves_result_t* result);
#endif

/* hsa_init with the simulator's defaults; aborts the test on failure. */
void hc_hsa_init(void);

/* The first GPU agent and its first coarse-grained global pool (and, when
 * `group` is not NULL, its GROUP-segment pool), as handles; false when one
 * is missing. */
bool hc_find_gpu_pools(uint64_t* gpu, uint64_t* vram, uint64_t* group);

/* In hc_buffer.c (links the library): a zeroed, 4096-aligned buffer in the protocol HC_PROTOCOL names
 * ("phase-bit"; otherwise classic); a phase-bit one comes with its occupancy
 * bitmap and is attached to the device simulator. hc_enable / hc_disable
 * enable it in that protocol (enableHostcalls for classic). */
void* hc_alloc_buffer(uint32_t num_packets);
void hc_free_buffer(void* buffer);
bool hc_phase_bit(void);
bool hc_enable(void* buffer, uint32_t num_packets, const void* queue);
void hc_disable(void* buffer, const void* queue);
/* The occupancy bitmap of a phase-bit buffer from hc_alloc_buffer, or NULL. */
uint32_t* hc_bitmap_of(void* buffer);
/* disableHostcalls(buffer, NULL), then hc_free_buffer. */
void hc_disable_and_free(void* buffer);

/* A buffer of `size` bytes that ends exactly where `guard_bytes` (rounded up
 * to pages) of PROT_NONE memory begins, so any access past its end faults.
 * The bytes before the buffer in its first page are filled with a pattern
 * (hc_guarded_prefix_intact checks them). */
typedef struct hc_guarded {
  void* buffer;
  size_t size;
  void* mapping;
  size_t mapping_size;
  size_t prefix;
} hc_guarded_t;
bool hc_guarded_alloc(hc_guarded_t* out, size_t size, size_t guard_bytes);
bool hc_guarded_prefix_intact(const hc_guarded_t* g);
void hc_guarded_free(hc_guarded_t* g);

/* Copies `size` bytes (a multiple of 8) of 8-aligned memory that the library
 * may access concurrently (a registered buffer), word by word with relaxed
 * atomic loads: a plain memcpy/memcmp would race with the listener's atomic
 * swap of the ready stack. */
void hc_snapshot_words(const void* src, void* dst, size_t size);

/* Threads of this process (entries of /proc/self/task). */
int hc_thread_count(void);
/* Waits up to timeout_ms for the thread count to become `expected`;
 * returns the last count seen. */
int hc_wait_thread_count(int expected, uint32_t timeout_ms);
/* Which listener thread runs the calling code (from a host function):
 * HC_SERVED_BY_MAIN, HC_SERVED_BY_HELPER, or 0 for any other thread. Read
 * from the thread name (the benchmark finds the threads the same way). */
#define HC_SERVED_BY_MAIN 1u
#define HC_SERVED_BY_HELPER 2u
uint64_t hc_served_by(void);
/* Listener threads (main and helper) of this process. */
int hc_listener_threads(void);
/* Times the thread named `comm` went to sleep (voluntary context switches);
 * -1 if there is no such thread. */
long hc_thread_sleeps(const char* comm);

/* True when every listener thread sleeps (state S). Sanitizer builds fork
 * only then: GCC's ASan allocator is not locked around fork, so a child of a
 * fork taken while a listener thread was inside it deadlocks in its first
 * allocation on another thread (glibc's malloc has no such hazard). */
bool hc_listeners_asleep(void);

/* Live HSA signals of the software runtime. */
uint64_t hc_live_signals(void);
/* Live memory pool blocks (hsa_amd_memory_pool_allocate) of the software runtime. */
uint64_t hc_live_pool_blocks(void);

/* Child processes. A test binary runs a named case in a fresh child by
 * re-executing itself: `hc_child_main(argc, argv, cases)` at the top of main
 * dispatches `<exe> --child <name>`. */
typedef int (*hc_child_fn)(void);
typedef struct hc_child_case {
  const char* name;
  hc_child_fn fn;
} hc_child_case_t;
/* If argv asks for a child case, runs it and exits with its return value. */
void hc_child_main(int argc, char** argv, const hc_child_case_t* cases);

typedef struct hc_child_result {
  bool timed_out;   /* killed after the timeout */
  bool exited;      /* WIFEXITED */
  int exit_code;    /* WEXITSTATUS */
  int signal;       /* WTERMSIG, 0 if none */
  uint64_t elapsed_ms;
  uint64_t reaped_us; /* hc_now_us() when the child was reaped */
  char err[16384];  /* captured stderr (NUL-terminated, truncated) */
  size_t err_len;
} hc_child_result_t;
/* Re-executes this binary with `--child name`, extra environment entries
 * ("NAME=value", NULL-terminated list, may be NULL), stderr captured.
 * Kills the child after timeout_ms. Returns false if it could not start. */
bool hc_spawn_child(const char* name, const char* const* env, uint32_t timeout_ms,
                    hc_child_result_t* result);
/* fork()s and runs fn in the child (stderr captured); same result. */
bool hc_fork_child(hc_child_fn fn, uint32_t timeout_ms, hc_child_result_t* result);
/* Describes a child result in one line (for failure messages). */
const char* hc_child_describe(const hc_child_result_t* result);
/* Runs child case `name` (hc_spawn_child into *result) and checks that it
 * exited with 0; leaves the calling test (void) when it cannot start. */
#define HC_CHILD_OK(name, env, timeout_ms, result)                                              \
  do {                                                                                          \
    DROPIN_REQUIRE_MSG(hc_spawn_child((name), (env), (timeout_ms), (result)), "spawn %s", (name)); \
    DROPIN_CHECK_MSG((result)->exited && (result)->exit_code == 0, "child %s: %s", (name),         \
                     hc_child_describe(result));                                                \
  } while (0)

/* Counts the lines of `text` that contain `needle` (case-insensitive) and the
 * decimal number `id` as a whole token. */
int hc_count_lines_with_id(const char* text, const char* needle, uint64_t id);
/* Case-insensitive substring search. */
bool hc_contains(const char* text, const char* needle);
/* Occurrences of `needle` in `text` (case-sensitive, overlapping ones too). */
int hc_count_occurrences(const char* text, const char* needle);

#ifdef __cplusplus
}
#endif

#endif /* AMDGPU_DROPIN_HC_TEST_H */
