//! The listener thread: waits on the shared doorbell signal and serves the
//! ready stacks of every registered buffer.
//!
//! # Waiting strategy (latency vs. idle CPU)
//!
//! A blocked HSA wait is woken through an interrupt on a real GPU, tens of
//! microseconds after the wave rings; waves often issue their next request
//! right after the previous answer. So after any work the listener keeps
//! polling the ready stacks for `POLL_WINDOW` (spinning briefly, then
//! yielding, like crossbeam's `Backoff::snooze`), and only then blocks on the
//! doorbell (`wait != last value`, `WAIT_TIMEOUT`). Idle, the listener sits in
//! that blocked wait and wakes once per `WAIT_TIMEOUT` to rescan: an idle
//! cost of one wake-up and one look per buffer every 100 ms (measured by the
//! benchmark: about 1 ms of CPU per 2 s with 8 buffers, 0.05 % of a core).
//!
//! The rescan on timeout (and the scan just before blocking) means the
//! doorbell is only a hint: a lost or coalesced ring delays a packet by at
//! most `WAIT_TIMEOUT`, it never strands it. The value compared against is
//! read (acquire) *before* the last scan, so a ring that lands between that
//! scan and the wait changes the value and the wait returns at once.
//!
//! # No lock while serving
//!
//! The listener works from a snapshot of the registry (`Arc<[Arc<Entry>]>`,
//! refreshed when `Shared::generation` moves); the registry's spin lock is
//! held only to clone or replace that `Arc`. Each buffer has a `Gate`
//! (protocol.rs) that `disableHostcalls` closes and waits on, so disabling one
//! buffer waits at most for the packet being served on that buffer, and
//! enabling never waits for services at all.
//!
//! # Slow services do not stall other buffers
//!
//! Services run inline on the listener thread (no hand-off cost on the fast
//! path). Each visit of a buffer is timed; when one takes long (a host
//! function or printf that blocks: `SLOW_VISIT`), that buffer is handed to a
//! helper thread (`amdgpu-hc-slow`, started on first need, same polling and
//! waiting strategy) and the main listener skips it; after `SLOW_DEMOTE_AFTER`
//! without a slow visit it comes back. Only the `SLOW_STREAK` visits that
//! revealed the buffer as slow delay the others. See `Role` and `scan`.
//!
//! # Stopping
//!
//! `stop` (last buffer disabled), process exit (`EXITING`, set by the
//! library's `.fini_array` hook), or being in a forked child
//! (`FORK_EPOCH` moved) end the loop. See registry.rs for who waits how long.

use core::ffi::c_void;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hsa_sys::*;

use super::buffer::DeviceBuffer;
use super::protocol::{drain_ready_packets, Gate};
use super::service::Services;
use crate::log::Level;

/// How long the listener keeps polling the ready stacks after it last found
/// work before it blocks on the doorbell. Longer: lower latency for waves
/// that call again soon, more CPU burnt after each burst (at most this much
/// per burst). Tuned by the benchmark (issue 4).
pub const POLL_WINDOW: Duration = Duration::from_micros(100);

/// Timeout of the blocked doorbell wait: the longest a packet whose ring was
/// lost waits, and the idle wake-up period (idle CPU ∝ 1 / this). 50 ms cost
/// 0.09–0.10 % of a core idle on the benchmark machine (issue 4's limit is
/// 0.1 %); 100 ms halves that. Must stay well below `EXIT_TIMEOUT`.
pub const WAIT_TIMEOUT: Duration = Duration::from_millis(100);

/// Spins (with `spin_loop` hints doubling per round) before the poll loop
/// starts yielding the CPU instead.
const SPIN_ROUNDS: u32 = 6;

/// A visit of one buffer (draining its ready stack) is *slow* when it took
/// longer than `SLOW_VISIT + SLOW_PER_PACKET × packets served`: a host
/// function or a printf that blocks. A buffer with `SLOW_STREAK` slow visits
/// in a row is handed to the helper thread, so it cannot delay the other
/// buffers again. A full 64-lane FUNCTION_CALL packet with a trivial function
/// takes 1–2 µs, so ordinary traffic never comes close (but preemption can:
/// see `scan`).
pub const SLOW_VISIT: Duration = Duration::from_micros(250);
const SLOW_PER_PACKET: Duration = Duration::from_micros(20);

