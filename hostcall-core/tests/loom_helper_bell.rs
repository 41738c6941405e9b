//! Model checking, with loom, of the helper thread's bell
//! (`hostcall::listener::helper_bell`): the main listener sees work on a buffer the
//! helper serves and rings; the helper clears the bell, looks at its buffers
//! once more and sleeps. Whatever the interleaving, the helper either sees
//! the work in that last look or is woken: it never sleeps through it. (Loom
//! ignores wait timeouts, so a lost wake-up shows as a deadlock.)
//!
//! Run (separate target dir so the main build is not invalidated):
//!
//!     LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!         cargo test -p amdgpu-dropin-hostcall-core --release --test loom_helper_bell
#![cfg(loom)]

use std::time::Duration;

use amdgpu_dropin_hostcall_core::helper_bell::HelperBell;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

struct Shared {
    bell: HelperBell,
    /// A request on a buffer the helper serves (the device's push).
    work: AtomicBool,
}

/// The helper's loop until it sees `work`: clear, last look (with `order`),
/// sleep.
fn helper(shared: &Shared, order: Ordering) {
    loop {
        shared.bell.clear();
        if shared.work.load(order) {
            return;
        }
        shared.bell.wait(Duration::from_secs(3600));
    }
}

#[test]
fn a_ring_after_work_is_seen_is_never_lost() {
    loom::model(|| {
        let shared = Arc::new(Shared { bell: HelperBell::new(), work: AtomicBool::new(false) });
        let device = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || shared.work.store(true, Ordering::Relaxed))
        };
        let main_listener = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                // Its scans until one sees the work (each ring of the
                // doorbell makes it scan again), then the bell.
                while !shared.work.load(Ordering::Relaxed) {
                    thread::yield_now();
                }
                shared.bell.ring();
            })
        };
        // Relaxed, as the listener's peek of a ready stack.
        helper(&shared, Ordering::Relaxed);
        device.join().unwrap();
        main_listener.join().unwrap();
    });
}

#[test]
fn a_stop_request_rung_before_the_helper_clears_is_seen() {
    // request_stop: the stop flag, then the ring. The helper's clear reads
    // the ring, so its stop check after the clear sees the flag.
    loom::model(|| {
        let shared = Arc::new(Shared { bell: HelperBell::new(), work: AtomicBool::new(false) });
        let stopper = {
            let shared = Arc::clone(&shared);
            thread::spawn(move || {
                shared.work.store(true, Ordering::Release);
                shared.bell.ring();
            })
        };
        // Acquire, as `Listener::should_stop`; `work` plays the stop flag.
        helper(&shared, Ordering::Acquire);
        stopper.join().unwrap();
    });
}
