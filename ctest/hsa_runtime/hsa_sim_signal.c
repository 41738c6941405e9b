/*
 * Software HSA runtime: signals.
 *
 * Signals live in a static table of slots, so a stale or forged handle can be
 * recognized (and never dereferenced): a handle is (generation << 32) |
 * (slot index + 1), and a slot's generation is odd while it is live. A slot is
 * never freed, so a thread racing with hsa_signal_destroy touches valid
 * memory and simply observes a dead signal.
 *
 * Waking: every operation that changes the value (store, exchange, a
 * successful cas, add/subtract/and/or/xor) increments the slot's 32-bit
 * futex word `seq` and, when a blocked waiter is registered, wakes it with
 * FUTEX_WAKE. Silent stores change the value without waking anybody (as in
 * ROCr). A BLOCKED wait polls like ROCr's (its first 200 us and any last
 * partial millisecond, see sim_wait), otherwise sleeps on `seq`; only when
 * asked (hsa_sim_set_periodic_recheck, off by default as in ROCr) does a
 * sleeping wait re-check the value every period, so that a plain memory
 * write through hsa_sim_signal_value_ptr is noticed. When a futex wake
 * ends its sleep, the waiter first sleeps the configured wake delay
 * (hsa_sim_set_wait_wake_delay_us), modelling interrupt latency. An ACTIVE
 * wait spins as ROCr's (no pause, no yield). A GPU's ring
 * (hsa_sim_signal_add_from_device) wakes only a waiter that sleeps.
 *
 * Operations on an invalid handle: status-returning functions give
 * HSA_STATUS_ERROR_INVALID_SIGNAL; loads, read-modify-writes returning a
 * value and waits return 0; void operations do nothing. A wait whose signal
 * is destroyed (or whose runtime shuts down) returns the last value it read.
 * A wait with an unknown condition returns the current value at once.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hsa_sim_internal.h"

/* The value has a cache line of its own, as ROCr's signal: a GPU's ring
 * writes only the value (the interrupt goes to the kernel), so a waiter
 * polling it shares that line with nobody but the ringer. The runtime's
 * bookkeeping (ROCr keeps it in the host object) sits on the next line. */
typedef struct {
  _Alignas(64) _Atomic int64_t value;
  _Alignas(64) _Atomic uint32_t seq; /* futex word, bumped on every notifying change */
  _Atomic uint32_t waiters;  /* BLOCKED waiters currently registered */
  _Atomic uint32_t sleepers; /* BLOCKED waiters inside their futex sleep (the kernel's event wait) */
  _Atomic uint32_t waiting;  /* waits in progress, either state (ROCr's waiting_) */
  _Atomic uint32_t gen;      /* odd while live */
  uint32_t next_free;        /* free list link (index + 1), under the lock */
} sim_signal_t;

_Static_assert(sizeof(_Atomic int64_t) == sizeof(int64_t),
               "signal value must be a plain int64 in memory");
_Static_assert(_Alignof(_Atomic int64_t) == _Alignof(int64_t),
               "signal value must be a plain int64 in memory");

static sim_signal_t g_slots[HSA_SIM_MAX_SIGNALS];
static uint32_t g_free_head; /* index + 1 of the first free used slot; under lock */
static uint32_t g_fresh;     /* slots [0, g_fresh) have been handed out; under lock */

/* Wait tuning; relaxed everywhere: each is read independently and a change
 * applies to waits from some point on. */
static _Atomic uint32_t g_wake_delay_us;

/* Blocked waits in progress (hsa_sim_blocked_waits): incremented relaxed (a
 * count), decremented with release, read with acquire. */
static _Atomic uint32_t g_blocked_waits;

/* Sleeps begun by blocked waits (hsa_sim_wait_sleeps): a relaxed count. */
static _Atomic uint64_t g_wait_sleeps;

HSA_API uint64_t hsa_sim_wait_sleeps(void) {
  return atomic_load_explicit(&g_wait_sleeps, memory_order_relaxed);
}

/* Futex wakes after which the interrupt-latency delay was applied, and the
 * sum of the delays applied, in microseconds (hsa_sim_wake_delays): relaxed
 * counts, read by tests after the waits returned (their thread join orders
 * them). */
static _Atomic uint64_t g_wake_delays;
static _Atomic uint64_t g_wake_delay_us_total;

HSA_API uint64_t hsa_sim_wake_delays(uint64_t* total_us) {
  if (total_us != NULL) *total_us = atomic_load_explicit(&g_wake_delay_us_total, memory_order_relaxed);
  return atomic_load_explicit(&g_wake_delays, memory_order_relaxed);
}