/// Slow visits in a row (by the main listener) before a buffer is handed to
/// the helper: one slow visit can be a preemption rather than a slow service.
const SLOW_STREAK: u32 = 3;

/// A slow buffer whose visits have all been fast for this long goes back to
/// the main listener.
pub const SLOW_DEMOTE_AFTER: Duration = Duration::from_secs(1);

/// The origin of `clock_ns`.
fn clock_start() -> Instant {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Nanoseconds on a process-wide monotonic clock (slow-buffer bookkeeping).
fn clock_ns() -> u64 {
    clock_start().elapsed().as_nanos() as u64
}

/// Set by the `.fini_array` hook: the process is exiting (or the library is
/// being unloaded). Listeners stop; no HSA call is made any more (the HSA
/// runtime may already be torn down).
pub static EXITING: AtomicBool = AtomicBool::new(false);

/// Listener threads that have not finished yet.
pub static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// Bumped in a forked child: listeners (and signals) of an older epoch
/// belong to the parent.
pub static FORK_EPOCH: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// On a listener thread: the address of its `Shared`; 0 elsewhere.
    static CURRENT: Cell<usize> = const { Cell::new(0) };
    /// The address of the `Gate` this thread is inside (serving that
    /// buffer's packets); 0 when it is inside none.
    static SERVING: Cell<usize> = const { Cell::new(0) };
}

