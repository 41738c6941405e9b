/* Poll registrations (amdgpu_dropin_hostcall_register_poll): a runtime's
 * own request channel served by the library's listener. Argument checks;
 * the doorbell handed out is the listener's (the one hostcall buffers name);
 * a ring wakes the listener and the poll serves; a poll that reports work is
 * called again without a ring; an idle listener sleeps; a registration alone
 * keeps the listener running and its unregister stops it; unregister waits
 * for a poll in progress (not for itself, from inside); polls and buffers are
 * served side by side; a forked child inherits no registration. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "amdgpu_dropin_hostcall.h"
#include "device_sim.h"
#include "hc_test.h"
#include "hsa/hsa.h"

#define TIMEOUT_MS 10000u
#define CHILD_TIMEOUT_MS 20000u

/* A channel as a runtime has one: the "device" posts by bumping `posted`
 * and ringing the doorbell; the poll answers by moving `answered` up to it. */
typedef struct channel {
  atomic_ulong posted;
  atomic_ulong answered;
  atomic_long polls;
  atomic_int busy_left;     /* report work for this many more polls */
  atomic_int block;         /* the next poll waits for `release` */
  atomic_int inside;        /* a blocked poll has started */
  atomic_int release;
  atomic_int unregistered;  /* set by the unregistering thread after the return */
  atomic_int seen_at_end;   /* `unregistered` as the blocked poll saw it when it ended */
  atomic_int unregister_self;
  atomic_int self_status;
  void* key;
} channel_t;

static int32_t poll_channel(void* user, void* key) {
  channel_t* c = user;
  if (key != c->key) return -1;
  atomic_fetch_add(&c->polls, 1);
  if (atomic_exchange(&c->block, 0)) {
    atomic_store(&c->inside, 1);
    while (!atomic_load(&c->release)) sched_yield();
    atomic_store(&c->seen_at_end, atomic_load(&c->unregistered));
  }
  if (atomic_exchange(&c->unregister_self, 0)) {
    atomic_store(&c->self_status, amdgpu_dropin_hostcall_unregister_poll(key));
  }
  unsigned long posted = atomic_load(&c->posted);
  int worked = atomic_load(&c->answered) != posted;
  atomic_store(&c->answered, posted);
  if (atomic_load(&c->busy_left) > 0) {
    atomic_fetch_sub(&c->busy_left, 1);
    worked = 1;
  }
  return worked;
}

static void channel_init(channel_t* c, void* key) {
  memset(c, 0, sizeof(*c));
  c->key = key;
}

/* Starts `c` afresh for `key` and registers it as a poll: the status. */
static amdgpu_dropin_hostcall_status_t channel_register(channel_t* c, void* key, uint64_t* doorbell) {
  channel_init(c, key);
  return amdgpu_dropin_hostcall_register_poll(key, poll_channel, c, doorbell);
}

static void ring(uint64_t doorbell) { hsa_signal_add_screlease((hsa_signal_t){doorbell}, 1); }

/* Posts one request, rings, waits until the poll answered it. */
static bool post_and_wait(channel_t* c, uint64_t doorbell) {
  unsigned long want = atomic_fetch_add(&c->posted, 1) + 1;
  ring(doorbell);
  uint64_t deadline = hc_now_ms() + TIMEOUT_MS;
  while (atomic_load(&c->answered) < want) {
    if (hc_now_ms() > deadline) return false;
    sched_yield();
  }
  return true;
}

static void wait_asleep(void) {
  for (int tries = 0; tries < 1000 && !hc_listeners_asleep(); ++tries) hc_sleep_ms(1);
}

/* Registers a fresh channel, serves one request, lets the listener fall asleep. */
static bool start_quiet(channel_t* c, void* key, uint64_t* doorbell) {
  if (channel_register(c, key, doorbell) != AMDGPU_DROPIN_HOSTCALL_OK) return false;
  if (!post_and_wait(c, *doorbell)) return false;
  wait_asleep();
  return true;
}

static void test_arguments(void) {
  static channel_t c;
  static char key[8];
  channel_init(&c, key);
  uint64_t doorbell = 0;
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_poll(NULL, poll_channel, &c, &doorbell) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_poll(key, NULL, &c, &doorbell) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_poll(key, poll_channel, &c, NULL) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(NULL) == AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED);
  DROPIN_REQUIRE(amdgpu_dropin_hostcall_register_poll(key, poll_channel, &c, &doorbell) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK_MSG(doorbell != 0, "no doorbell handed out");
  uint64_t again = 0;
  DROPIN_CHECK(amdgpu_dropin_hostcall_register_poll(key, poll_channel, &c, &again) ==
               AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED);
  DROPIN_CHECK_MSG(again == 0, "a refused registration wrote a doorbell");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_OK);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED);
}

