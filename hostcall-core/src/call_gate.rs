//! The handshake between calls of a registered handler and its
//! unregistration, written against the `sync` shim so `tests/loom_handlers.rs`
//! model-checks exactly this code.
//!
//! A call counts itself in (`enter`: count += 1, then read `retired`); the
//! unregistering thread retires the gate (`retire`: retired := true, then read
//! the count). Each side puts a SeqCst fence between its store and its load
//! (as the buffer gate in `gate.rs` does): of the two fences one comes first
//! in the single total order, so either the call sees `retired` and backs out,
//! or `retire` sees the call and the caller waits for `in_flight` to drop.
//! `leave` is a release paired with `in_flight`'s acquire load, so everything
//! the call did happens before the waiter goes on (and frees the handler's
//! data).
//!
//! The count carries the fork epoch in its upper 32 bits: in a forked child
//! the calls that were running in the parent's threads never end, so a count
//! from another epoch reads as 0.

use crate::sync::{fence, AtomicBool, AtomicU64, Ordering};

#[derive(Debug)]
pub struct CallGate {
    /// (epoch << 32) | calls in flight.
    calls: AtomicU64,
    retired: AtomicBool,
}

impl Default for CallGate {
    fn default() -> Self {
        Self::new()
    }
}

impl CallGate {
    pub fn new() -> CallGate {
        CallGate { calls: AtomicU64::new(0), retired: AtomicBool::new(false) }
    }

    fn pack(epoch: u32, count: u32) -> u64 {
        (u64::from(epoch) << 32) | u64::from(count)
    }

    /// Counts a call in `epoch`; false (and nothing counted) once retired.
    #[inline]
    pub fn enter(&self, epoch: u32) -> bool {
        // Relaxed: the CAS below re-checks the value.
        let mut current = self.calls.load(Ordering::Relaxed);
        loop {
            let count = if (current >> 32) as u32 == epoch { current as u32 } else { 0 };
            // Relaxed on success: the fence below orders it before the
            // `retired` load (store half of the handshake).
            match self.calls.compare_exchange_weak(
                current,
                Self::pack(epoch, count + 1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }
        // SeqCst fence: orders the count above before the load below.
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence (load half of the handshake).
        if self.retired.load(Ordering::Relaxed) {
            self.leave(epoch);
            return false;
        }
        true
    }

    /// Ends a call counted in `epoch` (a count of another epoch is stale and
    /// left alone).
    #[inline]
    pub fn leave(&self, epoch: u32) {
        // Relaxed: the CAS below re-checks the value.
        let mut current = self.calls.load(Ordering::Relaxed);
        loop {
            if (current >> 32) as u32 != epoch || current as u32 == 0 {
                return;
            }
            // Release: pairs with `in_flight`'s acquire load (see the module docs).
            match self.calls.compare_exchange_weak(current, current - 1, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }

    /// Refuses new calls. Then wait until `in_flight` is low enough.
    pub fn retire(&self) {
        // Relaxed: ordered by the fence (store half of the handshake).
        self.retired.store(true, Ordering::Relaxed);
        // SeqCst fence: orders the store above before `in_flight`'s load.
        fence(Ordering::SeqCst);
    }

    /// Whether `retire` ran. A call inside checks it between the steps of one
    /// packet (per-lane handlers), so a handler that unregistered itself is
    /// not called for the packet's remaining lanes.
    #[inline]
    pub fn is_retired(&self) -> bool {
        // Relaxed: from the retiring thread itself (unregister from inside)
        // program order makes the store visible; for a retire on another
        // thread this is only an early stop, since that thread waits for the
        // call to leave (`in_flight`) before it goes on.
        self.retired.load(Ordering::Relaxed)
    }

    /// Calls of `epoch` still running.
    #[inline]
    pub fn in_flight(&self, epoch: u32) -> u32 {
        // Acquire: pairs with `leave`'s release (load half of the handshake).
        let current = self.calls.load(Ordering::Acquire);
        if (current >> 32) as u32 == epoch {
            current as u32
        } else {
            0
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn counts_of_an_older_fork_epoch_read_as_zero() {
        let gate = CallGate::new();
        assert!(gate.enter(0));
        assert!(gate.enter(0));
        assert_eq!(gate.in_flight(0), 2);
        // In a forked child (epoch 1) the parent's calls never end.
        assert_eq!(gate.in_flight(1), 0);
        gate.leave(1);
        assert_eq!(gate.in_flight(0), 2, "a leave of another epoch changes nothing");
        assert!(gate.enter(1));
        assert_eq!(gate.in_flight(1), 1, "the child's own count starts from 0");
        gate.leave(1);
        gate.leave(1);
        assert_eq!(gate.in_flight(1), 0, "never below 0");
    }

    #[test]
    fn a_retired_gate_refuses_and_counts_nothing() {
        let gate = CallGate::new();
        assert!(gate.enter(0));
        gate.retire();
        assert!(!gate.enter(0));
        assert!(gate.is_retired());
        assert_eq!(gate.in_flight(0), 1, "only the call that got in");
        gate.leave(0);
        assert_eq!(gate.in_flight(0), 0);
    }
}
