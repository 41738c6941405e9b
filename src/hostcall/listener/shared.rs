//! The state the registry and the listener threads share: `Listener` (the
//! doorbell, the published snapshot of buffers, the services, the helper's
//! watch and bell, the lost-ring watch's state, the counters) and `Entry` (one registered buffer). The process-wide
//! flags are in `hostcall::process`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::classifier::{BufferClass, HelperWatch};
use super::doorbell::Doorbell;
use super::lost_ring_watch::WatchState;
use crate::hostcall::counters::{BufferCounters, ListenerCounters, ListenerSnapshot};
use crate::hostcall::process::{EXITING, FORK_EPOCH, IN_DOORBELL_WAIT};
use crate::hostcall::protocol::Buffer;
use crate::hostcall::services::Services;
use crate::hostcall::snapshot::Published;
use crate::hostcall::test_hooks::TestHooks;
use hostcall_core::gate::Gate;
use hostcall_core::helper_bell::HelperBell;

/// One registered buffer.
pub struct Entry {
    /// The buffer address (registry key and printf's buffer key).
    pub key: usize,
    pub buffer: Buffer,
    /// The queue passed to enableHostcalls (only compared on disable).
    pub queue: usize,
    pub gate: Gate,
    /// Which listener thread serves it.
    pub(super) class: BufferClass,
    /// What the listener did for it (`hostcall::counters`).
    pub counters: BufferCounters,
}

impl Entry {
    /// `listener_counts`: the listener's counts now (the buffer's counters
    /// report the listener's waits and rings from here on).
    pub fn new(key: usize, buffer: Buffer, queue: usize, listener_counts: ListenerSnapshot) -> Entry {
        Entry {
            key,
            buffer,
            queue,
            gate: Gate::new(),
            class: BufferClass::new(),
            counters: BufferCounters::new(listener_counts),
        }
    }
}

/// One listener: its doorbell, the buffers it serves and its services,
/// shared by the registry and the listener's threads (main and helper).
pub struct Listener {
    doorbell: Doorbell,
    /// The helper thread's current visit (preemption fallback).
    pub(super) helper_watch: HelperWatch,
    /// Where the helper sleeps; the main listener rings it.
    pub(super) helper_bell: HelperBell,
    /// Pauses the main listener at chosen steps (tests only).
    pub(super) hooks: TestHooks,
    epoch: u64,
    stop: AtomicBool,
    /// The registry snapshot the listener serves.
    pub(super) published: Published<Arc<Entry>>,
    pub services: Services,
    /// The listener's own counts (rings seen, blocked waits).
    pub counters: ListenerCounters,
    /// What the lost-ring watch and the main listener's wait tell each other.
    pub(super) lost_ring_watch: WatchState,
}

impl Listener {
    pub fn new(doorbell: Doorbell) -> Listener {
        Listener {
            doorbell,
            helper_watch: HelperWatch::new(),
            helper_bell: HelperBell::new(),
            hooks: TestHooks::new(),
            // Relaxed: only this thread's own view of the epoch matters.
            epoch: FORK_EPOCH.load(Ordering::Relaxed),
            stop: AtomicBool::new(false),
            published: Published::new(),
            services: Services::new(),
            counters: ListenerCounters::default(),
            lost_ring_watch: WatchState::new(),
        }
    }

    /// The doorbell signal handle buffers carry.
    pub fn doorbell_handle(&self) -> u64 {
        self.doorbell.handle()
    }

    /// Replaces the snapshot the listener serves.
    pub fn publish(&self, entries: &[Arc<Entry>]) {
        self.published.publish(entries);
    }

    fn in_current_epoch(&self) -> bool {
        // Relaxed: the child handler runs before any other code of the child.
        self.epoch == FORK_EPOCH.load(Ordering::Relaxed)
    }

    pub(super) fn should_stop(&self) -> bool {
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

    pub(super) fn doorbell_load(&self) -> i64 {
        self.doorbell.load()
    }

    /// Blocked wait until the doorbell differs from `observed` or `timeout`
    /// passes; returns the value the wait saw last.
    pub(super) fn doorbell_wait_value(&self, observed: i64, timeout: Duration) -> i64 {
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