/* A registration alone starts the listener; rings are served; its
 * unregister stops the listener; the poll is not called after it returns. */
static void test_ring_serves_and_unregister_stops(void) {
  static channel_t c;
  static char key[8];
  int threads0 = hc_thread_count();
  uint64_t doorbell = 0;
  DROPIN_REQUIRE(channel_register(&c, key, &doorbell) == AMDGPU_DROPIN_HOSTCALL_OK);
  /* The listener and its lost-ring watch, which the listener starts on its
   * own thread: it may come just after the registration returns. */
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0 + 2, TIMEOUT_MS) == threads0 + 2,
                   "%d threads with a poll registered, expected %d", hc_thread_count(), threads0 + 2);
  int served = 0;
  for (int i = 0; i < 200; ++i) served += post_and_wait(&c, doorbell) ? 1 : 0;
  DROPIN_CHECK_MSG(served == 200, "%d of 200 rings served", served);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_OK);
  long polls = atomic_load(&c.polls);
  DROPIN_CHECK_MSG(hc_wait_thread_count(threads0, TIMEOUT_MS) == threads0, "the listener did not stop");
  DROPIN_CHECK_MSG(atomic_load(&c.polls) == polls, "polled after unregister returned");
}

/* A poll that reports work is called again, with no ring. */
static void test_work_keeps_it_polling(void) {
  static channel_t c;
  static char key[8];
  uint64_t doorbell = 0;
  DROPIN_REQUIRE(start_quiet(&c, key, &doorbell));
  atomic_store(&c.busy_left, 50);
  long polls0 = atomic_load(&c.polls);
  ring(doorbell); /* one ring; the next 49 polls come from the reported work */
  uint64_t deadline = hc_now_ms() + TIMEOUT_MS;
  while (atomic_load(&c.busy_left) > 0 && hc_now_ms() < deadline) sched_yield();
  DROPIN_CHECK_MSG(atomic_load(&c.busy_left) == 0, "%d busy polls never came", atomic_load(&c.busy_left));
  DROPIN_CHECK_MSG(atomic_load(&c.polls) - polls0 >= 50, "%ld polls after one ring and 50 busy answers",
                   atomic_load(&c.polls) - polls0);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_OK);
}

/* Idle, the listener sleeps on the doorbell: a handful of polls in 300 ms
 * (its idle wait grows to IDLE_WAIT_MAX_MS), not a spinning core. */
static void test_idle_listener_sleeps(void) {
  static channel_t c;
  static char key[8];
  uint64_t doorbell = 0;
  DROPIN_REQUIRE(start_quiet(&c, key, &doorbell));
  long polls0 = atomic_load(&c.polls);
  hc_sleep_ms(300);
  long polls = atomic_load(&c.polls) - polls0;
  DROPIN_CHECK_MSG(polls <= 8, "%ld polls while idle for 300 ms", polls);
  DROPIN_CHECK_MSG(post_and_wait(&c, doorbell), "a ring after the idle time was not served");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_OK);
}

static channel_t blocked_channel;

static void* unregister_thread(void* arg) {
  (void)arg;
  amdgpu_dropin_hostcall_status_t status = amdgpu_dropin_hostcall_unregister_poll(blocked_channel.key);
  atomic_store(&blocked_channel.unregistered, status == AMDGPU_DROPIN_HOSTCALL_OK ? 1 : -1);
  return NULL;
}

static void test_unregister_waits_for_a_poll(void) {
  static char key[8];
  channel_t* c = &blocked_channel;
  /* A second registration keeps the listener running: the unregister below
   * must wait for the poll itself, not for the listener to stop. */
  static channel_t other;
  static char other_key[8];
  uint64_t other_doorbell = 0;
  DROPIN_REQUIRE(channel_register(&other, other_key, &other_doorbell) == AMDGPU_DROPIN_HOSTCALL_OK);
  uint64_t doorbell = 0;
  DROPIN_REQUIRE(channel_register(c, key, &doorbell) == AMDGPU_DROPIN_HOSTCALL_OK);
  /* Only a blocked poll writes `seen_at_end`, and none is blocked before the next line. */
  atomic_store(&c->seen_at_end, -7);
  atomic_store(&c->block, 1);
  ring(doorbell);
  uint64_t deadline = hc_now_ms() + TIMEOUT_MS;
  while (!atomic_load(&c->inside) && hc_now_ms() < deadline) sched_yield();
  DROPIN_REQUIRE_MSG(atomic_load(&c->inside), "the ring did not start a poll");
  pthread_t t;
  DROPIN_REQUIRE(pthread_create(&t, NULL, unregister_thread, NULL) == 0);
  for (int i = 0; i < 20000 && !atomic_load(&c->unregistered); ++i) sched_yield();
  DROPIN_CHECK_MSG(atomic_load(&c->unregistered) == 0, "unregister returned while the poll was running");
  atomic_store(&c->release, 1);
  pthread_join(t, NULL);
  DROPIN_CHECK_MSG(atomic_load(&c->seen_at_end) == 0, "the poll saw unregister done (%d)", atomic_load(&c->seen_at_end));
  DROPIN_CHECK(atomic_load(&c->unregistered) == 1);
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(other_key) == AMDGPU_DROPIN_HOSTCALL_OK);
}