/// True when called on the listener thread owning `shared` (from a service).
pub fn on_listener_thread(shared: &Shared) -> bool {
    CURRENT.try_with(|c| c.get() == shared as *const Shared as usize).unwrap_or(false)
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

//===----------------------------------------------------------------------===//
// The doorbell signal
//===----------------------------------------------------------------------===//

/// HSA signal functions, resolved at run time (SPEC §3).
#[derive(Clone, Copy)]
pub struct SignalApi {
    create: pfn_hsa_signal_create,
    destroy: pfn_hsa_signal_destroy,
    load: pfn_hsa_signal_load,
    add: pfn_hsa_signal_add,
    wait: pfn_hsa_signal_wait,
    /// Wait-timeout ticks per second (HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY).
    ticks_per_second: u64,
}

fn resolve_first<F: Copy>(names: &[&core::ffi::CStr]) -> Result<F, String> {
    let mut last = String::new();
    for name in names {
        // SAFETY: every caller passes names whose C signature is `F`.
        match unsafe { crate::hsa::resolve_fn::<F>(name) } {
            Ok(f) => return Ok(f),
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl SignalApi {
    pub fn resolve() -> Result<SignalApi, String> {
        let create = resolve_first::<pfn_hsa_signal_create>(&[c"hsa_signal_create"])?;
        let destroy = resolve_first::<pfn_hsa_signal_destroy>(&[c"hsa_signal_destroy"])?;
        let load = resolve_first::<pfn_hsa_signal_load>(&[
            c"hsa_signal_load_scacquire",
            c"hsa_signal_load_acquire",
        ])?;
        let add =
            resolve_first::<pfn_hsa_signal_add>(&[c"hsa_signal_add_screlease", c"hsa_signal_add_release"])?;
        let wait = resolve_first::<pfn_hsa_signal_wait>(&[
            c"hsa_signal_wait_scacquire",
            c"hsa_signal_wait_acquire",
        ])?;
        let mut ticks_per_second = 1_000_000_000u64;
        if let Ok(get_info) = resolve_first::<pfn_hsa_system_get_info>(&[c"hsa_system_get_info"]) {
            let mut value = 0u64;
            // SAFETY: TIMESTAMP_FREQUENCY writes one uint64_t to the pointer.
            let status = unsafe {
                get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, (&mut value as *mut u64).cast::<c_void>())
            };
            if status == HSA_STATUS_SUCCESS && value > 0 {
                ticks_per_second = value;
            } else {
                crate::log!(
                    Level::Info,
                    "hostcall: hsa_system_get_info(TIMESTAMP_FREQUENCY) failed ({:#x}); assuming 1 GHz",
                    status
                );
            }
        }
        Ok(SignalApi { create, destroy, load, add, wait, ticks_per_second })
    }

    /// Creates the doorbell: value 1, no consumer restriction (as upstream).
    pub fn create_doorbell(&self) -> Result<hsa_signal_t, String> {
        let mut signal = hsa_signal_t::default();
        // SAFETY: resolved hsa_signal_create; `signal` is writable; NULL consumers with count 0.
        let status = unsafe { (self.create)(1, 0, core::ptr::null(), &mut signal) };
        if status != HSA_STATUS_SUCCESS {
            return Err(format!(
                "hsa_signal_create failed: {} ({:#x})",
                hsa_status_name(status).unwrap_or("unknown status"),
                status
            ));
        }
        Ok(signal)
    }

    fn timeout_ticks(&self, timeout: Duration) -> u64 {
        (timeout.as_nanos() * u128::from(self.ticks_per_second) / 1_000_000_000).min(u64::MAX as u128) as u64
    }
}

//===----------------------------------------------------------------------===//
// State shared between the registry and one listener thread
//===----------------------------------------------------------------------===//

/// One registered buffer.
pub struct Entry {
    /// The buffer address (registry key and printf's buffer key).
    pub key: usize,
    pub buffer: DeviceBuffer,
    /// The queue passed to enableHostcalls (only compared on disable).
    pub queue: usize,
    pub gate: Gate,
    /// Served by the helper thread rather than the main listener (its
    /// services were seen to take long; see `Role`).
    slow: AtomicBool,
    /// When a visit of this buffer was last slow (`clock_ns`).
    last_slow_ns: AtomicU64,
    /// Slow visits in a row by the main listener (while not marked slow).
    slow_streak: AtomicU32,
}

impl Entry {
    pub fn new(key: usize, buffer: DeviceBuffer, queue: usize) -> Entry {
        Entry {
            key,
            buffer,
            queue,
            gate: Gate::new(),
            slow: AtomicBool::new(false),
            last_slow_ns: AtomicU64::new(0),
            slow_streak: AtomicU32::new(0),
        }
    }

    fn is_slow(&self) -> bool {
        // Relaxed: only decides which thread serves the buffer; the gate
        // orders the serving itself, and a stale value only means one more
        // visit by the other thread.
        self.slow.load(Ordering::Relaxed)
    }

    fn set_slow(&self, slow: bool) {
        // Relaxed: see `is_slow`.
        self.slow.store(slow, Ordering::Relaxed);
    }
}

pub struct Shared {
    /// When the helper's current visit began (`clock_ns() + 1`), 0 when the
    /// helper is not inside a visit.
    helper_visit_start_ns: AtomicU64,
    api: SignalApi,
    pub signal: hsa_signal_t,
    epoch: u64,
    stop: AtomicBool,
    /// Bumped (release) after `published` changes.
    generation: AtomicU64,
    /// The registry snapshot the listener serves. Held only to clone/replace.
    published: spin::Mutex<Arc<[Arc<Entry>]>>,
    pub services: Services,
}

impl Shared {
    pub fn new(api: SignalApi, signal: hsa_signal_t) -> Shared {
        Shared {
            helper_visit_start_ns: AtomicU64::new(0),
            api,
            signal,
            // Relaxed: only this thread's own view of the epoch matters.
            epoch: FORK_EPOCH.load(Ordering::Relaxed),
            stop: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            published: spin::Mutex::new(Arc::from(Vec::new())),
            services: Services::new(),
        }
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

    pub(super) fn should_stop(&self) -> bool {
        // Acquire: pairs with `request_stop`'s release (nothing else rides on it).
        self.stop.load(Ordering::Acquire)
            // Relaxed: a hint; the exit hook waits for RUNNING to drop.
            || EXITING.load(Ordering::Relaxed)
            || !self.in_current_epoch()
    }

    fn helper_visit_begins(&self, start: Instant) {
        let since = start.saturating_duration_since(clock_start()).as_nanos() as u64;
        // Relaxed: a hint for the main listener (see `scan`); the buffers
        // themselves are protected by their gates.
        self.helper_visit_start_ns.store(since + 1, Ordering::Relaxed);
    }

    fn helper_visit_ends(&self) {
        // Relaxed: as above.
        self.helper_visit_start_ns.store(0, Ordering::Relaxed);
    }

    /// True when the helper has been inside one visit for longer than
    /// `SLOW_VISIT` (blocked in a slow service).
    fn helper_stuck(&self) -> bool {
        // Relaxed: as above.
        let start = self.helper_visit_start_ns.load(Ordering::Relaxed);
        start != 0 && clock_ns().saturating_sub(start - 1) > SLOW_VISIT.as_nanos() as u64
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
    }

    /// Changes the doorbell value so a blocked wait returns.
    pub fn ring(&self) {
        if self.hsa_usable() {
            // SAFETY: resolved hsa_signal_add_screlease on our live signal.
            unsafe { (self.api.add)(self.signal, 1) };
        }
    }

    pub(super) fn doorbell_load(&self) -> i64 {
        // SAFETY: resolved hsa_signal_load_scacquire on our live signal. Acquire:
        // pairs with the waves' release add, so a push that preceded a ring we
        // observe is seen by the scan that follows.
        unsafe { (self.api.load)(self.signal) }
    }

    /// Blocked wait until the doorbell differs from `observed` or `timeout`
    /// passes; returns the value the wait saw last.
    pub(super) fn doorbell_wait_value(&self, observed: i64, timeout: Duration) -> i64 {
        // SAFETY: resolved hsa_signal_wait_scacquire on our live signal.
        unsafe {
            (self.api.wait)(
                self.signal,
                HSA_SIGNAL_CONDITION_NE,
                observed,
                self.api.timeout_ticks(timeout),
                HSA_WAIT_STATE_BLOCKED,
            )
        }
    }

    fn doorbell_wait(&self, observed: i64, timeout: Duration) {
        self.doorbell_wait_value(observed, timeout);
    }

    /// The current registry snapshot.
    pub(super) fn snapshot(&self) -> Arc<[Arc<Entry>]> {
        self.published.lock().clone()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.hsa_usable() {
            // SAFETY: resolved hsa_signal_destroy; no listener uses the signal any
            // more (this is the last reference) and every buffer naming it was disabled.
            let status = unsafe { (self.api.destroy)(self.signal) };
            if status != HSA_STATUS_SUCCESS {
                crate::log!(Level::Warning, "hostcall: hsa_signal_destroy failed ({:#x})", status);
            }
        }
    }
}

//===----------------------------------------------------------------------===//
// The thread
//===----------------------------------------------------------------------===//

/// Starts a listener thread for `shared`. `RUNNING` counts it until it ends.
pub fn spawn(shared: Arc<Shared>) -> Result<std::thread::JoinHandle<()>, String> {
    // Relaxed: a counter; the exit hook's acquire load pairs with the decrement.
    RUNNING.fetch_add(1, Ordering::Relaxed);
    let strategy = Strategy::from_env();
    let result = std::thread::Builder::new()
        .name(strategy.thread_name().into())
        .spawn(move || thread_main(shared, strategy));
    result.map_err(|e| {
        RUNNING.fetch_sub(1, Ordering::Relaxed);
        format!("cannot start the listener thread: {e}")
    })
}

/// Which loop a listener thread runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// The product listener (`run`).
    Ours,
    /// The benchmark's baseline (`baseline::run`, `bench-baseline` feature).
    #[cfg(feature = "bench-baseline")]
    Baseline,
}

impl Strategy {
    fn from_env() -> Strategy {
        #[cfg(feature = "bench-baseline")]
        if super::baseline::selected() {
            return Strategy::Baseline;
        }
        Strategy::Ours
    }

    /// The thread name (Linux comm, at most 15 bytes); the benchmark finds
    /// the listener's CPU time by it.
    fn thread_name(self) -> &'static str {
        match self {
            Strategy::Ours => "amdgpu-hostcall",
            #[cfg(feature = "bench-baseline")]
            Strategy::Baseline => "amdgpu-hc-base",
        }
    }

    fn run(self, shared: &Arc<Shared>) {
        match self {
            Strategy::Ours => run(shared, Role::Main),
            #[cfg(feature = "bench-baseline")]
            Strategy::Baseline => super::baseline::run(shared),
        }
    }
}

fn thread_main(shared: Arc<Shared>, strategy: Strategy) {
    let _ = CURRENT.try_with(|c| c.set(Arc::as_ptr(&shared) as usize));
    crate::log!(Level::Info, "hostcall: listener started (doorbell signal {:#x})", shared.signal.handle);
    while !shared.should_stop() {
        // The loop body never panics by design (services are caught per lane);
        // this catch keeps the listener alive should that ever be wrong.
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| strategy.run(&shared))) {
            Ok(()) => break,
            Err(payload) => crate::log!(
                Level::Error,
                "hostcall listener: internal panic: {}; the listener keeps serving",
                crate::ffi::panic::panic_message(&*payload)
            ),
        }
    }
    crate::log!(Level::Info, "hostcall: listener stopped");
    let _ = CURRENT.try_with(|c| c.set(0));
    drop(shared);
    // Release: pairs with the exit hook's acquire load of RUNNING.
    RUNNING.fetch_sub(1, Ordering::Release);
}

