//! A listener thread's loop (main listener or helper): poll the doorbell
//! after work while requests come often, scan once more, then block, as
//! docs/listener.md describes. The pacing decisions are `pacing`'s, the
//! visits `visit`'s.

use std::sync::Arc;
use std::thread::JoinHandle;

use super::classifier::Role;
use super::clock::{Clock, MonotonicClock};
use super::forecast::{PaceForecast, WOKE_LATE_NS};
use super::pacing::{DoorbellQuiet, IdleTimeout, PollWindow, YieldPacer};
use super::shared::{Entry, Listener};
use super::visit::{scan, Crew, ScanAsk, ScanResult};

/// The helper's wait while no buffer is on it: it is rung when one is.
const HELPER_UNUSED_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

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
/// `GATHER_AFTER` packets while scanning (buffers whose device may post
/// without ringing): many requests are in flight, so a short pause lets the
/// device post a few more (served by one scan) instead of each scan taking
/// lines from a device in mid-post. Buffers whose every post rings poll the
/// doorbell instead and touch nothing of the device's.
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
            listener.counters.ring_seen();
            return Some(now_value);
        }
        looks = looks.wrapping_add(1);
        if looks % CLOCK_EVERY == 0 {
            // Relaxed: a hint to stop polling; `refresh` acquires the snapshot.
            let changed = listener.published.generation_hint() != state.seen_generation;
            let now = clock.now();
            *last_now = Some(now);
            if changed || !state.keeps_polling(now) || listener.should_stop() {
                return None;
            }
        }
        if snooze(&mut state.looks, &mut state.yields, clock) {
            // The thread may have been off the CPU for long.
            *last_now = None;
        }
    }
}

/// The helper thread, once started, and whether the main listener may hand
/// buffers to one.
struct HelperSlot<F> {
    handle: Option<JoinHandle<()>>,
    /// The main listener hands slow buffers to a helper unless starting one failed.
    may_hand_off: bool,
    start: F,
}

