//! The helper thread's own bell: the helper sleeps here, not on the HSA
//! doorbell, and the main listener rings it when a buffer on the helper has
//! work.
//!
//! Why not the doorbell: only one thread of a listener waits on the HSA
//! signal. ROCr's blocked wait polls for its first 200 µs before it sleeps,
//! so every helper wait on the doorbell would cost that much CPU; and on a
//! kernel driver without event ages ROCr turns a second concurrent waiter on
//! one signal into an active (spinning) wait, so a helper waiting beside the
//! main listener would spin for as long as both wait. This bell costs one
//! futex wake-up.
//!
//! The main listener sees every ring of the doorbell and looks at the
//! helper's buffers in its scans (amdgpu-dropin's `listener::visit::scan`).
//! While a buffer is on the helper, its wait has the doorbell wait's timeout
//! all the same (a lost ring); with none, it sleeps until rung.
//!
//! Model-checked with loom (`tests/loom_helper_bell.rs`): a ring after the
//! main listener saw work is never lost by a helper about to sleep.

use std::sync::PoisonError;
use std::time::{Duration, Instant};

use crate::sync::{AtomicBool, Condvar, Mutex, Ordering};

pub struct HelperBell {
    /// Rung since the helper last cleared it.
    rung: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

impl Default for HelperBell {
    fn default() -> Self {
        Self::new()
    }
}

impl HelperBell {
    pub fn new() -> HelperBell {
        HelperBell { rung: AtomicBool::new(false), lock: Mutex::new(()), wake: Condvar::new() }
    }

    /// Wakes the helper (or makes its next wait return at once). Cheap while
    /// already rung: no lock, no system call.
    #[inline]
    pub fn ring(&self) {
        // AcqRel: either this swap reads the helper's clear (and notifies),
        // or the helper's clear reads this swap: its acquire then makes what
        // preceded the ring (the main listener's look at the work, a stop
        // request) visible to the scan and the stop check that follow it.
        if !self.rung.swap(true, Ordering::AcqRel) {
            // The lock orders the notify after a waiter's check of `rung`
            // (made under the same lock), so the notify is not lost.
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_one();
        }
    }

    /// The helper is about to make its last scan before sleeping: rings from
    /// now on wake its wait.
    pub fn clear(&self) {
        // AcqRel (a swap, not a store, so that it reads a ring): see `ring`.
        self.rung.swap(false, Ordering::AcqRel);
    }

    /// Sleeps until rung or `timeout` has passed; true if rung.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            // Acquire: pairs with `ring`'s swap; the lock orders the two.
            if self.rung.load(Ordering::Acquire) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = self.wake.wait_timeout(guard, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_ring_before_the_wait_makes_it_return_at_once() {
        let bell = HelperBell::new();
        bell.clear();
        bell.ring();
        assert!(bell.wait(Duration::from_secs(10)));
    }

    #[test]
    fn a_cleared_bell_waits_for_its_timeout() {
        let bell = HelperBell::new();
        bell.ring();
        bell.clear();
        // Not rung: it returns at its timeout with false (the time it took is
        // not compared; the deadline logic is `wait`'s own clock).
        assert!(!bell.wait(Duration::from_millis(20)));
    }

    #[test]
    fn a_ring_from_another_thread_wakes_the_wait() {
        let bell = Arc::new(HelperBell::new());
        bell.clear();
        let ringer = {
            let bell = Arc::clone(&bell);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                bell.ring();
            })
        };
        // A hang detector, not a threshold: the ring ends the wait.
        assert!(bell.wait(Duration::from_secs(30)));
        ringer.join().unwrap();
    }

    #[test]
    fn many_rings_while_rung_notify_once_and_a_clear_rearms() {
        let bell = HelperBell::new();
        for _ in 0..1000 {
            bell.ring();
        }
        assert!(bell.wait(Duration::ZERO));
        bell.clear();
        assert!(!bell.wait(Duration::ZERO));
        bell.ring();
        assert!(bell.wait(Duration::ZERO));
    }
}