/// Marks this thread as inside the gate (`serving_on_this_thread`) and
/// leaves the gate when dropped (also on unwind).
struct Inside<'a>(&'a Gate);

impl<'a> Inside<'a> {
    /// After a successful `gate.enter()`.
    fn new(gate: &'a Gate) -> Inside<'a> {
        let _ = SERVING.try_with(|c| c.set(gate as *const Gate as usize));
        Inside(gate)
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let _ = SERVING.try_with(|c| c.set(0));
        self.0.leave();
    }
}

/// Which buffers a listener thread serves.
///
/// The main listener serves every buffer except the slow ones; the helper
/// (started the first time a buffer turns out slow, thread name
/// `amdgpu-hc-slow`) serves only those, with the same polling and waiting
/// strategy. So a host function that blocks on one buffer (a 1 ms call, a
/// printf into a full pipe) delays that buffer's own requests, not the other
/// buffers' — after the `SLOW_STREAK` visits that revealed it. (One helper
/// serves all slow buffers: two buffers that block at the same time delay
/// each other, and the main listener, which also takes slow buffers while the
/// helper is stuck, may then be held up by the second one.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    Main,
    Helper,
}

/// What one scan found.
#[derive(Default)]
struct ScanResult {
    worked: bool,
    /// The main listener just found a buffer slow: the helper is needed.
    found_slow: bool,
}

