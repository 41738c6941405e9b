//! The listener: threads that wait on the shared doorbell signal and serve
//! every registered buffer, in either protocol.
//!
//! * `doorbell`    — the HSA signal and its blocked wait (all HSA calls).
//! * `classifier`  — which thread serves which buffer (pure, clock injected).
//! * `poll_window` — when a thread polls and when it blocks (pure, clock injected).
//! * `serve_loop`  — the threads: polling, waiting, visiting buffers.
//! * `helper_bell` — where the slow-buffer helper sleeps (model-checked).
//!
//! This file holds the state the registry and the listener threads share
//! (`Listener`, `Entry`); the process-wide flags are in `hostcall::process`.
//!
//! The waiting strategy (poll after work while requests come often, then a
//! blocked doorbell wait whose timeout grows while idle; the doorbell is only
//! a hint), the lock-free snapshot the threads serve from, the slow-buffer
//! helper and how the threads stop are described in docs/listener.md; exit
//! and fork in docs/process.md.

mod classifier;
mod doorbell;
pub mod helper_bell;
mod poll_window;
mod serve_loop;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use doorbell::{Doorbell, SignalApi};
pub use serve_loop::spawn;

use super::gate::Gate;
use super::process::{EXITING, FORK_EPOCH, IN_DOORBELL_WAIT};
use super::protocol::Buffer;
use super::services::Services;
use classifier::{BufferClass, HelperWatch};

/// One registered buffer.
pub struct Entry {
    /// The buffer address (registry key and printf's buffer key).
    pub key: usize,
    pub buffer: Buffer,
    /// The queue passed to enableHostcalls (only compared on disable).
    pub queue: usize,
    pub gate: Gate,
    /// Which listener thread serves it.
    class: BufferClass,
}

impl Entry {
    pub fn new(key: usize, buffer: Buffer, queue: usize) -> Entry {
        Entry { key, buffer, queue, gate: Gate::new(), class: BufferClass::new() }
    }
}

/// One listener: its doorbell, the buffers it serves and its services,
/// shared by the registry and the listener's threads (main and helper).
pub struct Listener {
    doorbell: Doorbell,
    /// The helper thread's current visit (preemption fallback).
    helper_watch: HelperWatch,
    /// Where the helper sleeps; the main listener rings it.
    helper_bell: helper_bell::HelperBell,
    epoch: u64,
    stop: AtomicBool,
    /// Bumped (release) after `published` changes.
    generation: AtomicU64,
    /// The registry snapshot the listener serves. Held only to clone/replace.
    published: spin::Mutex<Arc<[Arc<Entry>]>>,
    pub services: Services,
}

impl Listener {
    pub fn new(doorbell: Doorbell) -> Listener {
        Listener {
            doorbell,
            helper_watch: HelperWatch::new(),
            helper_bell: helper_bell::HelperBell::new(),
            // Relaxed: only this thread's own view of the epoch matters.
            epoch: FORK_EPOCH.load(Ordering::Relaxed),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            published: spin::Mutex::new(Arc::from(Vec::new())),
            services: Services::new(),
        }
    }

    /// The doorbell signal handle buffers carry.
    pub fn doorbell_handle(&self) -> u64 {
        self.doorbell.handle()
    }

    /// Replaces the snapshot the listener serves.
    pub fn publish(&self, entries: &[Arc<Entry>]) {
        *self.published.lock() = entries.to_vec().into();
        // Release: pairs with the listener's acquire load; it then takes the
        // lock, which orders the new snapshot (and the buffers' initialization) anyway.
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn in_current_epoch(&self) -> bool {
        // Relaxed: the child handler runs before any other code of the child.
        self.epoch == FORK_EPOCH.load(Ordering::Relaxed)
    }

    fn should_stop(&self) -> bool {
        // Acquire: pairs with `request_stop`'s release (nothing else rides on it).
        self.stop.load(Ordering::Acquire)
            // Relaxed: a hint; the exit hook waits for LIVE_THREADS to drop.
            || EXITING.load(Ordering::Relaxed)
            || !self.in_current_epoch()
    }

    /// May HSA be called for this signal? Not at exit, not in a forked child.
    fn hsa_usable(&self) -> bool {
        !EXITING.load(Ordering::Relaxed) && self.in_current_epoch()
    }

    /// Asks the listener to stop and wakes it.
    pub fn request_stop(&self) {
        // Release: see should_stop.
        self.stop.store(true, Ordering::Release);
        self.ring();
        self.wake_helper();
    }

    /// Wakes the helper thread (if it sleeps). Not in a forked child: the
    /// bell's lock may have been held by a thread of the parent at the fork.
    pub(super) fn wake_helper(&self) {
        if self.in_current_epoch() {
            self.helper_bell.ring();
        }
    }

    /// At process exit (`EXITING` already set), before the HSA runtime's
    /// teardown: wakes threads blocked on the doorbell so they leave the HSA
    /// wait and their loop now, rather than at the wait's timeout. Rings only
    /// when the runtime still answers (the application may have shut it
    /// down); otherwise the threads leave at their timeout as before.
    pub fn wake_for_exit(&self) -> Result<(), String> {
        if !self.in_current_epoch() {
            return Err("the listener belongs to the parent of this forked process".into());
        }
        // The helper sleeps on its own bell: waking it needs no HSA call.
        self.wake_helper();
        self.doorbell.runtime_initialized()?;
        self.doorbell.ring();
        Ok(())
    }

    /// Changes the doorbell value so a blocked wait returns.
    pub fn ring(&self) {
        if self.hsa_usable() {
            self.doorbell.ring();
        }
    }

    fn doorbell_load(&self) -> i64 {
        self.doorbell.load()
    }

    /// Blocked wait until the doorbell differs from `observed` or `timeout`
    /// passes; returns the value the wait saw last.
    fn doorbell_wait_value(&self, observed: i64, timeout: Duration) -> i64 {
        // SeqCst, with the SeqCst load of EXITING below and the exit hook's
        // SeqCst store of EXITING and load of this counter: either this
        // thread sees EXITING and does not wait, or the hook sees it counted.
        IN_DOORBELL_WAIT.fetch_add(1, Ordering::SeqCst);
        let value = if EXITING.load(Ordering::SeqCst) {
            observed
        } else {
            self.doorbell.wait_while_equal(observed, timeout)
        };
        // Release: pairs with the exit hook's acquire load; the wait's HSA
        // calls are over before the count drops.
        IN_DOORBELL_WAIT.fetch_sub(1, Ordering::Release);
        value
    }

    /// The current registry snapshot.
    fn snapshot(&self) -> Arc<[Arc<Entry>]> {
        self.published.lock().clone()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if self.hsa_usable() {
            // No listener thread uses the signal any more (this is the last
            // reference) and every buffer naming it was disabled.
            self.doorbell.destroy();
        }
    }
}
