/* hostcall_bench: the bare wake-up yardstick. */
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"

/* What waking a sleeping thread costs on this host, measured as the paced
 * runs measure a request: a "device" thread on the device's CPU posts every
 * pace_us (spinning in between) and a sleeper on the listener's CPU notes
 * how long after the post it runs again. Two ways to sleep:
 *  * futex: FUTEX_WAIT on the word the poster bumps and FUTEX_WAKEs (the
 *    bare kernel wake-up);
 *  * runtime: the software HSA runtime's blocked wait on a signal the
 *    poster stores to, as a listener waits (ROCr's poll of its first 200 us,
 *    then a futex sleep, plus the modelled 20 us interrupt latency). */
const char* const kWakeName[WAKE_KINDS] = {"futex", "runtime_wait"};
wakeup_t g_wakeup[WAKE_KINDS];
wakeup_t g_paced_wakeup[WAKE_KINDS];

typedef struct {
  int kind;
  uint64_t pace_ns;
  _Atomic uint32_t word;   /* futex word: the post's sequence number */
  _Atomic uint64_t t_post; /* when the latest post was made */
  _Atomic int stop;
  _Atomic int measuring;
  hsa_signal_t signal;
  uint64_t count;
  uint64_t hist[BUCKETS];
} wake_run_t;

static void* wake_sleeper_main(void* arg) {
  wake_run_t* w = arg;
  pthread_setname_np(pthread_self(), "bench-sleeper");
  if (g_device_pin) pin_current_thread_to(g_cpu_listener);
  uint32_t seen = 0;
  /* Relaxed: a stop request only needs to be seen eventually (the poster
   * posts once more after setting it). */
  while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
    if (w->kind == WAKE_FUTEX) {
      syscall(SYS_futex, &w->word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    } else {
      hsa_signal_wait_scacquire(w->signal, HSA_SIGNAL_CONDITION_NE, (hsa_signal_value_t)seen,
                                1000000000ull, HSA_WAIT_STATE_BLOCKED);
    }
    uint64_t now = device_sim_now_ns();
    /* Acquire: pairs with the poster's release store, so t_post is the
     * post's own time. */
    uint32_t value = atomic_load_explicit(&w->word, memory_order_acquire);
    if (value == seen) continue; /* spurious or timed out */
    seen = value;
    uint64_t t = atomic_load_explicit(&w->t_post, memory_order_relaxed);
    /* Relaxed: see device_collect. */
    if (atomic_load_explicit(&w->measuring, memory_order_relaxed) && now >= t) {
      w->count++;
      w->hist[bucket_of(now - t)]++;
    }
  }
  return NULL;
}

static void wake_post(wake_run_t* w, uint32_t seq) {
  atomic_store_explicit(&w->t_post, device_sim_now_ns(), memory_order_relaxed);
  /* Release: the sleeper's acquire load of the word sees t_post. */
  atomic_store_explicit(&w->word, seq, memory_order_release);
  if (w->kind == WAKE_FUTEX) {
    syscall(SYS_futex, &w->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  } else {
    hsa_signal_store_screlease(w->signal, (hsa_signal_value_t)seq);
  }
}

static void* wake_poster_main(void* arg) {
  wake_run_t* w = arg;
  pthread_setname_np(pthread_self(), "bench-device");
  if (g_device_pin) pin_current_thread_to(g_cpu_device);
  uint32_t seq = 0;
  uint64_t next = device_sim_now_ns() + w->pace_ns;
  /* Relaxed: see wake_sleeper_main. */
  while (!atomic_load_explicit(&w->stop, memory_order_relaxed)) {
    if (device_sim_now_ns() < next) continue; /* spins, as the device thread */
    wake_post(w, ++seq);
    next = device_sim_now_ns() + w->pace_ns;
  }
  wake_post(w, ++seq); /* lets the sleeper see the stop */
  return NULL;
}

bool run_wakeup_round(int kind, uint32_t pace_us, uint32_t duration_ms, wakeup_t* out) {
  hsa_sim_set_wait_wake_delay_us(20);
  hsa_sim_set_periodic_recheck(false, 1000);
  wake_run_t* w = calloc(1, sizeof(*w));
  if (w == NULL) return false;
  w->kind = kind;
  w->pace_ns = (uint64_t)pace_us * 1000u;
  if (kind == WAKE_RUNTIME && hsa_signal_create(0, 0, NULL, &w->signal) != HSA_STATUS_SUCCESS) {
    free(w);
    return false;
  }
  pthread_t sleeper, poster;
  bool ok = pthread_create(&sleeper, NULL, wake_sleeper_main, w) == 0;
  if (ok && pthread_create(&poster, NULL, wake_poster_main, w) != 0) {
    atomic_store_explicit(&w->stop, 1, memory_order_relaxed);
    wake_post(w, 0xFFFFFFFFu);
    pthread_join(sleeper, NULL);
    ok = false;
  }
  if (ok) {
    sleep_ms(g_device_warmup_ms);
    /* Relaxed: see device_collect. */
    atomic_store_explicit(&w->measuring, 1, memory_order_relaxed);
    sleep_ms(duration_ms);
    atomic_store_explicit(&w->measuring, 0, memory_order_relaxed);
    atomic_store_explicit(&w->stop, 1, memory_order_relaxed);
    pthread_join(poster, NULL);
    pthread_join(sleeper, NULL);
    if (w->count > 0 && out->rounds < MAX_ROUNDS) {
      uint32_t i = out->rounds++;
      out->round_p50[i] = hist_quantile(w->hist, w->count, 0.50) / 1e3;
      out->round_p99[i] = hist_quantile(w->hist, w->count, 0.99) / 1e3;
      out->count += w->count;
    }
  }
  if (kind == WAKE_RUNTIME) hsa_signal_destroy(w->signal);
  free(w);
  return ok;
}


void finish_wakeups(wakeup_t w[WAKE_KINDS], const char* where) {
  for (int k = 0; k < WAKE_KINDS; ++k) {
    w[k].ok = w[k].rounds > 0;
    if (!w[k].ok) continue;
    w[k].p50_us = median_of(w[k].round_p50, w[k].rounds);
    w[k].p99_us = median_of(w[k].round_p99, w[k].rounds);
    printf("wake-up %-6s %-13s p50 %8.1f us  p99 %8.1f us  (%llu wake-ups)\n", where, kWakeName[k],
           w[k].p50_us, w[k].p99_us, (unsigned long long)w[k].count);
  }
}

void run_wakeup_section(const options_t* opt) {
  for (uint32_t round = 0; round < opt->rounds; ++round) {
    for (int k = 0; k < WAKE_KINDS; ++k) {
      if (!run_wakeup_round(k, 1000, opt->paced_ms, &g_wakeup[k])) {
        fprintf(stderr, "hostcall_bench: wake-up yardstick %s failed\n", kWakeName[k]);
      }
    }
  }
  finish_wakeups(g_wakeup, "alone");
}