/// Serves the buffers of `role` once. `handoff`: the main listener may mark
/// buffers slow (a helper runs or can be started).
///
/// Classification is by wall time, which preemption also inflates (on a
/// loaded machine a thread can lose its core for milliseconds mid-visit). So
/// a buffer moves to the helper only after `SLOW_STREAK` slow visits in a
/// row, and while the helper is stuck in one visit for longer than
/// `SLOW_VISIT`, the main listener also serves the other slow-marked buffers:
/// a fast buffer marked slow by mistake is never left behind a blocked one.
fn scan(shared: &Shared, snapshot: &[Arc<Entry>], role: Role, handoff: bool) -> ScanResult {
    let mut result = ScanResult::default();
    // Main listener: is the helper stuck in a visit? Computed on first need.
    let mut helper_stuck: Option<bool> = None;
    for entry in snapshot {
        let marked_slow = entry.is_slow();
        let mine = match role {
            Role::Helper => marked_slow,
            Role::Main => !marked_slow || *helper_stuck.get_or_insert_with(|| shared.helper_stuck()),
        };
        if !mine {
            continue;
        }
        // No peek at the ready stack before entering the gate: once disable
        // has closed the gate and seen it idle, the buffer may already be
        // freed although this snapshot still lists it. `serve_entry` enters
        // first; `drain_ready` then peeks (relaxed) before any write.
        let start = Instant::now();
        if role == Role::Helper {
            shared.helper_visit_begins(start);
        }
        let served = serve_entry(shared, entry);
        if role == Role::Helper {
            shared.helper_visit_ends();
        }
        if served == 0 {
            continue;
        }
        result.worked = true;
        let took = start.elapsed();
        let slow = took > SLOW_VISIT + SLOW_PER_PACKET * served;
        if marked_slow {
            if slow {
                // Relaxed: a timestamp only read by these heuristics; a stale
                // value delays a demotion, nothing else.
                entry.last_slow_ns.store(clock_ns(), Ordering::Relaxed);
            } else {
                // Relaxed: as above.
                let last = entry.last_slow_ns.load(Ordering::Relaxed);
                if clock_ns().saturating_sub(last) > SLOW_DEMOTE_AFTER.as_nanos() as u64 {
                    entry.set_slow(false);
                    crate::log!(
                        Level::Info,
                        "hostcall: buffer {:#x} has been fast for {:?}; back to the main listener",
                        entry.key,
                        SLOW_DEMOTE_AFTER
                    );
                }
            }
        } else if role == Role::Main && handoff {
            // Relaxed: only this thread counts the streak of an unmarked buffer.
            let streak = entry.slow_streak.load(Ordering::Relaxed);
            if !slow {
                if streak != 0 {
                    entry.slow_streak.store(0, Ordering::Relaxed);
                }
            } else if streak + 1 < SLOW_STREAK {
                entry.slow_streak.store(streak + 1, Ordering::Relaxed);
            } else {
                entry.slow_streak.store(0, Ordering::Relaxed);
                // Relaxed: as above.
                entry.last_slow_ns.store(clock_ns(), Ordering::Relaxed);
                entry.set_slow(true);
                result.found_slow = true;
                crate::log!(
                    Level::Info,
                    "hostcall: buffer {:#x}: {} slow visits in a row (last: {} packet(s) in \
                     {:?}); the helper thread serves it from now on",
                    entry.key,
                    SLOW_STREAK,
                    served,
                    took
                );
            }
        }
    }
    result
}

