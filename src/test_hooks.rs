//! Hooks of the C suite's hook build (cargo feature `test-hooks`, never the
//! product library): pause points, where a thread waits until the test
//! releases it (so a test can fork while another thread is inside a
//! once-only initializer), and counters of waits. Without the feature each
//! function is an empty inline. The exports that drive them are in
//! `ffi/test_hooks.rs`; the point ids in `hostcall/tunables.rs`.

#[cfg(feature = "test-hooks")]
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Armed points (bit `point`): the next thread to reach one pauses there.
#[cfg(feature = "test-hooks")]
static ARMED: AtomicU32 = AtomicU32::new(0);
/// Points a thread is paused at now.
#[cfg(feature = "test-hooks")]
static REACHED: AtomicU32 = AtomicU32::new(0);
/// Points released by the test.
#[cfg(feature = "test-hooks")]
static RELEASED: AtomicU32 = AtomicU32::new(0);
/// Exits that waited for a listener inside the HSA doorbell wait.
#[cfg(feature = "test-hooks")]
static EXIT_HSA_WAITS: AtomicU64 = AtomicU64::new(0);

/// Arms `point`: the next thread that reaches it waits there until `release`.
#[cfg(feature = "test-hooks")]
pub fn arm(point: u32) {
    let bit = 1u32 << (point % 32);
    // SeqCst (here and below): test-only, a handful of operations; the
    // simplest ordering that needs no argument.
    RELEASED.fetch_and(!bit, Ordering::SeqCst);
    REACHED.fetch_and(!bit, Ordering::SeqCst);
    ARMED.fetch_or(bit, Ordering::SeqCst);
}

/// Whether a thread is paused at `point` now.
#[cfg(feature = "test-hooks")]
pub fn reached(point: u32) -> bool {
    REACHED.load(Ordering::SeqCst) & (1u32 << (point % 32)) != 0
}

/// Lets the thread paused at `point` (if any) go on.
#[cfg(feature = "test-hooks")]
pub fn release(point: u32) {
    RELEASED.fetch_or(1u32 << (point % 32), Ordering::SeqCst);
}

/// Pauses here if the test armed `point` (once per arming: a forked child
/// never finds the parent's arming).
#[inline(always)]
pub fn pause_at(point: u32) {
    #[cfg(feature = "test-hooks")]
    {
        let bit = 1u32 << (point % 32);
        if ARMED.fetch_and(!bit, Ordering::SeqCst) & bit == 0 {
            return;
        }
        REACHED.fetch_or(bit, Ordering::SeqCst);
        while RELEASED.load(Ordering::SeqCst) & bit == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        REACHED.fetch_and(!bit, Ordering::SeqCst);
    }
    #[cfg(not(feature = "test-hooks"))]
    let _ = point;
}

/// Counts an exit that had to wait for a listener inside the HSA wait.
#[inline(always)]
pub fn count_exit_hsa_wait() {
    #[cfg(feature = "test-hooks")]
    EXIT_HSA_WAITS.fetch_add(1, Ordering::SeqCst);
}

/// Exits (of this process) that waited for a listener inside the HSA wait.
#[cfg(feature = "test-hooks")]
pub fn exit_hsa_waits() -> u64 {
    EXIT_HSA_WAITS.load(Ordering::SeqCst)
}
