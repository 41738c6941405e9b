//! Process-wide state of the hostcall host: exit, fork epoch, live listener
//! threads, threads inside the doorbell wait, and which thread is a listener
//! (docs/process.md). Every part of the host reads these; only the registry's
//! hooks and the listener threads write them.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

use crate::log::Level;
use hostcall_core::gate::Gate;

/// Listener threads inside the HSA doorbell wait right now. Process exit
/// waits for it to drop to 0 (bounded by `IDLE_WAIT_MAX_MS + EXIT_TIMEOUT_MS`,
/// see `tunables`) when no ring could reach them, so no listener is inside
/// the HSA runtime during its teardown. Zeroed in a forked child.
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

/// Set when the exit handler (`registry::at_exit`) has run in this process.
pub static EXIT_HANDLER_RAN: AtomicBool = AtomicBool::new(false);

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

/// Registers the fork child handler (once, before the first process-wide
/// lock exists: every such lock lives in a `ForkLocal`, whose first use
/// calls this, and the library's load hook calls it first). glibc registers
/// it for this object (`__dso_handle`) and drops it if the object is
/// unloaded before a listener pinned it.
pub fn install_fork_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if let Err(e) = crate::sys::register_atfork_child(after_fork_in_child) {
            crate::log!(Level::Warning, "hostcall: pthread_atfork failed: {e}");
        }
    });
}

/// pthread_atfork child handler: runs in the child right after fork, with one
/// thread. Only atomic stores (async-signal-safe). Moving `FORK_EPOCH` is
/// what makes every `ForkLocal` of the parent (the registry's state, the
/// handler table with its DEVMEM books) and a `ForkSafeOnce` the parent was
/// inside stale: the child makes its own on first use, and the parent's,
/// with its possibly locked mutexes, is leaked. The counters and flags that
/// the exit path reads start as in a process that never used the hostcall
/// half: no listener thread, none inside the HSA wait (the parent's threads
/// do not exist here), not exiting (even if the parent was).
extern "C" fn after_fork_in_child() {
    // Relaxed: the child has a single thread at this point.
    FORK_EPOCH.fetch_add(1, Ordering::Relaxed);
    LIVE_THREADS.store(0, Ordering::Relaxed);
    IN_DOORBELL_WAIT.store(0, Ordering::Relaxed);
    EXITING.store(false, Ordering::Relaxed);
    EXIT_HANDLER_RAN.store(false, Ordering::Relaxed);
}

/// Runs an initializer once per process, fork-safe: unlike `std::sync::Once`,
/// a fork while another thread is inside the initializer does not leave the
/// child's copy "running" forever (that thread does not exist there). The
/// state carries the fork epoch it was set in: a child that finds the
/// parent's initializer unfinished runs it itself. The initializer must
/// tolerate having run partly before (in the parent, before the fork).
pub struct ForkSafeOnce {
    /// `epoch << 2 | phase`, phase `NOT_STARTED`, `RUNNING` or `DONE`.
    state: AtomicU64,
}

const NOT_STARTED: u64 = 0;
const RUNNING: u64 = 1;
const DONE: u64 = 2;

impl ForkSafeOnce {
    pub const fn new() -> ForkSafeOnce {
        ForkSafeOnce { state: AtomicU64::new(NOT_STARTED) }
    }

    /// Runs `init` unless it has run (or runs now, on another thread of this
    /// process: then waits for it).
    pub fn call_once(&self, init: impl FnOnce()) {
        loop {
            // Acquire: pairs with the release store of DONE, so what `init`
            // did is visible to a caller that returns without running it.
            let seen = self.state.load(Ordering::Acquire);
            // Relaxed: the epoch moves only in the child handler, before any
            // other code of the child runs.
            let epoch = FORK_EPOCH.load(Ordering::Relaxed);
            let phase = seen & 3;
            if phase == DONE {
                return;
            }
            if phase == RUNNING && seen >> 2 == epoch {
                // Another thread of this process runs it.
                std::thread::yield_now();
                continue;
            }
            // Not started, or started by a thread of the parent that does not
            // exist here. Acquire: as above (a winner's DONE).
            let mine = epoch << 2 | RUNNING;
            if self.state.compare_exchange(seen, mine, Ordering::Acquire, Ordering::Acquire).is_ok() {
                // An `init` that unwinds leaves the state "not started", so a
                // later caller runs it again instead of waiting for ever.
                struct Unfinished<'a>(&'a AtomicU64);
                impl Drop for Unfinished<'_> {
                    fn drop(&mut self) {
                        // Release: nothing to publish; pairs with the loads above.
                        self.0.store(NOT_STARTED, Ordering::Release);
                    }
                }
                let unfinished = Unfinished(&self.state);
                init();
                core::mem::forget(unfinished);
                // Release: publishes what `init` did (see the load above).
                self.state.store(epoch << 2 | DONE, Ordering::Release);
                return;
            }
        }
    }
}