/// Detaches and serves one buffer's ready stack (if its gate lets us in);
/// returns the number of packets served (a dropped bad pointer counts as 1).
pub(super) fn serve_entry(shared: &Shared, entry: &Entry) -> u32 {
    if !entry.gate.enter() {
        return 0;
    }
    let _inside = Inside::new(&entry.gate);
    let stats = drain_ready_packets(
        &entry.buffer,
        |packet| shared.services.serve_packet(packet),
        || !entry.gate.is_closed() && !EXITING.load(Ordering::Relaxed),
    );
    if let Some(ptr) = stats.bad_pointer {
        crate::log!(
            Level::Error,
            "hostcall: buffer {:#x}: ready stack holds tagged pointer {:#x} whose index {} is not \
             below the packet count {}; it and the packets behind it are dropped, never touched",
            entry.key,
            ptr,
            ptr & entry.buffer.index_mask(),
            entry.buffer.packets()
        );
    }
    if stats.cycle {
        crate::log!(
            Level::Error,
            "hostcall: buffer {:#x}: ready stack chain reaches a packet without READY or is longer \
             than its {} packets (a cycle or corruption); walk stopped, each packet served at most once",
            entry.key,
            entry.buffer.packets()
        );
    }
    if stats.stopped {
        crate::log!(
            Level::Warning,
            "hostcall: buffer {:#x} is being disabled (or the process is exiting) while packets of \
             it were still waiting; they are abandoned and their waves get no answer",
            entry.key
        );
    }
    if stats.did_work() {
        stats.served.max(1)
    } else {
        0
    }
}

