//! The listener: threads that wait on the shared doorbell signal and serve
//! the ready stacks of every registered buffer.
//!
//! * `doorbell`    — the HSA signal and its blocked wait (all HSA calls).
//! * `classifier`  — which thread serves which buffer (pure, clock injected).
//! * `poll_window` — when a thread polls and when it blocks (pure, clock injected).
//! * `serve_loop`  — the threads: polling, waiting, visiting buffers.
//!
//! This file holds the state the registry and the listener threads share
//! (`Listener`, `Entry`) and the process-wide flags.
//!
//! # Waiting strategy (latency vs. idle CPU)
//!
//! A blocked HSA wait is woken through an interrupt on a real GPU, tens of
//! microseconds after the wave rings; waves often issue their next request
//! right after the previous answer. So after work the listener keeps polling
//! the ready stacks (spinning briefly, then yielding, like crossbeam's
//! `Backoff::snooze`) for as long as `poll_window::PollWindow` says: only while
//! recent requests came closer together than ROCr's blocked wait polls by
//! itself (its first 200 µs) plus about two wake-ups, for at most 100 µs.
//! Then it blocks on the doorbell (`wait != last value`,
//! `tunables::WAIT_TIMEOUT_MS`, 100 ms). Idle, the listener sits in
//! that blocked wait and wakes at its timeout to rescan; each timeout with
//! nothing found makes the next wait 4 times longer, up to 1 s
//! (`poll_window::IdleTimeout`): an idle listener costs one wake-up and one
//! look per buffer per second. (Each wait also costs ROCr's 200 µs poll, and
//! on the benchmark's virtual machine a wake-up after a long sleep costs
//! 0.2–1 ms of CPU whatever the thread does; the benchmark measured 0.85 ms
//! per 2 s with 8 buffers.)
//!
//! Phase-bit buffers add one rule: their waves ring at most once per ~10 µs
//! per device, so a request may come without a ring shortly after another
//! wave's ring. While one is enabled a thread blocks only once the doorbell
//! value has been still for twice that (`poll_window::DoorbellQuiet`).
//!
//! The rescan on timeout (and the scan just before blocking) means the
//! doorbell is only a hint: a lost or coalesced ring delays a packet by at
//! most 100 ms while requests come, at most 1 s after a
//! second of silence; it never strands it. The value compared against is
//! read (acquire) *before* the last scan, so a ring that lands between that
//! scan and the wait changes the value and the wait returns at once.
//!
//! # No lock while serving
//!
//! The listener works from a snapshot of the registry (`Arc<[Arc<Entry>]>`,
//! refreshed when `Listener::generation` moves); the registry's spin lock is
//! held only to clone or replace that `Arc`. Each buffer has a `Gate`
//! (`hostcall::gate`) that `disableHostcalls` closes and waits on, so disabling one
//! buffer waits at most for the packet being served on that buffer, and
//! enabling never waits for services at all.
//!
//! # Slow services do not stall other buffers
//!
//! Services run inline on the listener thread (no hand-off cost on the fast
//! path). Each visit of a buffer is timed; a buffer whose visits keep taking
//! long (a host function or printf that blocks) is handed to a helper thread
//! (`amdgpu-hc-slow`, started on first need, same polling strategy) and
//! comes back once it has been fast for a while. The rules are in
//! `classifier`. Only the main listener waits on the HSA doorbell; the helper
//! sleeps on its own bell, which the main listener rings when it sees work on
//! a buffer the helper serves (`helper_bell`).
//!
//! # Stopping
//!
//! `request_stop` (last buffer disabled), process exit (`EXITING`, set by the
//! library's `.fini_array` hook), or being in a forked child (`FORK_EPOCH`
//! moved) end the loop. See registry.rs for who waits how long.

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
