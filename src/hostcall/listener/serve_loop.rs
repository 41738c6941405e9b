//! The listener threads: the main listener (started with the first enabled
//! buffer) and the helper for slow buffers (started on first need), their
//! poll-then-block loop and the visit of one buffer.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::classifier::{Clock, MonotonicClock, Role, Transition, SLOW_DEMOTE_AFTER, SLOW_STREAK};
use super::poll_window::{DoorbellQuiet, IdleTimeout, PollWindow, YieldPacer};
use super::{Entry, Listener};
use crate::hostcall::gate::Gate;
use crate::hostcall::process::{CURRENT, EXITING, LIVE_THREADS, SERVING};
use crate::hostcall::protocol::classic::buffer::DeviceBuffer;
use crate::hostcall::protocol::classic::serve::{take_ready_packets, DrainStats};
use crate::hostcall::protocol::phase_bit::serve::{serve_phases, PendingPhasePacket};
use crate::hostcall::protocol::Buffer;
use crate::log::{panic_message, Level};

/// Starts the main listener thread of `listener`. `LIVE_THREADS` counts it until it ends.
/// Its thread name (Linux comm, at most 15 bytes) is what the benchmark
/// finds the listener's CPU time by.
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

/// What one scan found.
#[derive(Default)]
struct ScanResult {
    /// When (clock ns) the last visit that found work ended; None: no work.
    worked_at: Option<u64>,
    /// Packets served (over all buffers).
    served: u32,
    /// The main listener just moved a buffer to the helper: the helper is needed.
    found_slow: bool,
}

/// Serves the buffers of `role` once. `may_hand_off`: the main listener may
/// move buffers to the helper (one runs or can be started).
/// `rung`: the doorbell moved since the last scan (then the only buffer of a
/// snapshot of one is swapped without a peek first). `last_now`: the caller's
/// latest clock reading, if it has a recent one: a visit that finds work
/// starts at the latest reading (a clock read costs more than the gate and
/// the peek between; the classifier's limits are hundreds of µs).
fn scan(
    listener: &Listener,
    snapshot: &[Arc<Entry>],
    role: Role,
    may_hand_off: bool,
    rung: bool,
    mut last_now: Option<u64>,
) -> ScanResult {
    let expect_work = rung && snapshot.len() == 1;
    if rung && snapshot.len() > 1 {
        // Some buffer has work: ask for every ready stack's line at once, so
        // the transfers overlap instead of one per visit in turn.
        for entry in snapshot {
            if let Buffer::Classic(buffer) = &entry.buffer {
                buffer.prefetch_ready_stack();
            }
        }
    }
    let clock = MonotonicClock;
    let mut result = ScanResult::default();
    // Main listener: is the helper stuck in a visit? Computed on first need.
    let mut helper_stuck: Option<bool> = None;
    for entry in snapshot {
        let mine = entry.class.visited_by(role, || {
            *helper_stuck.get_or_insert_with(|| listener.helper_watch.stuck(clock.now()))
        });
        if !mine {
            // A buffer on the helper, which sleeps on its own bell: ring it
            // when the buffer has work (the doorbell only wakes this thread).
            if role == Role::Main && has_work_for_helper(entry) {
                listener.helper_bell.ring();
            }
            continue;
        }
        // The main listener serving a buffer of the helper's: only while the
        // helper is stuck in a visit, checked again inside the gate.
        let plan = VisitPlan {
            expect_work,
            start_hint: last_now,
            fallback: role == Role::Main && entry.class.on_helper(),
        };
        let Some(Visit { served, start }) = serve_entry(listener, entry, role, &clock, plan) else {
            continue;
        };
        let now = clock.now();
        last_now = Some(now);
        result.worked_at = Some(now);
        result.served += served;
        let took = now.saturating_sub(start);
        match entry.class.record_visit(role, may_hand_off, served, took, now) {
            Transition::ToHelper => {
                result.found_slow = true;
                crate::log!(
                    Level::Info,
                    "hostcall: buffer {:#x}: {} slow visits in a row (last: {} packet(s) in {} µs); \
                     the helper thread serves it from now on",
                    entry.key,
                    SLOW_STREAK,
                    served,
                    took / 1000
                );
            }
            Transition::BackToMain => crate::log!(
                Level::Info,
                "hostcall: buffer {:#x} has been fast for {:?}; back to the main listener",
                entry.key,
                SLOW_DEMOTE_AFTER
            ),
            Transition::None | Transition::StreakGrew(_) | Transition::StreakReset => {}
        }
    }
    result
}