/// A process-wide value made on first use and never freed, one per fork
/// epoch: a forked child never touches its parent's (whose locks a thread of
/// the parent may have held at the fork) and makes a fresh one instead.
pub struct ForkLocal<T> {
    current: AtomicPtr<Epoch<T>>,
}

struct Epoch<T> {
    epoch: u64,
    value: T,
}

impl<T> ForkLocal<T> {
    pub const fn new() -> ForkLocal<T> {
        ForkLocal { current: AtomicPtr::new(core::ptr::null_mut()) }
    }

    /// This process's value, if it was made.
    pub fn get(&self) -> Option<&T> {
        // Acquire: pairs with the release CAS that installed it.
        let current = self.current.load(Ordering::Acquire);
        // SAFETY: installed values are leaked, never freed, so the pointer
        // stays valid; null is handled by `as_ref`.
        let slot = unsafe { current.as_ref() }?;
        // Relaxed: the epoch moves only in the child handler, before any
        // other code of the child runs.
        (slot.epoch == FORK_EPOCH.load(Ordering::Relaxed)).then_some(&slot.value)
    }

    /// This process's value, made with `make` on first use.
    pub fn get_or_make(&self, make: impl FnOnce() -> T) -> &T {
        // Before any value (and its locks) can exist: a fork while another
        // thread holds one of them must find the child handler registered.
        install_fork_hook();
        // Acquire: pairs with the release CAS that installed it.
        let seen = self.current.load(Ordering::Acquire);
        if let Some(value) = self.get() {
            return value;
        }
        // Relaxed: as in `get`.
        let epoch = FORK_EPOCH.load(Ordering::Relaxed);
        let fresh = Box::into_raw(Box::new(Epoch { epoch, value: make() }));
        // AcqRel: release publishes `fresh`; acquire reads a competing winner's.
        match self.current.compare_exchange(seen, fresh, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: `fresh` was just leaked and is now the installed value.
            Ok(_) => unsafe { &(*fresh).value },
            Err(winner) => {
                // SAFETY: `fresh` lost the race and was never shared; reclaim it.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: the winner is leaked, never freed, and of this epoch
                // (it replaced `seen`, which was null or of an older one).
                unsafe { &(*winner).value }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fork_local_is_made_once_per_epoch() {
        static VALUE: ForkLocal<u32> = ForkLocal::new();
        assert_eq!(VALUE.get(), None, "not made yet");
        assert_eq!(*VALUE.get_or_make(|| 7), 7);
        assert_eq!(*VALUE.get_or_make(|| unreachable!("made once")), 7);
        assert_eq!(VALUE.get(), Some(&7));
    }

    #[test]
    fn this_threads_listener_and_gate_are_told_apart_from_others() {
        let (gate, other) = (Gate::new(), Gate::new());
        assert!(!serving_on_this_thread(&gate) && !on_any_listener_thread());
        SERVING.with(|c| c.set(&gate as *const Gate as usize));
        CURRENT.with(|c| c.set(0x1000));
        assert!(serving_on_this_thread(&gate) && !serving_on_this_thread(&other));
        assert!(on_listener_thread(0x1000 as *const u8) && !on_listener_thread(0x2000 as *const u8));
        assert!(on_any_listener_thread());
        std::thread::spawn(move || assert!(!on_any_listener_thread(), "another thread")).join().unwrap();
        SERVING.with(|c| c.set(0));
        CURRENT.with(|c| c.set(0));
    }

    #[test]
    fn runs_once_and_again_after_an_unwinding_init() {
        let once = ForkSafeOnce::new();
        let caught = std::panic::catch_unwind(|| once.call_once(|| panic!("init failed")));
        assert!(caught.is_err());
        let mut runs = 0;
        once.call_once(|| runs += 1);
        once.call_once(|| runs += 1);
        assert_eq!(runs, 1);
    }

    #[test]
    fn an_unfinished_run_of_an_older_epoch_is_run_again() {
        let once = ForkSafeOnce::new();
        // As a child finds it: started by a thread of the parent (epoch - 1).
        let epoch = FORK_EPOCH.load(Ordering::Relaxed);
        once.state.store(epoch.wrapping_sub(1) << 2 | RUNNING, Ordering::Relaxed);
        let mut runs = 0;
        once.call_once(|| runs += 1);
        assert_eq!(runs, 1);
    }
}
