//! Model checking, with loom, of the handshake between calls of a registered
//! hostcall handler and its unregistration (`hostcall::call_gate`): once
//! `retire` has been followed by `in_flight` reading 0, no call is inside and
//! none can start, so the unregistering thread may free the handler's data.
//!
//! Run (separate target dir so the main build is not invalidated):
//!
//!     LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!         cargo test -p amdgpu-dropin-hostcall-core --release --test loom_handlers
//!
//! The per-lane early stop (`is_retired`, checked before each lane) is
//! modelled too: it must not break the handshake.
//!
//! The handler's data is a loom `UnsafeCell`: a call reading it after the
//! unregistering thread's "free" (a write) is reported as a data race.
#![cfg(loom)]

use amdgpu_dropin_hostcall_core::call_gate::CallGate;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

struct Shared {
    gate: CallGate,
    /// The handler's user data: 1 while registered, 0 once "freed".
    data: UnsafeCell<u64>,
    /// Calls that got in.
    served: AtomicU32,
}

/// A listener thread making `calls` calls; each that gets in reads the data.
fn listener(shared: &Shared, calls: u32) {
    for _ in 0..calls {
        if shared.gate.enter(0) {
            // SAFETY: a loom cell; the gate promises no write is concurrent (loom checks it).
            let value = shared.data.with(|p| unsafe { *p });
            assert_eq!(value, 1, "a call saw freed data");
            shared.served.fetch_add(1, Ordering::Relaxed);
            shared.gate.leave(0);
        }
    }
}

/// The unregistering thread: retire, wait for running calls, free.
fn unregister(shared: &Shared) {
    shared.gate.retire();
    while shared.gate.in_flight(0) > 0 {
        thread::yield_now();
    }
    // SAFETY: a loom cell; no call is inside any more (loom checks it).
    shared.data.with_mut(|p| unsafe { *p = 0 });
}

#[test]
fn unregister_waits_for_a_running_call() {
    loom::model(|| {
        let shared =
            Arc::new(Shared { gate: CallGate::new(), data: UnsafeCell::new(1), served: AtomicU32::new(0) });
        let caller = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || listener(&shared, 2))
        };
        unregister(&shared);
        caller.join().unwrap();
        assert!(shared.served.load(Ordering::Relaxed) <= 2);
    });
}

#[test]
fn two_listener_threads_and_an_unregister() {
    loom::model(|| {
        let shared =
            Arc::new(Shared { gate: CallGate::new(), data: UnsafeCell::new(1), served: AtomicU32::new(0) });
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let shared = Arc::clone(&shared);
                thread::spawn(move || listener(&shared, 1))
            })
            .collect();
        unregister(&shared);
        for caller in callers {
            caller.join().unwrap();
        }
        // After the unregister no call gets in.
        assert!(!shared.gate.enter(0));
    });
}

/// A per-lane call: lane 0, then (unless the registration was retired
/// meanwhile) lane 1, each reading the data.
fn lane_listener(shared: &Shared) {
    if shared.gate.enter(0) {
        for _ in 0..2 {
            if shared.gate.is_retired() {
                break;
            }
            // SAFETY: a loom cell; the gate promises no write is concurrent (loom checks it).
            let value = shared.data.with(|p| unsafe { *p });
            assert_eq!(value, 1, "a lane call saw freed data");
            shared.served.fetch_add(1, Ordering::Relaxed);
        }
        shared.gate.leave(0);
    }
}

#[test]
fn the_per_lane_early_stop_keeps_the_handshake() {
    loom::model(|| {
        let shared =
            Arc::new(Shared { gate: CallGate::new(), data: UnsafeCell::new(1), served: AtomicU32::new(0) });
        let caller = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || lane_listener(&shared))
        };
        unregister(&shared);
        caller.join().unwrap();
        assert!(shared.served.load(Ordering::Relaxed) <= 2);
    });
}

#[test]
fn unregistering_from_inside_ends_the_lane_loop() {
    loom::model(|| {
        let shared =
            Arc::new(Shared { gate: CallGate::new(), data: UnsafeCell::new(1), served: AtomicU32::new(0) });
        assert!(shared.gate.enter(0));
        // Lane 0 unregisters from inside: the thread retires its own gate.
        shared.gate.retire();
        assert!(shared.gate.is_retired(), "the next lane sees it and is not called");
        shared.gate.leave(0);
        assert_eq!(shared.gate.in_flight(0), 0);
    });
}