static void test_unregister_from_inside(void) {
  static channel_t c;
  static char key[8];
  uint64_t doorbell = 0;
  DROPIN_REQUIRE(channel_register(&c, key, &doorbell) == AMDGPU_DROPIN_HOSTCALL_OK);
  /* Only a poll told to unregister itself writes `self_status`: none before the next line. */
  atomic_store(&c.self_status, -1);
  atomic_store(&c.unregister_self, 1);
  DROPIN_CHECK_MSG(post_and_wait(&c, doorbell), "the poll that unregisters itself did not serve");
  uint64_t deadline = hc_now_ms() + TIMEOUT_MS;
  while (atomic_load(&c.self_status) == -1 && hc_now_ms() < deadline) sched_yield();
  DROPIN_CHECK_MSG(atomic_load(&c.self_status) == AMDGPU_DROPIN_HOSTCALL_OK, "unregister from inside: %d",
                   atomic_load(&c.self_status));
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED);
}

/* Beside a hostcall buffer: the same doorbell, both served. */
static void test_beside_a_buffer(void) {
  static channel_t c;
  static char key[8];
  void* buffer = hc_alloc_buffer(8);
  DROPIN_REQUIRE(buffer != NULL && hc_enable(buffer, 8, NULL));
  uint64_t doorbell = 0;
  DROPIN_REQUIRE(channel_register(&c, key, &doorbell) == AMDGPU_DROPIN_HOSTCALL_OK);
  if (!hc_phase_bit()) {
    const device_sim_buffer_header_t* header = buffer;
    DROPIN_CHECK_MSG(header->doorbell == doorbell, "the poll's doorbell %#llx is not the buffers' %#llx",
                     (unsigned long long)doorbell, (unsigned long long)header->doorbell);
  }
  for (int i = 0; i < 20; ++i) {
    DROPIN_CHECK(device_sim_fc_checked_call(buffer, 0xf, (uint64_t)i, 10ull * 1000 * 1000 * 1000) == 0);
    DROPIN_CHECK(post_and_wait(&c, doorbell));
  }
  /* Disabling the buffer leaves the poll served. */
  hc_disable(buffer, NULL);
  DROPIN_CHECK_MSG(post_and_wait(&c, doorbell), "the poll stopped with the buffer");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(key) == AMDGPU_DROPIN_HOSTCALL_OK);
  hc_free_buffer(buffer);
}

static char fork_key[8];
static int child_after_fork(void) {
  /* The parent's registration is not the child's. */
  if (amdgpu_dropin_hostcall_unregister_poll(fork_key) != AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED) return 10;
  static channel_t c;
  uint64_t doorbell = 0;
  if (channel_register(&c, fork_key, &doorbell) != AMDGPU_DROPIN_HOSTCALL_OK) return 11;
  if (!post_and_wait(&c, doorbell)) return 12;
  return amdgpu_dropin_hostcall_unregister_poll(fork_key) == AMDGPU_DROPIN_HOSTCALL_OK ? 0 : 13;
}

static void test_fork(void) {
  HC_SKIP_FORK_UNDER_TSAN();
  static channel_t c;
  uint64_t doorbell = 0;
  DROPIN_REQUIRE(start_quiet(&c, fork_key, &doorbell));
  hc_child_result_t result;
  bool forked = hc_fork_child(child_after_fork, CHILD_TIMEOUT_MS, &result);
  DROPIN_CHECK_MSG(forked && result.exited && result.exit_code == 0, "child: %s",
                   forked ? hc_child_describe(&result) : "did not start");
  DROPIN_CHECK_MSG(post_and_wait(&c, doorbell), "the parent's poll stopped after the fork");
  DROPIN_CHECK(amdgpu_dropin_hostcall_unregister_poll(fork_key) == AMDGPU_DROPIN_HOSTCALL_OK);
}

int main(void) {
  hc_hsa_init();
  HC_RUN(test_arguments);
  HC_RUN(test_ring_serves_and_unregister_stops);
  HC_RUN(test_work_keeps_it_polling);
  HC_RUN(test_idle_listener_sleeps);
  HC_RUN(test_unregister_waits_for_a_poll);
  HC_RUN(test_unregister_from_inside);
  HC_RUN(test_beside_a_buffer);
  HC_RUN(test_fork);
  return dropin_check_exit_code();
}
