//! The registration gate of one buffer: the listener enters it to serve the
//! buffer, `disableHostcalls` closes it and waits until no one is inside
//! (docs/protocols.md). Written against the `sync` shim so the loom models
//! check this code.

use super::sync::{fence, AtomicBool, Ordering};

/// Decides who may touch a registered buffer: the listener enters before it
/// drains it, `disableHostcalls` closes the gate and waits until no one is
/// inside; after that the buffer is never touched again and the caller may
/// free it.
///
/// Memory ordering: `enter` (busy := true, then read `closed`) and `close`
/// (closed := true, then read `busy`) are the two halves of a store→load
/// handshake (Dekker). Release/acquire cannot order a store before a later
/// load, so each side puts a SeqCst fence between its store and its load: of
/// the two fences one comes first in the single total order, and the thread
/// of the later fence then sees the other side's store; so either the
/// listener sees `closed` (and backs out) or `close` sees `busy` (and waits).
/// (Fences rather than SeqCst accesses because loom models SeqCst fences
/// exactly but treats SeqCst accesses as acquire/release.) The final
/// `busy := false` is a release store paired with the closer's acquire load,
/// so every access the listener made to the buffer happens before
/// `disableHostcalls` returns.
#[derive(Debug)]
pub struct Gate {
    closed: AtomicBool,
    busy: AtomicBool,
}

impl Default for Gate {
    fn default() -> Self {
        Self::new()
    }
}

impl Gate {
    pub fn new() -> Gate {
        Gate { closed: AtomicBool::new(false), busy: AtomicBool::new(false) }
    }

    /// Tries to enter; false when the gate is closed or another server is
    /// inside (only one thread drains a buffer at a time).
    #[inline]
    pub fn enter(&self) -> bool {
        // Acquire: a previous server's release `leave` happens before our
        // accesses (one server at a time). Store half of the handshake.
        if self.busy.swap(true, Ordering::Acquire) {
            return false;
        }
        // SeqCst fence: orders the store above before the load below (see `Gate`).
        fence(Ordering::SeqCst);
        // Relaxed: ordered by the fence; load half of the handshake.
        if self.closed.load(Ordering::Relaxed) {
            // Release: nothing was accessed, but keep the pairing uniform.
            self.busy.store(false, Ordering::Release);
            return false;
        }
        true
    }

    /// Leaves after a successful `enter`.
    #[inline]
    pub fn leave(&self) {
        // Release: pairs with the closer's acquire load of `busy`; see `Gate`.
        self.busy.store(false, Ordering::Release);
    }

    /// Whether the gate was closed (checked between packets).
    #[inline]
    pub fn is_closed(&self) -> bool {
        // Relaxed: only a hint to stop early; `close`/`enter` carry the ordering.
        self.closed.load(Ordering::Relaxed)
    }

    /// Closes the gate; returns true if no server is inside any more (so the
    /// buffer is free to go). Call `is_idle` until true otherwise.
    pub fn close(&self) -> bool {
        // Relaxed: ordered by the fence; store half of the handshake.
        self.closed.store(true, Ordering::Relaxed);
        // SeqCst fence: orders the store above before the load in `is_idle`.
        fence(Ordering::SeqCst);
        self.is_idle()
    }

    /// True when no server is inside.
    #[inline]
    pub fn is_idle(&self) -> bool {
        // Acquire: pairs with the server's release `leave`, so its accesses to
        // the buffer happen before whatever the caller does next (free it).
        !self.busy.load(Ordering::Acquire)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn gate_excludes_and_closes() {
        let gate = Gate::new();
        assert!(gate.enter());
        assert!(!gate.enter(), "one server at a time");
        assert!(!gate.close(), "busy while inside");
        assert!(gate.is_closed());
        gate.leave();
        assert!(gate.is_idle());
        assert!(!gate.enter(), "closed gate refuses");
        assert!(gate.is_idle());
    }
}
