//! The slow-buffer classifier: decides, from how long each visit of a buffer
//! took, whether the main listener or the helper thread serves it.
//!
//! A pure state machine: no clock of its own, no thread, no HSA. Every
//! transition takes the current time (`Nanos` on any monotonic clock) from
//! its caller, so the unit tests below drive it with a fake clock and the
//! listener drives it with `MonotonicClock`.
//!
//! # States of one buffer
//!
//! ```text
//!            slow visit (streak < SLOW_STREAK)         fast visit
//!   Main ─────────────────────────────────────► Main(streak+1) ──► Main(0)
//!    ▲   SLOW_STREAK slow visits in a row by the main listener
//!    │   ────────────────────────────────────────────► OnHelper
//!    │   no slow visit for SLOW_DEMOTE_AFTER (checked on a fast visit)
//!    └──────────────────────────────────────────────── OnHelper
//! ```
//!
//! Visits that served nothing (empty stack, or the gate closed because the
//! buffer is being disabled) change nothing. While the helper is stuck in one
//! visit for longer than `SLOW_VISIT`, the main listener also serves the
//! buffers marked for the helper (preemption fallback: a fast buffer marked
//! slow by mistake is never left behind a blocked one).
//!
//! State lives in atomics because the main listener and the helper both read
//! it; every access is relaxed. The classification only decides *which*
//! thread visits a buffer; the buffer's `Gate` orders the serving itself, and
//! a stale value means at most one visit by the other thread.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use super::clock::Nanos;
use crate::hostcall::tunables;

/// A visit of one buffer (draining its ready stack) is *slow* when it took
/// longer than `SLOW_VISIT + SLOW_PER_PACKET × packets served`: a host
/// function or a printf that blocks. Ordinary traffic (a full packet of a
/// trivial function) stays far below it (but preemption can reach it, hence
/// `SLOW_STREAK` and the fallback).
pub const SLOW_VISIT: Duration = Duration::from_micros(tunables::SLOW_VISIT_US);
pub const SLOW_PER_PACKET: Duration = Duration::from_micros(tunables::SLOW_PER_PACKET_US);

/// Slow visits in a row (by the main listener) before a buffer is handed to
/// the helper: one slow visit can be a preemption rather than a slow service.
pub const SLOW_STREAK: u32 = tunables::SLOW_STREAK;

/// A buffer on the helper whose visits have all been fast for this long goes
/// back to the main listener.
pub const SLOW_DEMOTE_AFTER: Duration = Duration::from_millis(tunables::SLOW_DEMOTE_AFTER_MS);

const fn nanos(d: Duration) -> Nanos {
    d.as_nanos() as Nanos
}

/// Which buffers a listener thread serves.
///
/// The main listener serves every buffer except those on the helper; the
/// helper (started the first time a buffer turns out slow) serves only those.
/// So a host function that blocks on one buffer delays that buffer's own
/// requests, not the other buffers', after the `SLOW_STREAK` visits that
/// revealed it. (One helper serves all slow buffers: two that block at the
/// same time delay each other.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Role {
    Main,
    Helper,
}

/// What `BufferClass::record_visit` changed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Transition {
    /// Nothing changed.
    None,
    /// A slow visit by the main listener; the streak is now this long.
    StreakGrew(u32),
    /// A fast visit ended a streak.
    StreakReset,
    /// `SLOW_STREAK` slow visits in a row: the helper serves it from now on.
    ToHelper,
    /// Fast for `SLOW_DEMOTE_AFTER`: back to the main listener.
    BackToMain,
}

/// The classification state of one buffer.
#[derive(Default, Debug)]
pub struct BufferClass {
    /// Served by the helper thread rather than the main listener.
    on_helper: AtomicBool,
    /// When a visit of this buffer was last slow.
    last_slow: AtomicU64,
    /// Slow visits in a row by the main listener (while not on the helper).
    streak: AtomicU32,
}

impl BufferClass {
    pub fn new() -> BufferClass {
        BufferClass::default()
    }

    /// True when the buffer is marked for the helper thread.
    pub fn on_helper(&self) -> bool {
        // Relaxed: see the module docs (which thread visits, nothing more).
        self.on_helper.load(Ordering::Relaxed)
    }

