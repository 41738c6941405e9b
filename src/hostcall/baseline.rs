//! Benchmark-only: the *baseline* listener strategy, so the benchmark
//! (`bench/`) can print every figure as a ratio against it, measured in the
//! same process and the same run.
//!
//! This is our own re-implementation of the strategy ROCclr's listener
//! follows (SPEC §4.6), not its code:
//!
//! * block on the shared doorbell, waiting for its value to differ from the
//!   last value seen, with a 1 ms timeout; a timeout without a change goes
//!   straight back to waiting (packets are served only on a change);
//! * on a change, take one process-wide lock and, under it, walk every
//!   registered buffer: detach its ready stack and run the services of every
//!   packet, still under the lock. (The shared drain looks at the stack
//!   before swapping it, where upstream swaps unconditionally: one load per
//!   empty buffer, which only flatters the baseline.)
//!
//! What it shares with the product listener: the packet walk and the
//! services (`protocol::drain_ready`, `Services`), the per-buffer gate that
//! `disableHostcalls` closes, and the stop conditions. So the two modes
//! differ in the waiting strategy and the locking only, which is what the
//! benchmark compares. (Upstream's enable/disable also take the global lock;
//! ours keep their own registry lock, which the benchmark does not measure.)
//!
//! Built only with the `bench-baseline` Cargo feature (off by default; the
//! product library never contains this module). Selected at run time when
//! the listener starts: `AMDGPU_DROPIN_HOSTCALL_LISTENER=baseline`. The
//! listener restarts after the last buffer is disabled, so a benchmark can
//! switch modes within one process.

use std::sync::Mutex;
use std::time::Duration;

use super::listener::{serve_entry, Listener};

/// Environment variable naming the listener strategy (`baseline` selects
/// this module; anything else, or unset, the product listener).
pub const LISTENER_ENV: &str = "AMDGPU_DROPIN_HOSTCALL_LISTENER";

/// Upstream's doorbell wait timeout (1 ms).
pub const BASELINE_WAIT_TIMEOUT: Duration = Duration::from_millis(1);

/// The one global lock held while every buffer is processed.
static GLOBAL_LOCK: Mutex<()> = Mutex::new(());

/// True when the environment selects the baseline strategy (read when a
/// listener starts).
pub fn selected() -> bool {
    std::env::var_os(LISTENER_ENV).is_some_and(|v| v == "baseline")
}

/// The baseline listener loop; returns when the listener must stop.
pub fn run(shared: &Listener) {
    let mut last_seen = shared.doorbell_load();
    loop {
        if shared.should_stop() {
            return;
        }
        let value = shared.doorbell_wait_value(last_seen, BASELINE_WAIT_TIMEOUT);
        if value == last_seen {
            // Timed out without a ring: upstream only serves on a change.
            continue;
        }
        last_seen = value;
        if shared.should_stop() {
            return;
        }
        // A panic cannot happen while the lock is held (services catch their
        // own), but a poisoned lock must not stop the baseline either.
        let _global = GLOBAL_LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        for entry in shared.snapshot().iter() {
            serve_entry(shared, entry);
        }
    }
}