/// Backoff for the poll window: exponential spin, then yield.
fn snooze(step: &mut u32) {
    if *step < SPIN_ROUNDS {
        for _ in 0..(1u32 << *step) {
            core::hint::spin_loop();
        }
        *step += 1;
    } else {
        std::thread::yield_now();
    }
}

/// Starts the helper thread for slow buffers; None if it cannot start (then
/// the main listener keeps serving every buffer itself).
fn start_helper(shared: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    // Relaxed: a counter; see `spawn`.
    RUNNING.fetch_add(1, Ordering::Relaxed);
    let helper_shared = Arc::clone(shared);
    let result = std::thread::Builder::new().name("amdgpu-hc-slow".into()).spawn(move || {
        let _ = CURRENT.try_with(|c| c.set(Arc::as_ptr(&helper_shared) as usize));
        while !helper_shared.should_stop() {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&helper_shared, Role::Helper)))
            {
                Ok(()) => break,
                Err(payload) => crate::log!(
                    Level::Error,
                    "hostcall helper: internal panic: {}; the helper keeps serving",
                    crate::ffi::panic::panic_message(&*payload)
                ),
            }
        }
        let _ = CURRENT.try_with(|c| c.set(0));
        drop(helper_shared);
        // Release: pairs with the exit hook's acquire load of RUNNING.
        RUNNING.fetch_sub(1, Ordering::Release);
    });
    match result {
        Ok(handle) => Some(handle),
        Err(e) => {
            // Relaxed: as above.
            RUNNING.fetch_sub(1, Ordering::Relaxed);
            crate::log!(
                Level::Warning,
                "hostcall: cannot start the helper thread for slow buffers ({e}); the listener \
                 serves them itself"
            );
            None
        }
    }
}

/// A listener thread's loop (main listener or helper); returns when the
/// listener must stop. The main listener joins its helper before returning.
fn run(shared: &Arc<Shared>, role: Role) {
    let mut helper: Option<std::thread::JoinHandle<()>> = None;
    // The main listener hands slow buffers to a helper unless starting one failed.
    let mut handoff = role == Role::Main;
    run_loop(shared, role, &mut handoff, &mut helper);
    if let Some(handle) = helper {
        // The helper sees the same stop conditions and the same stop ring.
        if handle.join().is_err() {
            crate::log!(Level::Error, "hostcall: the helper thread ended with a panic");
        }
    }
}

fn run_loop(
    shared: &Arc<Shared>,
    role: Role,
    handoff: &mut bool,
    helper: &mut Option<std::thread::JoinHandle<()>>,
) {
    let mut snapshot: Arc<[Arc<Entry>]> = Arc::from(Vec::new());
    let mut seen_generation = u64::MAX;
    let mut poll_until: Option<Instant> = None;
    let mut step = 0u32;
    loop {
        if shared.should_stop() {
            return;
        }
        // Acquire: pairs with `publish`'s release increment.
        let generation = shared.generation.load(Ordering::Acquire);
        if generation != seen_generation {
            snapshot = shared.snapshot();
            seen_generation = generation;
        }
        let found = scan(shared, &snapshot, role, *handoff);
        if found.found_slow && helper.is_none() {
            *helper = start_helper(shared);
            if helper.is_none() {
                *handoff = false;
                for entry in snapshot.iter() {
                    entry.set_slow(false);
                }
            }
        }
        if found.worked {
            poll_until = Some(Instant::now() + POLL_WINDOW);
            step = 0;
            continue;
        }
        if let Some(until) = poll_until {
            if Instant::now() < until {
                snooze(&mut step);
                continue;
            }
            poll_until = None;
        }
        // About to block: read the doorbell first, then look once more, so a
        // ring after this load makes the wait return at once and a ring before
        // it is covered by this scan.
        let observed = shared.doorbell_load();
        if scan(shared, &snapshot, role, false).worked {
            poll_until = Some(Instant::now() + POLL_WINDOW);
            step = 0;
            continue;
        }
        if shared.should_stop() {
            return;
        }
        shared.doorbell_wait(observed, WAIT_TIMEOUT);
    }
}
