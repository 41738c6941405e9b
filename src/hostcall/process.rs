//! Process-wide state of the hostcall host: exit, fork epoch, live listener
//! threads, threads inside the doorbell wait, and which thread is a listener
//! (docs/process.md). Every part of the host reads these; only the registry's
//! hooks and the listener threads write them.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use super::gate::Gate;

/// Listener threads inside the HSA doorbell wait right now. Process exit
/// waits for it to drop to 0 (bounded by `tunables::IDLE_WAIT_MAX_MS`) when no ring could
/// reach them, so no listener is inside the HSA runtime during its teardown.
pub static IN_DOORBELL_WAIT: AtomicUsize = AtomicUsize::new(0);

/// The process is exiting (or the library is being unloaded): set by the
/// atexit handler first and again by the `.fini_array` hook (registry.rs).
/// Listeners stop; no HSA call is made any more (the HSA runtime may already
/// be torn down).
pub static EXITING: AtomicBool = AtomicBool::new(false);

/// Listener threads (main listeners and helpers) that have not finished yet.
pub static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Bumped in a forked child: listeners (and signals) of an older epoch
/// belong to the parent.
pub static FORK_EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// On a listener thread: the address of its `Listener`; 0 elsewhere.
    pub(crate) static CURRENT: Cell<usize> = const { Cell::new(0) };
    /// The address of the `Gate` this thread is inside (serving that
    /// buffer's packets); 0 when it is inside none.
    pub(crate) static SERVING: Cell<usize> = const { Cell::new(0) };
}

/// True when called on a thread of the listener at `listener` (from a service).
pub fn on_listener_thread<T>(listener: *const T) -> bool {
    CURRENT.try_with(|c| c.get() == listener as usize).unwrap_or(false)
}

/// True when this thread is inside `gate`, i.e. called from a service of the
/// buffer `gate` guards. Only then may `disableHostcalls` skip waiting for the
/// gate: on any other thread (a listener thread serving *another* buffer
/// included, since the main listener and the helper serve buffers in
/// parallel) the server inside is someone else and must be waited for.
pub fn serving_on_this_thread(gate: &Gate) -> bool {
    SERVING.try_with(|c| c.get() == gate as *const Gate as usize).unwrap_or(false)
}

/// True when called on any listener thread.
pub fn on_any_listener_thread() -> bool {
    CURRENT.try_with(|c| c.get() != 0).unwrap_or(false)
}