/* Waits (either state) that returned because their timeout passed, the
 * condition unmet (hsa_sim_wait_timeouts): a relaxed count, as above. */
static _Atomic uint64_t g_wait_timeouts;

HSA_API uint64_t hsa_sim_wait_timeouts(void) {
  return atomic_load_explicit(&g_wait_timeouts, memory_order_relaxed);
}

/* Blocked waits whose condition was found met only in the poll of their last
 * partial millisecond (hsa_sim_wait_final_polls): a relaxed count, as above. */
static _Atomic uint64_t g_final_polls;

HSA_API uint64_t hsa_sim_wait_final_polls(void) {
  return atomic_load_explicit(&g_final_polls, memory_order_relaxed);
}

/* The timeout hints of the last HSA_SIM_RECENT_WAITS waits (hsa_sim_recent_wait_timeouts):
 * a ring of relaxed slots behind a relaxed counter; readers look while the
 * waits they care about have begun (a slot being overwritten concurrently
 * reads as either value). */
#define HSA_SIM_RECENT_WAITS 64u
static _Atomic uint64_t g_recent_timeouts[HSA_SIM_RECENT_WAITS];
static _Atomic uint64_t g_recent_count;

static void sim_record_timeout(uint64_t timeout_ns) {
  uint64_t n = atomic_fetch_add_explicit(&g_recent_count, 1, memory_order_relaxed);
  atomic_store_explicit(&g_recent_timeouts[n % HSA_SIM_RECENT_WAITS], timeout_ns, memory_order_relaxed);
}

HSA_API uint64_t hsa_sim_recent_wait_timeouts(uint64_t since, uint64_t* out, uint32_t max) {
  uint64_t end = atomic_load_explicit(&g_recent_count, memory_order_relaxed);
  if (out == NULL) return end;
  if (end - since > HSA_SIM_RECENT_WAITS) since = end - HSA_SIM_RECENT_WAITS;
  uint32_t n = 0;
  for (uint64_t i = since; i < end && n < max; ++i) {
    out[n++] = atomic_load_explicit(&g_recent_timeouts[i % HSA_SIM_RECENT_WAITS], memory_order_relaxed);
  }
  return n;
}

static void sim_count_timeout(void) {
  atomic_fetch_add_explicit(&g_wait_timeouts, 1, memory_order_relaxed);
}

HSA_API uint32_t hsa_sim_blocked_waits(void) {
  return atomic_load_explicit(&g_blocked_waits, memory_order_acquire);
}
static _Atomic bool g_recheck_on = false;
static _Atomic uint32_t g_recheck_us = 1000;

/* The wait model (hsa_sim_set_wait_model) and the kernel tick that event-wait
 * timeouts are counted in (hsa_sim_set_event_wait_hz); relaxed, as above. */
static _Atomic int g_wait_model = HSA_SIM_WAIT_ROCR;
static _Atomic uint32_t g_event_wait_hz = 250;

HSA_API void hsa_sim_set_wait_model(hsa_sim_wait_model_t model) {
  atomic_store_explicit(&g_wait_model, model == HSA_SIM_WAIT_LEGACY ? HSA_SIM_WAIT_LEGACY : HSA_SIM_WAIT_ROCR,
                        memory_order_relaxed);
}

HSA_API void hsa_sim_set_event_wait_hz(uint32_t hz) {
  atomic_store_explicit(&g_event_wait_hz, hz, memory_order_relaxed);
}

static bool sim_legacy_waits(void) {
  return atomic_load_explicit(&g_wait_model, memory_order_relaxed) == HSA_SIM_WAIT_LEGACY;
}

/* Whether the kernel driver reports event ages (hsa_sim_set_event_age). */
static _Atomic bool g_event_age = true;

HSA_API void hsa_sim_set_event_age(bool supported) {
  atomic_store_explicit(&g_event_age, supported, memory_order_relaxed);
}

HSA_API void hsa_sim_set_wait_wake_delay_us(uint32_t us) {
  atomic_store_explicit(&g_wake_delay_us, us, memory_order_relaxed);
}

HSA_API void hsa_sim_set_periodic_recheck(bool on, uint32_t period_us) {
  atomic_store_explicit(&g_recheck_us, period_us == 0 ? 1000u : period_us,
                        memory_order_relaxed);
  atomic_store_explicit(&g_recheck_on, on, memory_order_relaxed);
}

/* ---- Futex helpers --------------------------------------------------------- */