    /// Does a thread of `role` visit this buffer? `helper_stuck` is asked
    /// only by the main listener for a buffer on the helper.
    pub fn visited_by(&self, role: Role, helper_stuck: impl FnOnce() -> bool) -> bool {
        match role {
            Role::Helper => self.on_helper(),
            Role::Main => !self.on_helper() || helper_stuck(),
        }
    }

    /// Records one visit by `role` that served `served` packets in `took`
    /// nanoseconds, ending at `now`. `may_hand_off`: the main listener may
    /// move buffers to the helper (one runs or can be started).
    pub fn record_visit(
        &self,
        role: Role,
        may_hand_off: bool,
        served: u32,
        took: Nanos,
        now: Nanos,
    ) -> Transition {
        if served == 0 {
            return Transition::None;
        }
        let limit =
            nanos(SLOW_VISIT).saturating_add(nanos(SLOW_PER_PACKET).saturating_mul(u64::from(served)));
        let slow = took > limit;
        // Relaxed everywhere below: see the module docs. Only the main
        // listener changes the streak; both threads may stamp `last_slow`.
        if self.on_helper() {
            if slow {
                self.last_slow.store(now, Ordering::Relaxed);
                return Transition::None;
            }
            let last = self.last_slow.load(Ordering::Relaxed);
            if now.saturating_sub(last) > nanos(SLOW_DEMOTE_AFTER) {
                self.on_helper.store(false, Ordering::Relaxed);
                return Transition::BackToMain;
            }
            return Transition::None;
        }
        if role != Role::Main || !may_hand_off {
            return Transition::None;
        }
        let streak = self.streak.load(Ordering::Relaxed);
        if !slow {
            if streak == 0 {
                return Transition::None;
            }
            self.streak.store(0, Ordering::Relaxed);
            return Transition::StreakReset;
        }
        if streak + 1 < SLOW_STREAK {
            self.streak.store(streak + 1, Ordering::Relaxed);
            return Transition::StreakGrew(streak + 1);
        }
        self.streak.store(0, Ordering::Relaxed);
        self.last_slow.store(now, Ordering::Relaxed);
        self.on_helper.store(true, Ordering::Relaxed);
        Transition::ToHelper
    }

    /// Back to the main listener at once (no helper can run).
    pub fn reset(&self) {
        // Relaxed: as above.
        self.on_helper.store(false, Ordering::Relaxed);
        self.streak.store(0, Ordering::Relaxed);
    }
}

/// Watches the helper's current visit, so the main listener can tell when
/// the helper is stuck in a slow service.
#[derive(Default, Debug)]
pub struct HelperWatch {
    /// When the helper's current visit began, plus 1; 0 outside a visit.
    visit_start: AtomicU64,
}

impl HelperWatch {
    pub fn new() -> HelperWatch {
        HelperWatch::default()
    }

    pub fn visit_begins(&self, now: Nanos) {
        // Relaxed: a hint for the main listener; the gates protect the buffers.
        self.visit_start.store(now.saturating_add(1), Ordering::Relaxed);
    }

    pub fn visit_ends(&self) {
        // Relaxed: as above.
        self.visit_start.store(0, Ordering::Relaxed);
    }

