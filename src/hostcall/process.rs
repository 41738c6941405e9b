//! Process-wide state of the hostcall host: exit, fork epoch, live listener
//! threads, threads inside the doorbell wait, and which thread is a listener
//! (docs/process.md). Every part of the host reads these; only the registry's
//! hooks and the listener threads write them.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

use super::gate::Gate;
use crate::log::Level;

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
/// handler table with its DEVMEM books) stale: the child makes its own on
/// first use, and the parent's, with its possibly locked mutexes, is leaked.
extern "C" fn after_fork_in_child() {
    // Relaxed: the child has a single thread at this point.
    FORK_EPOCH.fetch_add(1, Ordering::Relaxed);
    LIVE_THREADS.store(0, Ordering::Relaxed);
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
}
