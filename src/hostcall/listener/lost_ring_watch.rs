//! The lost-ring watch: a thread that looks, every `WATCH_PERIOD`, at what
//! the main listener cannot see while it sleeps in its doorbell wait: a
//! request whose ring never came (issue 27 item 3; docs/listener.md,
//! "Lost rings").
//!
//! A periodic wake-up through the HSA runtime's wait would cost ROCr's
//! 200 µs poll each time (docs/listener.md). The watch instead sleeps a
//! plain timed park (a futex with a timeout: no poll) and looks directly: the
//! doorbell's value against the one the blocked wait compares with, and each
//! buffer's waiting requests (a shared read of the ready stack or the phase
//! words). Work found while the main listener is still in the same wait is
//! looked at again `CONFIRM_AFTER` later, so a ring that is merely on its
//! way (the wake-up takes tens of microseconds) is not taken for a lost one;
//! still there, the watch changes the doorbell's value, which ends the wait
//! as a ring does, and tells the main listener so (its scan then counts the
//! work it finds as lost rings). The main listener's own timeouts can then
//! grow as long as idleness allows: a lost ring waits at most
//! `WATCH_PERIOD + CONFIRM_AFTER` and a wake-up, whatever the gap before it.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Listener;
use crate::hostcall::tunables;

/// How often the watch looks.
pub const WATCH_PERIOD: Duration = Duration::from_millis(tunables::LOST_RING_WATCH_MS);
/// How long work must stay unserved under one wait before the watch acts.
pub const CONFIRM_AFTER: Duration = Duration::from_micros(tunables::LOST_RING_CONFIRM_US);

/// What the main listener's blocked wait tells the watch, and the watch's
/// kick back.
pub struct WatchState {
    /// The wait's sequence number << 2, | `BLOCKED` while the main listener
    /// is in its blocked doorbell wait, | `KICKED` once the watch ended it.
    /// One word, so a kick lands on the wait it was meant for or on none.
    wait: AtomicU64,
    /// The doorbell value that wait compares with.
    observed: AtomicI64,
    stop: AtomicBool,
    /// The watch thread, so `stop` can wake it.
    thread: Mutex<Option<std::thread::Thread>>,
}

const BLOCKED: u64 = 1;
const KICKED: u64 = 2;
const SEQUENCE_STEP: u64 = 4;

impl Default for WatchState {
    fn default() -> Self {
        Self::new()
    }
}

impl WatchState {
    pub fn new() -> WatchState {
        WatchState {
            wait: AtomicU64::new(0),
            observed: AtomicI64::new(0),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
        }
    }

    /// The main listener is about to wait while the doorbell reads `observed`.
    pub fn wait_begins(&self, observed: i64) {
        // Relaxed: published by the release store of `wait` below.
        self.observed.store(observed, Ordering::Relaxed);
        // Relaxed load: only the main listener starts and ends waits.
        let sequence = (self.wait.load(Ordering::Relaxed) & !(BLOCKED | KICKED)).wrapping_add(SEQUENCE_STEP);
        // Release: a watch that sees this wait (acquire) sees its `observed`.
        self.wait.store(sequence | BLOCKED, Ordering::Release);
    }

    /// The wait is over; true if the watch ended it.
    pub fn wait_ends(&self) -> bool {
        // Relaxed: the swap only has to be atomic with the watch's CAS (a
        // kick either happened before it and is seen, or fails); the
        // doorbell ring that follows a kick carries no data.
        let previous = self.wait.fetch_and(!(BLOCKED | KICKED), Ordering::Relaxed);
        previous & KICKED != 0
    }

    /// The current wait (its word) and compared value, if one is in progress
    /// and not kicked yet.
    fn blocked(&self) -> Option<(u64, i64)> {
        // Acquire: pairs with `wait_begins`' release store.
        let wait = self.wait.load(Ordering::Acquire);
        (wait & (BLOCKED | KICKED) == BLOCKED).then(|| (wait, self.observed.load(Ordering::Relaxed)))
    }

    /// Marks wait `wait` as ended by the watch, if it still is in progress.
    fn kick(&self, wait: u64) -> bool {
        // Relaxed: see `wait_ends`.
        self.wait.compare_exchange(wait, wait | KICKED, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }

    /// Asks the watch thread to end and wakes it.
    pub fn stop(&self) {
        // Release: pairs with the watch's acquire load.
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            thread.unpark();
        }
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }
}

/// Is there work the main listener, blocked while the doorbell read
/// `observed`, has not been told of?
fn unannounced_work(listener: &Listener, observed: i64) -> bool {
    if listener.doorbell_load() != observed {
        return true;
    }
    listener.published.load().iter().any(|entry| {
        // Inside the gate only: a disabled buffer may be freed already.
        if !entry.gate.enter() {
            return false;
        }
        let work = entry.buffer.seen_waiting() == Some(true);
        entry.gate.leave();
        work
    })
}

/// The watch thread's loop; returns when the listener stops.
pub fn run(listener: &Arc<Listener>) {
    let watch = &listener.lost_ring_watch;
    *watch.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(std::thread::current());
    while !watch.stopping() && !listener.should_stop() {
        std::thread::park_timeout(WATCH_PERIOD);
        listener.counters.watch_looked();
        let Some((wait, observed)) = watch.blocked() else {
            continue;
        };
        if !unannounced_work(listener, observed) {
            continue;
        }
        std::thread::park_timeout(CONFIRM_AFTER);
        listener.counters.watch_looked();
        if watch.stopping() || listener.should_stop() || watch.blocked() != Some((wait, observed)) {
            continue;
        }
        if unannounced_work(listener, observed) && watch.kick(wait) {
            // A ring of our own: the wait returns as for the device's.
            listener.ring();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kick_belongs_to_the_wait_it_was_made_for() {
        let w = WatchState::new();
        assert_eq!(w.blocked(), None);
        w.wait_begins(5);
        let (first, observed) = w.blocked().expect("in a wait");
        assert_eq!(observed, 5);
        assert!(w.kick(first));
        assert!(w.wait_ends(), "the wait learns it was kicked");
        assert_eq!(w.blocked(), None);
        w.wait_begins(6);
        assert!(!w.kick(first), "a kick for an earlier wait is refused");
        assert!(!w.wait_ends(), "and does not mark the next one");
    }

    #[test]
    fn every_wait_has_its_own_number() {
        let w = WatchState::new();
        w.wait_begins(1);
        let a = w.blocked().unwrap().0;
        w.wait_ends();
        w.wait_begins(1);
        let b = w.blocked().unwrap().0;
        assert_ne!(a, b);
    }

    #[test]
    fn a_lost_ring_waits_less_than_20_ms() {
        const { assert!(tunables::LOST_RING_WATCH_MS * 1000 + tunables::LOST_RING_CONFIRM_US < 18_000) };
    }
}