/// The main listener's look at a buffer on the helper: does it hold work?
/// Inside the gate (the buffer may be being freed otherwise); false when the
/// gate is closed or the helper is inside (then it is awake anyway).
fn has_work_for_helper(entry: &Entry) -> bool {
    if !entry.gate.enter() {
        return false;
    }
    let work = entry.buffer.has_waiting_requests();
    entry.gate.leave();
    work
}

/// A visit of one buffer that found work.
struct Visit {
    /// Packets served (a dropped bad pointer counts as 1).
    served: u32,
    /// When the visit began (clock ns).
    start: u64,
}

/// How `scan` asks `serve_entry` to visit a buffer.
#[derive(Clone, Copy)]
struct VisitPlan {
    /// Swap without peeking first.
    expect_work: bool,
    /// When the visit starts, if the caller read the clock just before.
    start_hint: Option<u64>,
    /// The main listener visits a buffer of the helper's because the helper
    /// seemed stuck; inside the gate that is checked again, since the helper
    /// may have finished its visit meanwhile (the main listener may have lost
    /// its CPU in between), and the next request, maybe the slow one, is the
    /// helper's to serve.
    fallback: bool,
}

/// Detaches and serves one buffer's ready stack (if its gate lets us in and
/// it holds work), as `plan` says.
fn serve_entry(
    listener: &Listener,
    entry: &Entry,
    role: Role,
    clock: &impl Clock,
    plan: VisitPlan,
) -> Option<Visit> {
    // No peek at the ready stack before entering the gate: once disable has
    // closed the gate and seen it idle, the buffer may already be freed
    // although this snapshot still lists it.
    if !entry.gate.enter() {
        return None;
    }
    let _inside = Inside::new(&entry.gate);
    // The helper leaves its visit before it leaves the gate, so while this
    // thread holds the gate the helper is not inside this buffer: if it is
    // stuck, it is stuck in another one.
    if plan.fallback && !listener.helper_watch.stuck(clock.now()) {
        return None;
    }
    // Inside the gate, classic buffers: a relaxed peek (a shared read that
    // leaves the device's cache line alone) skips the clock reads of an empty
    // visit. A push it misses is seen by the next scan (there is one before
    // every block). A phase-bit buffer has no one word to peek at: its scan
    // reads the phase words, which the device writes only when it posts.
    if let Buffer::Classic(buffer) = &entry.buffer {
        if !plan.expect_work && buffer.ready_stack().load(Ordering::Relaxed) == 0 {
            return None;
        }
    }
    let start = plan.start_hint.unwrap_or_else(|| clock.now());
    if role == Role::Helper {
        listener.helper_watch.visit_begins(start);
    }
    // Relaxed: a hint; the exit hook waits for the thread to leave.
    let keep_going = || !entry.gate.is_closed() && !EXITING.load(Ordering::Relaxed);
    let served = match &entry.buffer {
        Buffer::Classic(buffer) => {
            // Peeked above (or work expected): swap at once.
            let stats =
                take_ready_packets(buffer, |packet| listener.services.serve_packet(packet), keep_going);
            serve_classic(entry, buffer, stats)
        }
        Buffer::PhaseBit { buffer, scan } => {
            let mut limit = scan.get();
            let serve = |packet: &mut PendingPhasePacket<'_>| listener.services.serve_packet(packet);
            let stats = serve_phases(buffer, &mut limit, serve, keep_going);
            scan.set(limit);
            if stats.odd_phases > 0 {
                crate::log!(
                    Level::Error,
                    "hostcall: buffer {:#x}: {} packet(s) had a device phase other than 0 or 1 \
                     (corruption); served once and settled",
                    entry.key,
                    stats.odd_phases
                );
            }
            if stats.stopped {
                log_abandoned(entry);
            }
            stats.served
        }
    };
    if role == Role::Helper {
        listener.helper_watch.visit_ends();
    }
    (served > 0).then_some(Visit { served, start })
}

