//! Starting the listener threads: the main listener (with the first enabled
//! buffer) and the helper for slow buffers (on first need), each running
//! its loop (`thread_loop`) and catching a panic of it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::classifier::Role;
use super::shared::Listener;
use super::thread_loop::run_loop;
use crate::hostcall::process::{CURRENT, LIVE_THREADS};
use crate::log::{panic_message, Level};

/// Starts the main listener thread of `listener`. `LIVE_THREADS` counts it until it ends.
/// The threads' names (Linux comm, at most 15 bytes) are listed in
/// docs/listener.md.
pub fn spawn(listener: Arc<Listener>) -> Result<std::thread::JoinHandle<()>, String> {
    spawn_thread("amdgpu-hostcall", listener, |listener| run(listener, Role::Main))
        .map_err(|e| format!("cannot start the listener thread: {e}"))
}

/// Starts one listener thread running `body` until the listener must stop,
/// catching (and logging) a panic of the loop. `LIVE_THREADS` counts it.
fn spawn_thread<F>(
    name: &str,
    listener: Arc<Listener>,
    body: F,
) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: Fn(&Arc<Listener>) + Send + 'static,
{
    // Relaxed: a counter; the exit hook's acquire load pairs with the decrement.
    LIVE_THREADS.fetch_add(1, Ordering::Relaxed);
    let result = std::thread::Builder::new().name(name.into()).spawn(move || {
        // A write to a pipe whose reader is gone (a SANITIZER report or a
        // printf to a closed stderr) fails with EPIPE instead of killing the
        // process.
        crate::sys::block_sigpipe_in_this_thread();
        let _ = CURRENT.try_with(|c| c.set(Arc::as_ptr(&listener) as usize));
        crate::log!(
            Level::Info,
            "hostcall: listener thread started (doorbell {:#x})",
            listener.doorbell_handle()
        );
        while !listener.should_stop() {
            // The loop body never panics by design (services are caught per
            // lane); this catch keeps the thread alive should that ever be wrong.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(&listener))) {
                Ok(()) => break,
                Err(payload) => crate::log!(
                    Level::Error,
                    "hostcall listener: internal panic: {}; the thread keeps serving",
                    panic_message(&*payload)
                ),
            }
        }
        crate::log!(Level::Info, "hostcall: listener thread stopped");
        let _ = CURRENT.try_with(|c| c.set(0));
        drop(listener);
        // Release: pairs with the exit hook's acquire load of LIVE_THREADS.
        LIVE_THREADS.fetch_sub(1, Ordering::Release);
    });
    if result.is_err() {
        // Relaxed: as above.
        LIVE_THREADS.fetch_sub(1, Ordering::Relaxed);
    }
    result
}

/// Starts the helper thread for slow buffers; None if it cannot start (then
/// the main listener keeps serving every buffer itself).
fn start_helper(listener: &Arc<Listener>) -> Option<std::thread::JoinHandle<()>> {
    match spawn_thread("amdgpu-hc-slow", Arc::clone(listener), |listener| run(listener, Role::Helper)) {
        Ok(handle) => Some(handle),
        Err(e) => {
            crate::log!(
                Level::Warning,
                "hostcall: cannot start the helper thread for slow buffers ({e}); the listener \
                 serves them itself"
            );
            None
        }
    }
}

/// Starts the lost-ring watch; None if it cannot start (then a lost ring
/// waits for the blocked wait's timeout, as before the watch).
fn start_watch(listener: &Arc<Listener>) -> Option<std::thread::JoinHandle<()>> {
    match spawn_thread("amdgpu-hc-watch", Arc::clone(listener), |listener| {
        super::lost_ring_watch::run(listener)
    }) {
        Ok(handle) => Some(handle),
        Err(e) => {
            crate::log!(
                Level::Warning,
                "hostcall: cannot start the lost-ring watch ({e}); a request whose ring is lost \
                 waits for the listener's next timeout"
            );
            None
        }
    }
}

/// A listener thread's loop (main listener or helper); returns when the
/// listener must stop. The main listener joins its helper and its lost-ring
/// watch before returning.
fn run(listener: &Arc<Listener>, role: Role) {
    let watch = if role == Role::Main { start_watch(listener) } else { None };
    let helper = run_loop(listener, role, || start_helper(listener));
    if let Some(handle) = watch {
        listener.lost_ring_watch.stop();
        if handle.join().is_err() {
            crate::log!(Level::Error, "hostcall: the lost-ring watch ended with a panic");
        }
    }
    if let Some(handle) = helper {
        // It sees the same stop conditions; the bell makes it look now.
        listener.wake_helper();
        if handle.join().is_err() {
            crate::log!(Level::Error, "hostcall: the helper thread ended with a panic");
        }
    }
}