impl<F: FnMut() -> Option<JoinHandle<()>>> HelperSlot<F> {
    /// Starts the helper when a scan moved a buffer to it and none runs yet;
    /// if it cannot start, every buffer goes back to the main listener for good.
    fn ensure(&mut self, found: &ScanResult, snapshot: &[Arc<Entry>]) {
        if !found.found_slow || self.handle.is_some() {
            return;
        }
        self.handle = (self.start)();
        if self.handle.is_none() {
            self.may_hand_off = false;
            for entry in snapshot {
                entry.class.reset();
            }
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
    /// The pace of requests found one at a time (main listener), and the
    /// forecast being followed: poll until then for the forecast request.
    /// `timer_late`: this forecast's sleep ended late (`WOKE_LATE_NS`).
    forecast: PaceForecast,
    forecast_until: Option<u64>,
    timer_late: bool,
    /// The longest a buffer of this snapshot may post without ringing
    /// (`Buffer::unrung_post_window_ns`; 0: every post rings), and how long
    /// the doorbell has been still: see `DoorbellQuiet`.
    unrung_post_window_ns: u64,
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
    /// The last wait was ended by the lost-ring watch (`lost_ring_watch`).
    kicked: bool,
    /// When the last scan's last visit ended, if that scan found work: the
    /// next visit, if the loop goes straight to it, starts then (a clock
    /// read saved per scan while requests keep coming; `poll_doorbell`
    /// renews the reading every `CLOCK_EVERY` looks and drops it after a
    /// yield, so it is at most a few looks old).
    last_work_end: Option<u64>,
    /// Polling after work (main listener, every post rings): the doorbell
    /// value read just before the last scan that found nothing. Until it
    /// moves there is nothing new to find (a wave rings after it posts), so
    /// the next looks read the doorbell's line instead of every buffer's,
    /// a line the device writes on every post. A post whose ring is lost is
    /// found by the scan before the next block. Where a device may post
    /// without ringing, every look scans.
    idle_since_value: Option<i64>,
}

impl LoopState {
    fn new() -> LoopState {
        LoopState {
            snapshot: Arc::from(Vec::new()),
            seen_generation: u64::MAX,
            window: PollWindow::new(),
            forecast: PaceForecast::new(),
            forecast_until: None,
            timer_late: false,
            unrung_post_window_ns: 0,
            quiet: DoorbellQuiet::new(),
            looks: 0,
            yields: YieldPacer::new(),
            woke: false,
            idle: IdleTimeout::new(),
            rang: false,
            kicked: false,
            last_work_end: None,
            idle_since_value: None,
        }
    }

    /// Takes the registry's new snapshot if it changed since the last one.
    fn refresh(&mut self, listener: &Listener) {
        let generation = listener.published.generation();
        if generation != self.seen_generation {
            self.adopt(listener.published.load(), generation);
        }
    }

    /// Serves `snapshot` (of `generation`) from now on.
    fn adopt(&mut self, snapshot: Arc<[Arc<Entry>]>, generation: u64) {
        self.snapshot = snapshot;
        self.seen_generation = generation;
        self.unrung_post_window_ns =
            self.snapshot.iter().map(|entry| entry.buffer.unrung_post_window_ns()).max().unwrap_or(0);
        // The doorbell value polled for belonged to the old buffers.
        self.idle_since_value = None;
    }

    /// Keep polling at `now`: inside the poll window after work, or for a
    /// forecast request.
    fn keeps_polling(&self, now: u64) -> bool {
        self.window.should_poll(now) || self.forecast_until.is_some_and(|until| now < until)
    }

    /// Whether every post of this snapshot's buffers rings the doorbell.
    fn every_post_rings(&self) -> bool {
        self.unrung_post_window_ns == 0
    }
}

/// A listener thread's loop; returns when the listener must stop, with the
/// helper thread if `start_helper` started one (main listener).
pub(super) fn run_loop(
    listener: &Arc<Listener>,
    role: Role,
    start_helper: impl FnMut() -> Option<JoinHandle<()>>,
) -> Option<JoinHandle<()>> {
    let clock = MonotonicClock;
    let crew = Crew::of(listener);
    let mut state = LoopState::new();
    let mut helper = HelperSlot { handle: None, may_hand_off: role == Role::Main, start: start_helper };
    // One scan; work found feeds the poll window. Returns the packets served
    // (None: no work).
    let mut serve_once =
        |state: &mut LoopState, woke: bool, rung: bool, unannounced: bool, last_now: Option<u64>| {
            let found = scan(
                crew,
                &state.snapshot,
                ScanAsk { role, may_hand_off: helper.may_hand_off, rung, unannounced, last_now },
                &clock,
            );
            helper.ensure(&found, &state.snapshot);
            state.last_work_end = found.worked_at;
            let at = found.worked_at?;
            state.window.work_found(at, woke);
            state.forecast.work_found(at, found.served, state.timer_late);
            state.forecast_until = None;
            state.timer_late = false;
            state.looks = 0;
            Some(found.served)
        };
    loop {
        if listener.should_stop() {
            break;
        }
        state.refresh(listener);
        // Polling the doorbell until it moves (its new value, read before the
        // scan below, is that scan's `before`), or the window ends: then block.
        let (mut window_over, mut moved_to, mut last_now) = (false, None, state.last_work_end.take());
        if let Some(value) = state.idle_since_value.take() {
            if !state.woke {
                moved_to = poll_doorbell(listener, &mut state, value, &clock, &mut last_now);
                window_over = moved_to.is_none();
            }
        }
        if !state.woke && !window_over {
            let before = moved_to.or_else(|| {
                (role == Role::Main && state.every_post_rings()).then(|| listener.doorbell_load())
            });
            if let Some(served) = serve_once(&mut state, false, moved_to.is_some(), false, last_now) {
                if state.window.poll_until_ns().is_some() {
                    if before.is_none() && served >= GATHER_AFTER {
                        gather();
                    }
                    // Everything rung before `before` was read was posted
                    // before this scan's visits, so it has been served.
                    state.idle_since_value = before;
                    continue;
                }
            } else if state.keeps_polling(clock.now()) {
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
        let (woke, rang, kicked) = (state.woke, state.rang, state.kicked);
        // Work found right after a wait that no ring ended (it timed out, or
        // the lost-ring watch ended it) was announced by no ring: lost rings.
        let unannounced = woke && (!rang || kicked);
        let found = serve_once(&mut state, woke, woke && rang && !kicked, unannounced, None);
        if woke {
            state.idle.after_wait(state.rang, found.is_some());
        }
        state.woke = false;
        state.kicked = false;
        if found.is_some() {
            continue;
        }
        if listener.should_stop() {
            break;
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
        if !state.every_post_rings()
            && !state.quiet.settled(observed, clock.now(), state.unrung_post_window_ns)
        {
            // A wave may post without ringing shortly after another wave's
            // ring (the device throttles its rings): keep polling until the
            // doorbell has been still for longer than that.
            snooze(&mut state.looks, &mut state.yields, &clock);
            continue;
        }
        if state.forecast_until.take().is_some() {
            // The forecast request did not come in time.
            state.forecast.missed();
            state.timer_late = false;
        }
        if let Some(plan) = state.forecast.plan(clock.now()) {
            // A steady pace: sleep on a timer until shortly before the next
            // request, then poll for it (`forecast`); no ring can end this
            // sleep, which lasts less than `forecast::MAX_GAP_NS`.
            if let Some(wake_at) = plan.wake_at {
                listener.counters.forecast_sleep();
                std::thread::sleep(std::time::Duration::from_nanos(wake_at.saturating_sub(clock.now())));
                state.timer_late = clock.now() > wake_at.saturating_add(WOKE_LATE_NS);
                if !state.timer_late && listener.doorbell_load() != observed {
                    // Rung before the planned wake-up: earlier than forecast.
                    state.forecast.missed();
                }
            }
            state.forecast_until = Some(plan.poll_until);
            state.idle_since_value = state.every_post_rings().then_some(observed);
            continue;
        }
        listener.lost_ring_watch.wait_begins(observed);
        state.rang = listener.doorbell_wait_value(observed, state.idle.timeout()) != observed;
        state.kicked = listener.lost_ring_watch.wait_ends();
        listener.counters.blocked_wait(!state.rang);
        if state.rang && !state.kicked {
            listener.counters.ring_seen();
        }
        state.woke = true;
    }
    helper.handle
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostcall::protocol::{Buffer, Protocol};

    /// An entry over `memory`, initialized for `protocol` (`occupied`: its bitmap).
    fn entry(memory: &mut Vec<u64>, protocol: Protocol, occupied: usize) -> Arc<Entry> {
        memory.resize(protocol.buffer_size(2) / 8, 0);
        let base = core::ptr::NonNull::new(memory.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: 8-aligned, large enough; the caller keeps `memory` alive
        // and untouched while the entry lives.
        let buffer = unsafe { Buffer::initialize(protocol, base, 2, 0, occupied) };
        Arc::new(Entry::new(base.as_ptr() as usize, buffer, 0, Default::default()))
    }

    #[test]
    fn a_new_snapshot_sets_the_quiet_rule_and_forgets_the_polled_value() {
        let (mut classic_memory, mut phase_memory, bitmap) = (Vec::new(), Vec::new(), [0u32; 1]);
        let classic = entry(&mut classic_memory, Protocol::Classic, 0);
        let phase = entry(&mut phase_memory, Protocol::PhaseBit, bitmap.as_ptr() as usize);
        let mut state = LoopState::new();
        state.idle_since_value = Some(7);
        state.adopt(Arc::from(vec![Arc::clone(&classic)]), 1);
        assert!(state.every_post_rings(), "classic buffers only: block once the doorbell is read");
        assert_eq!((state.seen_generation, state.idle_since_value), (1, None));
        state.adopt(Arc::from(vec![Arc::clone(&classic), Arc::clone(&phase)]), 2);
        assert!(!state.every_post_rings(), "a phase-bit buffer: wait for a quiet doorbell");
        assert_eq!(state.unrung_post_window_ns, phase.buffer.unrung_post_window_ns());
        state.adopt(Arc::from(Vec::new()), 3);
        assert!(state.every_post_rings());
    }

    #[test]
    fn a_helper_that_cannot_start_takes_every_buffer_back_for_good() {
        let mut memory = vec![0u64; Protocol::Classic.buffer_size(2) / 8];
        let base = core::ptr::NonNull::new(memory.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: 8-aligned, large enough, outlives the entry.
        let buffer = unsafe { Buffer::initialize(Protocol::Classic, base, 2, 0, 0) };
        let entry = Arc::new(Entry::new(base.as_ptr() as usize, buffer, 0, Default::default()));
        for _ in 0..crate::hostcall::tunables::SLOW_STREAK {
            entry.class.record_visit(Role::Main, true, 1, 1_000_000_000, 1);
        }
        assert!(entry.class.on_helper());
        let mut starts = 0;
        let mut slot = HelperSlot {
            handle: None,
            may_hand_off: true,
            start: || {
                starts += 1;
                None
            },
        };
        let snapshot = [Arc::clone(&entry)];
        slot.ensure(&ScanResult::default(), &snapshot);
        assert!(slot.may_hand_off, "no buffer went slow: nothing to start");
        slot.ensure(&ScanResult { found_slow: true, ..ScanResult::default() }, &snapshot);
        assert!(!slot.may_hand_off && slot.handle.is_none());
        assert!(!entry.class.on_helper(), "back on the main listener");
        drop(slot);
        assert_eq!(starts, 1);
        drop(memory);
    }
}