/// Logs what a classic visit found wrong; returns the packets it counts as
/// served (a dropped bad pointer or a cut cycle counts as 1: work was found).
fn serve_classic(entry: &Entry, buffer: &DeviceBuffer, stats: DrainStats) -> u32 {
    if let Some(ptr) = stats.bad_pointer {
        crate::log!(
            Level::Error,
            "hostcall: buffer {:#x}: ready stack holds tagged pointer {:#x} whose index {} is not \
             below the packet count {}; it and the packets behind it are dropped, never touched",
            entry.key,
            ptr,
            ptr & buffer.index_mask(),
            buffer.packets()
        );
    }
    if stats.cycle {
        crate::log!(
            Level::Error,
            "hostcall: buffer {:#x}: ready stack chain reaches a packet without READY or is longer \
             than its {} packets (a cycle or corruption); walk stopped, each packet served at most once",
            entry.key,
            buffer.packets()
        );
    }
    if stats.stopped {
        log_abandoned(entry);
    }
    if stats.did_work() {
        stats.served.max(1)
    } else {
        0
    }
}

/// The helper's wait while no buffer is on it: it is rung when one is.
const HELPER_UNUSED_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

fn log_abandoned(entry: &Entry) {
    crate::log!(
        Level::Warning,
        "hostcall: buffer {:#x} is being disabled (or the process is exiting) while packets of \
         it were still waiting; they are abandoned and their waves get no answer",
        entry.key
    );
}

/// One pause between two looks that found nothing; every `pacer.every()`
/// looks the CPU is offered to other threads instead. True when it yielded.
fn snooze(looks: &mut u32, pacer: &mut YieldPacer, clock: &impl Clock) -> bool {
    *looks = looks.wrapping_add(1);
    if *looks % pacer.every() != 0 {
        core::hint::spin_loop();
        return false;
    }
    let before = clock.now();
    std::thread::yield_now();
    pacer.after_yield(clock.now().saturating_sub(before));
    true
}

/// Pause hints before the next scan when the last one served at least
/// `GATHER_AFTER` packets while scanning (phase-bit buffers): many requests
/// are in flight, so a short pause lets the device post a few more (served by
/// one scan) instead of each scan taking lines from a device in mid-post.
/// Classic buffers poll the doorbell instead and touch nothing of the device's.
const GATHER_SPINS: u32 = 64;
const GATHER_AFTER: u32 = 4;

fn gather() {
    for _ in 0..GATHER_SPINS {
        core::hint::spin_loop();
    }
}

/// Looks of `poll_doorbell` between two reads of the clock (and of the stop
/// flag and the registry's generation): a clock read costs several looks.
const CLOCK_EVERY: u32 = 16;

