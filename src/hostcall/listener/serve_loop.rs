//! The listener threads: the main listener (started with the first enabled
//! buffer) and the helper for slow buffers (started on first need), their
//! poll-then-block loop and the visit of one buffer.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use super::classifier::{Clock, MonotonicClock, Role, Transition, SLOW_DEMOTE_AFTER, SLOW_STREAK};
use super::{Entry, Listener, CURRENT, EXITING, LIVE_THREADS, POLL_WINDOW, SERVING, WAIT_TIMEOUT};
use crate::hostcall::protocol::{drain_ready, Gate};
use crate::log::{panic_message, Level};

/// Spins (with `spin_loop` hints doubling per round) before the poll loop
/// starts yielding the CPU instead.
const SPIN_ROUNDS: u32 = 6;

/// Starts the main listener thread of `listener`. `LIVE_THREADS` counts it until it ends.
pub fn spawn(listener: Arc<Listener>) -> Result<std::thread::JoinHandle<()>, String> {
    let strategy = Strategy::from_env();
    spawn_thread(strategy.thread_name(), listener, move |listener| strategy.run(listener))
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

/// Which loop the main listener thread runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// The product listener: poll after work, then block on the doorbell;
    /// slow buffers move to a helper (`run`).
    PollThenBlock,
    /// The benchmark's baseline (`baseline::run`, `bench-baseline` feature).
    #[cfg(feature = "bench-baseline")]
    Baseline,
}

impl Strategy {
    fn from_env() -> Strategy {
        #[cfg(feature = "bench-baseline")]
        if crate::hostcall::baseline::selected() {
            return Strategy::Baseline;
        }
        Strategy::PollThenBlock
    }

    /// The thread name (Linux comm, at most 15 bytes); the benchmark finds
    /// the listener's CPU time by it.
    fn thread_name(self) -> &'static str {
        match self {
            Strategy::PollThenBlock => "amdgpu-hostcall",
            #[cfg(feature = "bench-baseline")]
            Strategy::Baseline => "amdgpu-hc-base",
        }
    }

    fn run(self, listener: &Arc<Listener>) {
        match self {
            Strategy::PollThenBlock => run(listener, Role::Main),
            #[cfg(feature = "bench-baseline")]
            Strategy::Baseline => crate::hostcall::baseline::run(listener),
        }
    }
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
    worked: bool,
    /// The main listener just moved a buffer to the helper: the helper is needed.
    found_slow: bool,
}

/// Serves the buffers of `role` once. `may_hand_off`: the main listener may
/// move buffers to the helper (one runs or can be started).
fn scan(listener: &Listener, snapshot: &[Arc<Entry>], role: Role, may_hand_off: bool) -> ScanResult {
    let clock = MonotonicClock;
    let mut result = ScanResult::default();
    // Main listener: is the helper stuck in a visit? Computed on first need.
    let mut helper_stuck: Option<bool> = None;
    for entry in snapshot {
        let mine = entry.class.visited_by(role, || {
            *helper_stuck.get_or_insert_with(|| listener.helper_watch.stuck(clock.now()))
        });
        if !mine {
            continue;
        }
        // No peek at the ready stack before entering the gate: once disable
        // has closed the gate and seen it idle, the buffer may already be
        // freed although this snapshot still lists it. `serve_entry` enters
        // first; `drain_ready` then peeks (relaxed) before any write.
        let start = clock.now();
        if role == Role::Helper {
            listener.helper_watch.visit_begins(start);
        }
        let served = serve_entry(listener, entry);
        if role == Role::Helper {
            listener.helper_watch.visit_ends();
        }
        if served == 0 {
            continue;
        }
        result.worked = true;
        let now = clock.now();
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

/// Detaches and serves one buffer's ready stack (if its gate lets us in);
/// returns the number of packets served (a dropped bad pointer counts as 1).
pub(in crate::hostcall) fn serve_entry(listener: &Listener, entry: &Entry) -> u32 {
    if !entry.gate.enter() {
        return 0;
    }
    let _inside = Inside::new(&entry.gate);
    let stats = drain_ready(
        &entry.buffer,
        |service, lane, slot| listener.services.serve_lane(entry.key, service, lane, slot),
        // Relaxed: a hint; the exit hook waits for the thread to leave.
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
        // The helper sees the same stop conditions and the same stop ring.
        if handle.join().is_err() {
            crate::log!(Level::Error, "hostcall: the helper thread ended with a panic");
        }
    }
}

fn run_loop(
    listener: &Arc<Listener>,
    role: Role,
    may_hand_off: &mut bool,
    helper: &mut Option<std::thread::JoinHandle<()>>,
) {
    let mut snapshot: Arc<[Arc<Entry>]> = Arc::from(Vec::new());
    let mut seen_generation = u64::MAX;
    let mut poll_until: Option<Instant> = None;
    let mut step = 0u32;
    loop {
        if listener.should_stop() {
            return;
        }
        // Acquire: pairs with `publish`'s release increment.
        let generation = listener.generation.load(Ordering::Acquire);
        if generation != seen_generation {
            snapshot = listener.snapshot();
            seen_generation = generation;
        }
        let found = scan(listener, &snapshot, role, *may_hand_off);
        if found.found_slow && helper.is_none() {
            *helper = start_helper(listener);
            if helper.is_none() {
                *may_hand_off = false;
                for entry in snapshot.iter() {
                    entry.class.reset();
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
        let observed = listener.doorbell_load();
        if scan(listener, &snapshot, role, false).worked {
            poll_until = Some(Instant::now() + POLL_WINDOW);
            step = 0;
            continue;
        }
        if listener.should_stop() {
            return;
        }
        listener.doorbell_wait_value(observed, WAIT_TIMEOUT);
    }
}