    /// True when the helper has been inside one visit for longer than `SLOW_VISIT`.
    pub fn stuck(&self, now: Nanos) -> bool {
        // Relaxed: as above.
        let start = self.visit_start.load(Ordering::Relaxed);
        start != 0 && now.saturating_sub(start - 1) > nanos(SLOW_VISIT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostcall::listener::clock::{Clock, MonotonicClock};

    const FAST: Nanos = 2_000;
    const SLOW: Nanos = 1_000_000;
    const MS: Nanos = 1_000_000;

    /// A fake clock the tests advance by hand.
    struct FakeClock(std::cell::Cell<Nanos>);

    impl Clock for FakeClock {
        fn now(&self) -> Nanos {
            self.0.get()
        }
    }

    impl FakeClock {
        fn advance(&self, by: Nanos) -> Nanos {
            self.0.set(self.0.get() + by);
            self.0.get()
        }
    }

    /// A clock at 0 and a buffer that was never visited.
    fn fresh() -> (FakeClock, BufferClass) {
        (FakeClock(0.into()), BufferClass::new())
    }

    fn main_visit(class: &BufferClass, clock: &FakeClock, took: Nanos) -> Transition {
        let now = clock.advance(took);
        class.record_visit(Role::Main, true, 1, took, now)
    }

    fn moved_to_helper(clock: &FakeClock) -> BufferClass {
        let class = BufferClass::new();
        for _ in 1..SLOW_STREAK {
            main_visit(&class, clock, SLOW);
        }
        assert_eq!(main_visit(&class, clock, SLOW), Transition::ToHelper);
        class
    }

    #[test]
    fn a_new_buffer_is_served_by_the_main_listener() {
        let class = BufferClass::new();
        assert!(!class.on_helper());
        assert!(class.visited_by(Role::Main, || panic!("helper state not needed")));
        assert!(!class.visited_by(Role::Helper, || true));
    }

    #[test]
    fn fast_visits_never_move_a_buffer() {
        let (clock, class) = fresh();
        for _ in 0..1000 {
            assert_eq!(main_visit(&class, &clock, FAST), Transition::None);
        }
        assert!(!class.on_helper());
    }

    #[test]
    fn the_slow_limit_grows_with_the_packets_served() {
        let class = BufferClass::new();
        let limit_for_10 = nanos(SLOW_VISIT) + 10 * nanos(SLOW_PER_PACKET);
        assert_eq!(class.record_visit(Role::Main, true, 10, limit_for_10, 1), Transition::None);
        assert_eq!(class.record_visit(Role::Main, true, 10, limit_for_10 + 1, 2), Transition::StreakGrew(1));
        let limit_for_1 = nanos(SLOW_VISIT) + nanos(SLOW_PER_PACKET);
        assert_eq!(class.record_visit(Role::Main, true, 1, limit_for_1, 3), Transition::StreakReset);
        assert_eq!(class.record_visit(Role::Main, true, 1, limit_for_1 + 1, 4), Transition::StreakGrew(1));
    }

    #[test]
    fn slow_streak_moves_the_buffer_to_the_helper() {
        let (clock, class) = fresh();
        for n in 1..SLOW_STREAK {
            assert_eq!(main_visit(&class, &clock, SLOW), Transition::StreakGrew(n));
            assert!(!class.on_helper());
        }
        assert_eq!(main_visit(&class, &clock, SLOW), Transition::ToHelper);
        assert!(class.on_helper());
        assert_eq!(class.streak.load(Ordering::Relaxed), 0);
        assert!(class.visited_by(Role::Helper, || false));
        assert!(!class.visited_by(Role::Main, || false));
    }

    #[test]
    fn one_fast_visit_breaks_the_streak() {
        let (clock, class) = fresh();
        for _ in 0..10 {
            for n in 1..SLOW_STREAK {
                assert_eq!(main_visit(&class, &clock, SLOW), Transition::StreakGrew(n));
            }
            assert_eq!(main_visit(&class, &clock, FAST), Transition::StreakReset);
        }
        assert!(!class.on_helper(), "preemption-like slow visits that never reach the streak");
    }

    #[test]
    fn no_streak_without_hand_off_or_on_the_helper_thread() {
        let class = BufferClass::new();
        for t in 1..10 {
            assert_eq!(class.record_visit(Role::Main, false, 1, SLOW, t), Transition::None);
            assert_eq!(class.record_visit(Role::Helper, true, 1, SLOW, t), Transition::None);
        }
        assert_eq!(class.streak.load(Ordering::Relaxed), 0);
        assert!(!class.on_helper());
    }

    #[test]
    fn empty_visits_change_nothing() {
        let (clock, class) = fresh();
        main_visit(&class, &clock, SLOW);
        assert_eq!(class.record_visit(Role::Main, true, 0, SLOW, clock.advance(SLOW)), Transition::None);
        assert_eq!(class.record_visit(Role::Main, true, 0, FAST, clock.advance(FAST)), Transition::None);
        assert_eq!(
            class.streak.load(Ordering::Relaxed),
            1,
            "a visit that served nothing neither extends nor breaks the streak"
        );
    }

    #[test]
    fn demotion_after_a_quiet_second_on_the_helper() {
        let clock = FakeClock(0.into());
        let class = moved_to_helper(&clock);
        let moved_at = clock.now();
        // Fast visits within SLOW_DEMOTE_AFTER of the last slow one: stays.
        while clock.now() - moved_at + 100 * MS <= nanos(SLOW_DEMOTE_AFTER) {
            let now = clock.advance(100 * MS);
            assert_eq!(class.record_visit(Role::Helper, false, 1, FAST, now), Transition::None);
            assert!(class.on_helper());
        }
        // A slow visit restarts the quiet period.
        let now = clock.advance(100 * MS);
        assert_eq!(class.record_visit(Role::Helper, false, 1, SLOW, now), Transition::None);
        let restamped = clock.now();
        let now = clock.advance(nanos(SLOW_DEMOTE_AFTER));
        assert_eq!(now - restamped, nanos(SLOW_DEMOTE_AFTER));
        assert_eq!(
            class.record_visit(Role::Helper, false, 1, FAST, now),
            Transition::None,
            "not *longer* yet"
        );
        let now = clock.advance(1);
        assert_eq!(class.record_visit(Role::Helper, false, 1, FAST, now), Transition::BackToMain);
        assert!(!class.on_helper());
        assert!(class.visited_by(Role::Main, || false));
        // And it takes a full new streak to move it again.
        assert_eq!(main_visit(&class, &clock, SLOW), Transition::StreakGrew(1));
    }

    #[test]
    fn the_main_listener_may_demote_a_buffer_it_serves_as_fallback() {
        let clock = FakeClock(0.into());
        let class = moved_to_helper(&clock);
        let now = clock.advance(nanos(SLOW_DEMOTE_AFTER) + 1);
        assert_eq!(class.record_visit(Role::Main, true, 1, FAST, now), Transition::BackToMain);
    }

    #[test]
    fn preemption_fallback_main_serves_helper_buffers_while_the_helper_is_stuck() {
        let clock = FakeClock(0.into());
        let class = moved_to_helper(&clock);
        let watch = HelperWatch::new();
        let stuck = |watch: &HelperWatch| watch.stuck(clock.now());
        assert!(!stuck(&watch), "no visit: not stuck");
        assert!(!class.visited_by(Role::Main, || stuck(&watch)));

        watch.visit_begins(clock.now());
        clock.advance(nanos(SLOW_VISIT));
        assert!(!stuck(&watch), "exactly SLOW_VISIT is not longer");
        assert!(!class.visited_by(Role::Main, || stuck(&watch)));
        clock.advance(1);
        assert!(stuck(&watch));
        assert!(class.visited_by(Role::Main, || stuck(&watch)), "main takes the helper's buffers");
        assert!(class.visited_by(Role::Helper, || false), "the helper still owns them");

        watch.visit_ends();
        assert!(!stuck(&watch));
        assert!(!class.visited_by(Role::Main, || stuck(&watch)), "helper back: main leaves them again");
    }

    #[test]
    fn a_helper_visit_starting_at_time_zero_is_watched() {
        let watch = HelperWatch::new();
        watch.visit_begins(0);
        assert!(watch.stuck(nanos(SLOW_VISIT) + 1));
    }

    #[test]
    fn a_buffer_disabled_while_on_the_helper_changes_nothing_and_its_successor_starts_fresh() {
        let clock = FakeClock(0.into());
        let class = moved_to_helper(&clock);
        // Disabled: the gate is closed, every later visit serves nothing,
        // however long the visit took (the helper may sit in it).
        let watch = HelperWatch::new();
        watch.visit_begins(clock.now());
        let now = clock.advance(10 * nanos(SLOW_DEMOTE_AFTER));
        assert_eq!(class.record_visit(Role::Helper, false, 0, SLOW, now), Transition::None);
        watch.visit_ends();
        assert!(class.on_helper(), "nothing demotes a buffer nobody serves");
        assert!(!watch.stuck(now), "the visit of the disabled buffer ended");
        // A buffer enabled again at the same address gets a new entry.
        let successor = BufferClass::new();
        assert!(!successor.on_helper());
        assert_eq!(successor.streak.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn reset_when_no_helper_can_start() {
        let clock = FakeClock(0.into());
        let class = moved_to_helper(&clock);
        class.reset();
        assert!(!class.on_helper());
        assert!(class.visited_by(Role::Main, || false));
        let half = BufferClass::new();
        main_visit(&half, &clock, SLOW);
        half.reset();
        assert_eq!(half.streak.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_monotonic_clock_never_goes_back() {
        let clock = MonotonicClock;
        let a = clock.now();
        let b = clock.now();
        assert!(b >= a);
    }
}