static long sim_futex_wait(_Atomic uint32_t* word, uint32_t expected,
                           uint64_t timeout_ns) {
  struct timespec ts;
  struct timespec* pts = NULL;
  if (timeout_ns != UINT64_MAX) {
    ts.tv_sec = (time_t)(timeout_ns / 1000000000ull);
    ts.tv_nsec = (long)(timeout_ns % 1000000000ull);
    pts = &ts;
  }
  return syscall(SYS_futex, (void*)word, FUTEX_WAIT_PRIVATE, expected, pts,
                 NULL, 0);
}

static void sim_futex_wake_all(_Atomic uint32_t* word) {
  (void)syscall(SYS_futex, (void*)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Runs `body` with the calling thread's timer slack (50 us by default) lowered
 * to 1 us, so a short nanosleep is not stretched by the slack. */
#define SIM_WITH_LOW_TIMER_SLACK(body)                                                \
  do {                                                                              \
    int old_slack_ = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);                          \
    if (old_slack_ > 1000) (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);         \
    body;                                                                           \
    if (old_slack_ > 1000) (void)prctl(PR_SET_TIMERSLACK, (unsigned long)old_slack_, 0, 0, 0); \
  } while (0)

static void sim_nanosleep(uint64_t ns) {
  struct timespec ts;
  ts.tv_sec = (time_t)(ns / 1000000000ull);
  ts.tv_nsec = (long)(ns % 1000000000ull);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* What one nanosleep costs beyond the time asked for (timer programming and
 * the wake-up): tens of microseconds on a VM, so a plain 20 us sleep lasts
 * 50+ us. Measured once (median of 15 one-microsecond sleeps). */
static uint64_t g_sleep_overhead_ns;
static pthread_once_t g_sleep_overhead_once = PTHREAD_ONCE_INIT;

static int sim_compare_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void sim_measure_sleep_overhead(void) {
  uint64_t samples[15];
  SIM_WITH_LOW_TIMER_SLACK({
    for (int i = 0; i < 15; ++i) {
      uint64_t start = sim_now_ns();
      sim_nanosleep(1000);
      uint64_t took = sim_now_ns() - start;
      samples[i] = took > 1000 ? took - 1000 : 0;
    }
  });
  qsort(samples, 15, sizeof(samples[0]), sim_compare_u64);
  g_sleep_overhead_ns = samples[7];
}

/* The interrupt-latency model: returns `us` microseconds after it was called,
 * as closely as this machine allows. The part longer than a sleep's fixed
 * cost is slept (no CPU used, as a waiter woken by an interrupt uses none);
 * the rest is waited out yielding the CPU, since a sleep cannot be that short. */
static void sim_delay_us(uint32_t us) {
  uint64_t deadline = sim_now_ns() + (uint64_t)us * 1000ull;
  (void)pthread_once(&g_sleep_overhead_once, sim_measure_sleep_overhead);
  uint64_t want = (uint64_t)us * 1000ull;
  if (want > g_sleep_overhead_ns) {
    SIM_WITH_LOW_TIMER_SLACK(sim_nanosleep(want - g_sleep_overhead_ns));
  }
  while (sim_now_ns() < deadline) sched_yield();
}

static inline void sim_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* ---- Slots ------------------------------------------------------------------ */

static sim_signal_t* sim_signal_get(hsa_signal_t signal) {
  uint64_t index = signal.handle & 0xFFFFFFFFull;
  uint32_t gen = (uint32_t)(signal.handle >> 32);
  if (index == 0 || index > HSA_SIM_MAX_SIGNALS || (gen & 1u) == 0) return NULL;
  sim_signal_t* s = &g_slots[index - 1];
  /* acquire: pairs with the release store of gen in create, so the initial
   * value written before it is visible. */
  if (atomic_load_explicit(&s->gen, memory_order_acquire) != gen) return NULL;
  return s;
}

static bool sim_signal_alive(const sim_signal_t* s, uint32_t gen) {
  /* relaxed: a liveness poll; the waiter only stops waiting on it. */
  return atomic_load_explicit(&s->gen, memory_order_relaxed) == gen;
}

/* After a value change: bump seq and wake blocked waiters. seq_cst on both
 * accesses: together with the waiter's seq_cst increment of `waiters` and
 * load of `seq` this is a store-buffering pattern in which at least one side
 * sees the other, so either we see the waiter and wake it, or it sees the new
 * seq (and, through the release half of the increment, the new value). */
static void sim_signal_notify(sim_signal_t* s) {
  atomic_fetch_add_explicit(&s->seq, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&s->waiters, memory_order_seq_cst) != 0) {
    sim_futex_wake_all(&s->seq);
  }
}

/* A GPU's ring (the device library's signal add): the value changes and the
 * interrupt goes to the kernel, which wakes a waiter only if one sleeps in
 * its event wait; the ringing wave pays no system call, and a waiter still
 * in its poll sees the value change by itself. The sleeper side
 * (sim_wait_on) raises `sleepers` and re-reads `seq` before it sleeps; with
 * the seq_cst bump and load here that is the store-buffering pattern of
 * sim_signal_notify, so a sleeper is either seen and woken or sees the bump. */
static void sim_signal_interrupt(sim_signal_t* s) {
  atomic_fetch_add_explicit(&s->seq, 1, memory_order_seq_cst);
  if (atomic_load_explicit(&s->sleepers, memory_order_seq_cst) != 0) {
    sim_futex_wake_all(&s->seq);
  }
}

HSA_API void hsa_sim_signal_add_from_device(hsa_signal_t signal, hsa_signal_value_t value) {
  sim_signal_t* s = sim_signal_get(signal);
  if (s == NULL) return;
  if (sim_legacy_waits()) {
    /* The old model: the ring notifies like a host write. */
    atomic_fetch_add_explicit(&s->value, value, memory_order_seq_cst);
    sim_signal_notify(s);
    return;
  }
  /* Release, as the device library's add: the packet writes before it are
   * visible to a host that sees the new value. */
  atomic_fetch_add_explicit(&s->value, value, memory_order_release);
  sim_signal_interrupt(s);
}

/* Under the lock. */
static void sim_signal_kill_locked(uint32_t index) {
  sim_signal_t* s = &g_slots[index];
  /* release: waiters polling gen stop; seq bump + wake gets sleepers out. */
  atomic_fetch_add_explicit(&s->gen, 1, memory_order_release);
  sim_signal_notify(s);
  sim_futex_wake_all(&s->seq);
  s->next_free = g_free_head;
  g_free_head = index + 1;
  --sim_live.signals;
}

static hsa_status_t sim_signal_create_impl(hsa_signal_value_t initial,
                                           uint32_t num_consumers,
                                           const hsa_agent_t* consumers,
                                           uint64_t attributes,
                                           hsa_signal_t* out) {
  if (!sim_initialized()) return HSA_STATUS_ERROR_NOT_INITIALIZED;
  if (out == NULL || (num_consumers != 0 && consumers == NULL) ||
      (attributes & ~(uint64_t)(HSA_AMD_SIGNAL_AMD_GPU_ONLY | HSA_AMD_SIGNAL_IPC)) != 0) {
    return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < num_consumers; ++i) {
    uint32_t index = 0;
    if (!sim_agent_index(consumers[i], &index)) return HSA_STATUS_ERROR_INVALID_AGENT;
  }
  hsa_status_t status = HSA_STATUS_SUCCESS;
  sim_lock();
  if (sim_live.signals >= sim_active_config.max_signals) {
    status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
  } else {
    uint32_t index;
    if (g_free_head != 0) {
      index = g_free_head - 1;
      g_free_head = g_slots[index].next_free;
    } else if (g_fresh < HSA_SIM_MAX_SIGNALS) {
      index = g_fresh++;
    } else {
      index = UINT32_MAX;
    }
    if (index == UINT32_MAX) {
      status = HSA_STATUS_ERROR_OUT_OF_RESOURCES;
    } else {
      sim_signal_t* s = &g_slots[index];
      /* relaxed: published by the release increment of gen below. */
      atomic_store_explicit(&s->value, initial, memory_order_relaxed);
      /* release: a handle holder's acquire load of gen sees the value. */
      uint32_t gen = atomic_fetch_add_explicit(&s->gen, 1, memory_order_release) + 1;
      ++sim_live.signals;
      out->handle = ((uint64_t)gen << 32) | ((uint64_t)index + 1);
    }
  }
  sim_unlock();
  return status;
}

HSA_API hsa_status_t hsa_signal_create(hsa_signal_value_t initial_value,
                                       uint32_t num_consumers,
                                       const hsa_agent_t* consumers,
                                       hsa_signal_t* signal) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_signal_create, &status)) {
    status = sim_signal_create_impl(initial_value, num_consumers, consumers, 0, signal);
  }
  uint64_t args[6] = {(uint64_t)initial_value, num_consumers, SIM_U64(consumers),
                      SIM_U64(signal), 0, 0};
  return sim_leave(SIM_FN_hsa_signal_create, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_amd_signal_create(hsa_signal_value_t initial_value,
                                           uint32_t num_consumers,
                                           const hsa_agent_t* consumers,
                                           uint64_t attributes,
                                           hsa_signal_t* signal) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_amd_signal_create, &status)) {
    status = sim_signal_create_impl(initial_value, num_consumers, consumers,
                                    attributes, signal);
  }
  uint64_t args[6] = {(uint64_t)initial_value, num_consumers, SIM_U64(consumers),
                      attributes, SIM_U64(signal), 0};
  return sim_leave(SIM_FN_hsa_amd_signal_create, status, args, NULL, 0);
}