/// Polls the doorbell while it still reads `value`, a pause between looks;
/// returns the new value when it moved, None when the poll window ended, the
/// listener must stop or the registry changed (the caller then scans before
/// it blocks).
fn poll_doorbell(
    listener: &Listener,
    state: &mut LoopState,
    value: i64,
    clock: &impl Clock,
    last_now: &mut Option<u64>,
) -> Option<i64> {
    let mut looks = 0u32;
    loop {
        let now_value = listener.doorbell_load();
        if now_value != value {
            return Some(now_value);
        }
        looks = looks.wrapping_add(1);
        if looks % CLOCK_EVERY == 0 {
            // Relaxed: a hint to stop polling; `refresh` acquires the snapshot.
            let changed = listener.generation.load(Ordering::Relaxed) != state.seen_generation;
            let now = clock.now();
            *last_now = Some(now);
            if changed || !state.window.should_poll(now) || listener.should_stop() {
                return None;
            }
        }
        if snooze(&mut state.looks, &mut state.yields, clock) {
            // The thread may have been off the CPU for long.
            *last_now = None;
        }
    }
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

/// A listener thread's loop (main listener or helper); returns when the
/// listener must stop. The main listener joins its helper before returning.
fn run(listener: &Arc<Listener>, role: Role) {
    let mut helper: Option<std::thread::JoinHandle<()>> = None;
    // The main listener hands slow buffers to a helper unless starting one failed.
    let mut may_hand_off = role == Role::Main;
    run_loop(listener, role, &mut may_hand_off, &mut helper);
    if let Some(handle) = helper {
        // It sees the same stop conditions; the bell makes it look now.
        listener.wake_helper();
        if handle.join().is_err() {
            crate::log!(Level::Error, "hostcall: the helper thread ended with a panic");
        }
    }
}

/// Starts the helper when a scan moved a buffer to it and none runs yet; if
/// it cannot start, every buffer goes back to the main listener for good.
fn ensure_helper(
    listener: &Arc<Listener>,
    found: &ScanResult,
    snapshot: &[Arc<Entry>],
    may_hand_off: &mut bool,
    helper: &mut Option<std::thread::JoinHandle<()>>,
) {
    if !found.found_slow || helper.is_some() {
        return;
    }
    *helper = start_helper(listener);
    if helper.is_none() {
        *may_hand_off = false;
        for entry in snapshot {
            entry.class.reset();
        }
    }
}

/// What a listener thread's loop carries from one round to the next.
struct LoopState {
    /// The registry snapshot served, and the generation it was taken at.
    snapshot: Arc<[Arc<Entry>]>,
    seen_generation: u64,
    /// When to keep polling after work.
    window: PollWindow,
    /// Phase-bit buffers enabled (in this snapshot), and how long the
    /// doorbell has been still: see `DoorbellQuiet`.
    has_phase_bit: bool,
    quiet: DoorbellQuiet,
    /// Looks since work was last found (`snooze`), and how often they yield.
    looks: u32,
    yields: YieldPacer,
    /// Just back from a blocked wait: the scan before the next block is the
    /// only one needed (an idle wake-up costs one scan, not two).
    woke: bool,
    /// The blocked wait's timeout, longer while nothing happens; and whether
    /// the last wait ended because the doorbell moved. Only the scan right
    /// after a wait updates it: every other scan follows a wait that rang or
    /// found work, which already brought it back to its shortest.
    idle: IdleTimeout,
    rang: bool,
    /// Polling after work (main listener, classic buffers only): the doorbell
    /// value read just before the last scan that found nothing. Until it
    /// moves there is nothing new to find (a wave rings after it pushes), so
    /// the next looks read the doorbell's line instead of every ready stack's,
    /// a line the device CASes on every pop and push. A push whose ring is
    /// lost is found by the scan before the next block. Phase-bit waves may
    /// skip their ring (throttled), so with phase-bit buffers every look scans.
    idle_since_value: Option<i64>,
}

impl LoopState {
    fn new() -> LoopState {
        LoopState {
            snapshot: Arc::from(Vec::new()),
            seen_generation: u64::MAX,
            window: PollWindow::new(),
            has_phase_bit: false,
            quiet: DoorbellQuiet::new(),
            looks: 0,
            yields: YieldPacer::new(),
            woke: false,
            idle: IdleTimeout::new(),
            rang: false,
            idle_since_value: None,
        }
    }

    /// Takes the registry's new snapshot if it changed since the last one.
    fn refresh(&mut self, listener: &Listener) {
        // Acquire: pairs with `publish`'s release increment.
        let generation = listener.generation.load(Ordering::Acquire);
        if generation != self.seen_generation {
            self.snapshot = listener.snapshot();
            self.seen_generation = generation;
            self.has_phase_bit =
                self.snapshot.iter().any(|entry| matches!(entry.buffer, Buffer::PhaseBit { .. }));
            self.idle_since_value = None;
        }
    }
}

fn run_loop(
    listener: &Arc<Listener>,
    role: Role,
    may_hand_off: &mut bool,
    helper: &mut Option<std::thread::JoinHandle<()>>,
) {
    let clock = MonotonicClock;
    let mut state = LoopState::new();
    // One scan; work found feeds the poll window. Returns the packets served
    // (None: no work).
    let mut serve_once = |state: &mut LoopState, woke: bool, rung: bool, last_now: Option<u64>| {
        let found = scan(listener, &state.snapshot, role, *may_hand_off, rung, last_now);
        ensure_helper(listener, &found, &state.snapshot, may_hand_off, helper);
        let at = found.worked_at?;
        state.window.work_found(at, woke);
        state.looks = 0;
        Some(found.served)
    };
    loop {
        if listener.should_stop() {
            return;
        }
        state.refresh(listener);
        // Polling the doorbell until it moves (its new value, read before the
        // scan below, is that scan's `before`), or the window ends: then block.
        let (mut window_over, mut moved_to, mut last_now) = (false, None, None);
        if let Some(value) = state.idle_since_value.take() {
            if !state.woke {
                moved_to = poll_doorbell(listener, &mut state, value, &clock, &mut last_now);
                window_over = moved_to.is_none();
            }
        }
        if !state.woke && !window_over {
            let before = moved_to
                .or_else(|| (role == Role::Main && !state.has_phase_bit).then(|| listener.doorbell_load()));
            if let Some(served) = serve_once(&mut state, false, moved_to.is_some(), last_now) {
                if state.window.poll_until_ns().is_some() {
                    if before.is_none() && served >= GATHER_AFTER {
                        gather();
                    }
                    // Everything rung before `before` was read was pushed
                    // before this scan's detach, so it has been served.
                    state.idle_since_value = before;
                    continue;
                }
            } else if state.window.should_poll(clock.now()) {
                state.idle_since_value = before;
                if before.is_none() {
                    snooze(&mut state.looks, &mut state.yields, &clock);
                }
                continue;
            }
        }
        // About to block: read the doorbell first (the helper: clear its
        // bell), then look once more, so a ring after this makes the wait
        // return at once and a ring before it is covered by this scan.
        let observed = match role {
            Role::Main => Some(listener.doorbell_load()),
            Role::Helper => {
                listener.helper_bell.clear();
                None
            }
        };
        let (woke, rang) = (state.woke, state.rang);
        let found = serve_once(&mut state, woke, woke && rang, None);
        if woke {
            state.idle.after_wait(state.rang, found.is_some());
        }
        state.woke = false;
        if found.is_some() {
            continue;
        }
        if listener.should_stop() {
            return;
        }
        let Some(observed) = observed else {
            // The helper never waits on the HSA doorbell (see `helper_bell`).
            // With no buffer on it, nothing can be missed: it sleeps until
            // rung (a hand-off, work, a stop).
            let timeout = if state.snapshot.iter().any(|entry| entry.class.on_helper()) {
                state.idle.timeout()
            } else {
                HELPER_UNUSED_WAIT
            };
            state.rang = listener.helper_bell.wait(timeout);
            state.woke = true;
            continue;
        };
        if state.has_phase_bit && !state.quiet.settled(observed, clock.now()) {
            // A phase-bit wave may post without ringing shortly after another
            // wave's ring (the device throttles its rings): keep polling until
            // the doorbell has been still for longer than that.
            snooze(&mut state.looks, &mut state.yields, &clock);
            continue;
        }
        state.rang = listener.doorbell_wait_value(observed, state.idle.timeout()) != observed;
        state.woke = true;
    }
}