HSA_API hsa_status_t hsa_signal_destroy(hsa_signal_t signal) {
  hsa_status_t status;
  if (!sim_enter(SIM_FN_hsa_signal_destroy, &status)) {
    if (!sim_initialized()) {
      status = HSA_STATUS_ERROR_NOT_INITIALIZED;
    } else {
      status = HSA_STATUS_ERROR_INVALID_SIGNAL;
      sim_lock();
      sim_signal_t* s = sim_signal_get(signal);
      if (s != NULL) {
        sim_signal_kill_locked((uint32_t)(s - g_slots));
        status = HSA_STATUS_SUCCESS;
      }
      sim_unlock();
    }
  }
  uint64_t args[6] = {signal.handle, 0, 0, 0, 0, 0};
  return sim_leave(SIM_FN_hsa_signal_destroy, status, args, NULL, 0);
}

void sim_signal_shutdown(hsa_sim_live_t* leaked) {
  for (uint32_t i = 0; i < g_fresh; ++i) {
    /* relaxed: gen is only written under the lock we hold. */
    if ((atomic_load_explicit(&g_slots[i].gen, memory_order_relaxed) & 1u) != 0) {
      sim_signal_kill_locked(i);
      ++leaked->signals;
    }
  }
  sim_live.signals = 0;
}

HSA_API int64_t* hsa_sim_signal_value_ptr(hsa_signal_t signal) {
  sim_signal_t* s = sim_signal_get(signal);
  /* The atomic object has the size and alignment of int64_t (asserted
   * above); plain accesses through this pointer model device writes. */
  return s != NULL ? (int64_t*)(void*)&s->value : NULL;
}

/* ---- Loads and stores ------------------------------------------------------ */

/* Not counted: see hsa_sim_call_count in hsa_sim.h. */
#define SIM_LOAD_(order, mo)                                              \
  HSA_API hsa_signal_value_t hsa_signal_load_##order(hsa_signal_t signal) { \
    sim_signal_t* s = sim_signal_get(signal);                             \
    return s != NULL ? atomic_load_explicit(&s->value, mo) : 0;           \
  }

/* HSA orderings map to C11: relaxed, scacquire = acquire,
 * screlease = release, scacq_screl = acq_rel. */
SIM_LOAD_(scacquire, memory_order_acquire)
SIM_LOAD_(relaxed, memory_order_relaxed)

#define SIM_STORE_(name, mo, notify)                                        \
  HSA_API void hsa_signal_##name(hsa_signal_t signal,                       \
                                 hsa_signal_value_t value) {                \
    sim_count_call(SIM_FN_hsa_signal_##name);                               \
    sim_signal_t* s = sim_signal_get(signal);                               \
    if (s == NULL) return;                                                  \
    atomic_store_explicit(&s->value, value, mo);                            \
    if (notify) sim_signal_notify(s);                                       \
  }

SIM_STORE_(store_relaxed, memory_order_relaxed, true)
SIM_STORE_(store_screlease, memory_order_release, true)
SIM_STORE_(silent_store_relaxed, memory_order_relaxed, false)
SIM_STORE_(silent_store_screlease, memory_order_release, false)

/* ---- Read-modify-write ----------------------------------------------------- */

#define SIM_EXCHANGE_(order, mo)                                            \
  HSA_API hsa_signal_value_t hsa_signal_exchange_##order(                   \
      hsa_signal_t signal, hsa_signal_value_t value) {                      \
    sim_count_call(SIM_FN_hsa_signal_exchange_##order);                     \
    sim_signal_t* s = sim_signal_get(signal);                               \
    if (s == NULL) return 0;                                                \
    hsa_signal_value_t old = atomic_exchange_explicit(&s->value, value, mo); \
    sim_signal_notify(s);                                                   \
    return old;                                                             \
  }

SIM_EXCHANGE_(scacq_screl, memory_order_acq_rel)
SIM_EXCHANGE_(scacquire, memory_order_acquire)
SIM_EXCHANGE_(relaxed, memory_order_relaxed)
SIM_EXCHANGE_(screlease, memory_order_release)

/* Returns the value observed (== expected when the swap happened). */
#define SIM_CAS_(order, mo, fail_mo)                                        \
  HSA_API hsa_signal_value_t hsa_signal_cas_##order(                        \
      hsa_signal_t signal, hsa_signal_value_t expected,                     \
      hsa_signal_value_t value) {                                           \
    sim_count_call(SIM_FN_hsa_signal_cas_##order);                          \
    sim_signal_t* s = sim_signal_get(signal);                               \
    if (s == NULL) return 0;                                                \
    hsa_signal_value_t seen = expected;                                     \
    if (atomic_compare_exchange_strong_explicit(&s->value, &seen, value, mo, \
                                                fail_mo)) {                 \
      sim_signal_notify(s);                                                 \
    }                                                                       \
    return seen;                                                            \
  }

SIM_CAS_(scacq_screl, memory_order_acq_rel, memory_order_acquire)
SIM_CAS_(scacquire, memory_order_acquire, memory_order_acquire)
SIM_CAS_(relaxed, memory_order_relaxed, memory_order_relaxed)
SIM_CAS_(screlease, memory_order_release, memory_order_relaxed)

/* C11 atomic arithmetic on signed types wraps, as the device does. */
#define SIM_RMW_(op, fetch, order, mo)                                      \
  HSA_API void hsa_signal_##op##_##order(hsa_signal_t signal,               \
                                         hsa_signal_value_t value) {        \
    sim_count_call(SIM_FN_hsa_signal_##op##_##order);                       \
    sim_signal_t* s = sim_signal_get(signal);                               \
    if (s == NULL) return;                                                  \
    (void)fetch(&s->value, value, mo);                                      \
    sim_signal_notify(s);                                                   \
  }

#define SIM_RMW_ALL_(op, fetch)                                 \
  SIM_RMW_(op, fetch, scacq_screl, memory_order_acq_rel)        \
  SIM_RMW_(op, fetch, scacquire, memory_order_acquire)          \
  SIM_RMW_(op, fetch, relaxed, memory_order_relaxed)            \
  SIM_RMW_(op, fetch, screlease, memory_order_release)

SIM_RMW_ALL_(add, atomic_fetch_add_explicit)
SIM_RMW_ALL_(subtract, atomic_fetch_sub_explicit)
SIM_RMW_ALL_(and, atomic_fetch_and_explicit)
SIM_RMW_ALL_(or, atomic_fetch_or_explicit)
SIM_RMW_ALL_(xor, atomic_fetch_xor_explicit)

/* ---- Waits ------------------------------------------------------------------- */

static bool sim_condition_met(hsa_signal_condition_t condition,
                              hsa_signal_value_t value,
                              hsa_signal_value_t compare) {
  switch ((int)condition) {
    case HSA_SIGNAL_CONDITION_EQ:
      return value == compare;
    case HSA_SIGNAL_CONDITION_NE:
      return value != compare;
    case HSA_SIGNAL_CONDITION_LT:
      return value < compare;
    case HSA_SIGNAL_CONDITION_GTE:
      return value >= compare;
    default:
      return true; /* unknown condition: never block */
  }
}

/* ROCr's BLOCKED wait (InterruptSignal::WaitRelaxed), modelled here:
 * - it polls the value for its first 200 us before it sleeps at all, in a
 *   tight loop (a load and a clock read; no pause, no yield), so every
 *   blocked wait that is not answered at once costs up to 200 us of CPU;
 * - it then sleeps in the kernel's event wait for the time left rounded down
 *   to whole milliseconds; with less than one whole millisecond left it polls
 *   (an event wait of 0 ms returns at once), so a timeout's last partial
 *   millisecond is polled too, and a wait of a millisecond or less never
 *   sleeps;
 * - the kernel counts that timeout in ticks: msecs_to_jiffies(ms) + 1 ticks,
 *   ending on a tick, so a sleep that times out lasts up to two ticks longer
 *   than asked (sim_event_sleep_ns; hsa_sim_set_event_wait_hz, 250 by
 *   default, the longer of the usual distribution ticks).
 * An ACTIVE wait spins the same tight loop for its whole timeout.
 * HSA_SIM_WAIT_LEGACY keeps this runtime's earlier, kinder model: a pause
 * in every poll, an ACTIVE wait that yields every 1024 spins, exact
 * millisecond sleeps, and device rings that wake like host writes. */
#define SIM_BLOCKED_POLL_NS 200000ull

static uint64_t sim_whole_ms_ns(uint64_t ns) { return ns / 1000000ull * 1000000ull; }

/* How long the kernel's event wait of `ms` whole milliseconds sleeps when
 * nothing wakes it, from `now`. */
static uint64_t sim_event_sleep_ns(uint64_t ms, uint64_t now) {
  uint32_t hz = atomic_load_explicit(&g_event_wait_hz, memory_order_relaxed);
  if (hz == 0 || sim_legacy_waits()) return ms * 1000000ull;
  uint64_t tick = 1000000000ull / hz;
  uint64_t ticks = (ms * hz + 999u) / 1000u + 1u; /* msecs_to_jiffies rounds up */
  uint64_t end = (now / tick + ticks) * tick;     /* the timer fires on a tick */
  return end - now;
}

static hsa_signal_value_t sim_wait_on(sim_signal_t* s, uint32_t gen,
                                      hsa_signal_condition_t condition,
                                      hsa_signal_value_t compare,
                                      uint64_t timeout_ns, hsa_wait_state_t state,
                                      memory_order mo);

static hsa_signal_value_t sim_wait(sim_fn_t fn, hsa_signal_t signal,
                                   hsa_signal_condition_t condition,
                                   hsa_signal_value_t compare,
                                   uint64_t timeout_ns, hsa_wait_state_t state,
                                   memory_order mo) {
  sim_count_call(fn);
  sim_record_timeout(timeout_ns);
  sim_signal_t* s = sim_signal_get(signal);
  if (s == NULL) return 0;
  uint32_t gen = (uint32_t)(signal.handle >> 32);
  /* ROCr: when the kernel driver does not report event ages, a wait that
   * starts while another wait on the same signal is in progress is made an
   * active (spinning) wait. Relaxed: a count; slots are never freed. */
  uint32_t prior = atomic_fetch_add_explicit(&s->waiting, 1, memory_order_relaxed);
  if (prior != 0 && !atomic_load_explicit(&g_event_age, memory_order_relaxed)) {
    state = HSA_WAIT_STATE_ACTIVE;
  }
  hsa_signal_value_t v = sim_wait_on(s, gen, condition, compare, timeout_ns, state, mo);
  atomic_fetch_sub_explicit(&s->waiting, 1, memory_order_relaxed);
  return v;
}

/* Polls until the condition is met (true, *v the value), the signal dies or
 * `until` passes (false). ROCr's loop: a load and a clock read per turn, no
 * pause; the legacy model pauses every turn and, when `yield`, yields every
 * 1024 turns. The clock is read every 16 turns (a load is far cheaper than
 * the clock here; ROCr reads the TSC every turn). */
static bool sim_poll_until(sim_signal_t* s, uint32_t gen, hsa_signal_condition_t condition,
                           hsa_signal_value_t compare, memory_order mo, uint64_t until,
                           bool yield, hsa_signal_value_t* v) {
  bool legacy = sim_legacy_waits();
  for (uint32_t spins = 1;; ++spins) {
    if (legacy) sim_cpu_relax();
    *v = atomic_load_explicit(&s->value, mo);
    if (sim_condition_met(condition, *v, compare)) return true;
    if ((spins & 15u) == 0) {
      if (!sim_signal_alive(s, gen)) return false;
      if (until != UINT64_MAX && sim_now_ns() >= until) return false;
      /* Legacy only: let the thread that will change the value run. */
      if (legacy && yield && (spins & 1023u) == 0) sched_yield();
    }
  }
}

static hsa_signal_value_t sim_wait_on(sim_signal_t* s, uint32_t gen,
                                      hsa_signal_condition_t condition,
                                      hsa_signal_value_t compare,
                                      uint64_t timeout_ns, hsa_wait_state_t state,
                                      memory_order mo) {
  hsa_signal_value_t v = atomic_load_explicit(&s->value, mo);
  if (sim_condition_met(condition, v, compare)) return v;
  if (timeout_ns == 0) {
    sim_count_timeout();
    return v;
  }
  uint64_t start = sim_now_ns();
  uint64_t deadline = (timeout_ns == UINT64_MAX || timeout_ns > UINT64_MAX - start)
                          ? UINT64_MAX
                          : start + timeout_ns;

  if (state == HSA_WAIT_STATE_ACTIVE) {
    if (sim_poll_until(s, gen, condition, compare, mo, deadline, true, &v)) return v;
    if (sim_signal_alive(s, gen)) sim_count_timeout();
    return v;
  }

  atomic_fetch_add_explicit(&g_blocked_waits, 1, memory_order_relaxed);
  /* seq_cst: see sim_signal_notify. */
  atomic_fetch_add_explicit(&s->waiters, 1, memory_order_seq_cst);
  /* The first 200 us: polled. */
  uint64_t poll_end = deadline - start > SIM_BLOCKED_POLL_NS ? start + SIM_BLOCKED_POLL_NS : deadline;
  bool met = sim_poll_until(s, gen, condition, compare, mo, poll_end, false, &v);
  bool final_poll = false; /* met in the poll of the last partial millisecond */
  while (!met) {
    /* seq_cst (an acquire): the value read after it is at least as new as
     * the change that produced this seq. */
    uint32_t seq = atomic_load_explicit(&s->seq, memory_order_seq_cst);
    v = atomic_load_explicit(&s->value, mo);
    if (sim_condition_met(condition, v, compare)) {
      /* Seen with less than a whole millisecond left: the final poll's. */
      uint64_t at = deadline == UINT64_MAX ? 0 : sim_now_ns();
      final_poll = deadline != UINT64_MAX && (at >= deadline || sim_whole_ms_ns(deadline - at) == 0);
      break;
    }
    if (!sim_signal_alive(s, gen)) break;
    uint64_t now = sim_now_ns();
    if (now >= deadline) {
      sim_count_timeout();
      break;
    }
    /* ROCr sleeps whole milliseconds, rounded down; less than one left is
     * polled to the deadline, at full CPU cost, as there. */
    uint64_t whole = deadline == UINT64_MAX ? UINT64_MAX : sim_whole_ms_ns(deadline - now);
    if (whole == 0) {
      if (sim_poll_until(s, gen, condition, compare, mo, deadline, false, &v)) {
        final_poll = true;
        break;
      }
      continue; /* the loop's checks see the death or the deadline */
    }
    uint64_t sleep_ns = whole == UINT64_MAX ? UINT64_MAX : sim_event_sleep_ns(whole / 1000000ull, now);
    /* relaxed: tuning knobs, see their definitions. */
    if (atomic_load_explicit(&g_recheck_on, memory_order_relaxed)) {
      uint64_t period =
          (uint64_t)atomic_load_explicit(&g_recheck_us, memory_order_relaxed) * 1000ull;
      if (sleep_ns > period) sleep_ns = period;
    }
    /* seq_cst: see sim_signal_interrupt. A change since `seq` was read is
     * looked at instead of sleeping. */
    atomic_fetch_add_explicit(&s->sleepers, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&s->seq, memory_order_seq_cst) != seq) {
      atomic_fetch_sub_explicit(&s->sleepers, 1, memory_order_relaxed);
      continue;
    }
    atomic_fetch_add_explicit(&g_wait_sleeps, 1, memory_order_relaxed);
    long r = sim_futex_wait(&s->seq, seq, sleep_ns);
    /* relaxed: only wakers read it, and a stale non-zero costs one syscall. */
    atomic_fetch_sub_explicit(&s->sleepers, 1, memory_order_relaxed);
    if (r == 0) {
      uint32_t delay = atomic_load_explicit(&g_wake_delay_us, memory_order_relaxed);
      if (delay != 0) {
        atomic_fetch_add_explicit(&g_wake_delays, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&g_wake_delay_us_total, delay, memory_order_relaxed);
        sim_delay_us(delay);
      }
    }
  }
  if (final_poll) atomic_fetch_add_explicit(&g_final_polls, 1, memory_order_relaxed);
  /* relaxed: only wakers read it, and a stale non-zero costs one syscall. */
  atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
  /* release: the wait's last access to the runtime's state happens before a
   * reader (acquire) sees the count drop. */
  atomic_fetch_sub_explicit(&g_blocked_waits, 1, memory_order_release);
  return v;
}

HSA_API hsa_signal_value_t hsa_signal_wait_scacquire(
    hsa_signal_t signal, hsa_signal_condition_t condition,
    hsa_signal_value_t compare_value, uint64_t timeout_hint,
    hsa_wait_state_t wait_state_hint) {
  return sim_wait(SIM_FN_hsa_signal_wait_scacquire, signal, condition,
                  compare_value, timeout_hint, wait_state_hint,
                  memory_order_acquire);
}

HSA_API hsa_signal_value_t hsa_signal_wait_relaxed(
    hsa_signal_t signal, hsa_signal_condition_t condition,
    hsa_signal_value_t compare_value, uint64_t timeout_hint,
    hsa_wait_state_t wait_state_hint) {
  return sim_wait(SIM_FN_hsa_signal_wait_relaxed, signal, condition,
                  compare_value, timeout_hint, wait_state_hint,
                  memory_order_relaxed);
}
