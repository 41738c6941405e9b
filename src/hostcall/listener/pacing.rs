//! The pace of a listener thread, four small policies, each pure (the caller
//! passes the times, in nanoseconds on any monotonic clock, so the decisions
//! are unit-tested with made-up clocks):
//!
//! * `PollWindow`    — whether to keep polling after work, or block;
//! * `YieldPacer`    — how often a polling thread yields its CPU;
//! * `DoorbellQuiet` — how long the doorbell must be still before blocking
//!   when a device may post without ringing;
//! * `IdleTimeout`   — how long a blocked wait lasts before the next look.
//!
//! # The poll window
//!
//! A blocked doorbell wait costs a wake-up: on a GPU the ring reaches a
//! blocked listener through an interrupt, tens of microseconds later, and the
//! wake path itself costs CPU. Polling costs CPU for as long as it lasts. So
//! after serving work the listener polls only while the requests it has seen
//! recently came closer together than `SPIN_WHILE_GAP_BELOW`: the runtime's
//! blocked wait polls its first 200 µs anyway (ROCr does), and two wake-ups
//! more (spinning through such a gap costs no more CPU than the wake-up it
//! replaces costs in CPU and latency together). Then the next request
//! probably lands inside the window (at least one wake-up's cost, at most
//! 100 µs) or the runtime's poll that follows it, and is caught at once.
//! Requests further
//! apart (a kernel that calls the host now and then) are waited for blocked,
//! where spinning through every gap would burn CPU for nothing.
//!
//! The gap estimate is an exponentially weighted mean of the times between
//! one piece of work found and the next (each gap capped, so that after an
//! idle period a few close requests are enough to start polling again); a
//! request found right after a blocked wait was seen a wake-up late, and that
//! wake-up is taken out of its gap, so blocking does not feed itself. No
//! setting for users: the constants follow from what a wake-up costs.
//!
//! How long a blocked wait may last before the thread rescans (`IdleTimeout`)
//! grows while nothing happens, so an idle listener wakes rarely.

use std::time::Duration;

use crate::hostcall::tunables;

/// What one blocked wait's wake-up costs, in latency and CPU together: tens
/// of microseconds of interrupt latency on a GPU plus the wake path (futex,
/// scheduler).
pub const WAKE_COST_NS: u64 = 50_000;

/// Poll after work only while the estimated gap between requests is below
/// this: what a blocked wait polls anyway (ROCr's wait polls its first
/// 200 µs, `RUNTIME_WAIT_POLL`) plus two wake-ups (see the module comment).
/// A request due within the runtime's poll is caught there at the same CPU
/// cost; one due a little later is caught by our window followed by that
/// poll, where blocking would pay the poll and a wake-up too.
pub const SPIN_WHILE_GAP_BELOW_NS: u64 = RUNTIME_WAIT_POLL_NS + 2 * WAKE_COST_NS;

/// How long the HSA runtime's blocked wait polls before it sleeps.
pub const RUNTIME_WAIT_POLL_NS: u64 = super::doorbell::RUNTIME_WAIT_POLL.as_nanos() as u64;

/// The longest the listener polls without finding work before it blocks.
pub const POLL_WINDOW_MAX_NS: u64 = crate::hostcall::tunables::POLL_WINDOW_US * 1_000;

/// The shortest poll window (when polling at all): one wake-up's cost. Gaps
/// jitter (a wave, or the thread playing it, loses its core for a moment);
/// polling up to one wake-up's cost before blocking never spends more than
/// twice what the best choice in hindsight would have (the classic
/// spin-then-block bound).
pub const POLL_WINDOW_MIN_NS: u64 = WAKE_COST_NS;

/// Gaps longer than this count as this much: an idle period weighs as a
/// long gap, not as forever.
pub const GAP_CAP_NS: u64 = 3 * SPIN_WHILE_GAP_BELOW_NS;

/// The adaptive poll window of one listener thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollWindow {
    /// When work was last found (ns), None before any.
    last_work_ns: Option<u64>,
    /// Weighted mean gap between two pieces of work found (ns).
    gap_estimate_ns: u64,
}

impl Default for PollWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl PollWindow {
    /// A listener that has seen no work yet: it blocks until it has.
    pub const fn new() -> PollWindow {
        PollWindow { last_work_ns: None, gap_estimate_ns: GAP_CAP_NS }
    }

    /// The listener found (and served) work at `now_ns`. `after_wait`: it
    /// found it right after a blocked wait, so it saw the request a wake-up
    /// late; that wake-up is not part of the gap between requests (counting
    /// it would keep requests 50 µs apart looking 100 µs apart, and the
    /// listener blocking for ever after one long gap).
    pub fn work_found(&mut self, now_ns: u64, after_wait: bool) {
        if let Some(last) = self.last_work_ns {
            let mut gap = now_ns.saturating_sub(last);
            if after_wait {
                gap = gap.saturating_sub(WAKE_COST_NS);
            }
            let gap = gap.min(GAP_CAP_NS);
            // Weight 1/4 for the newest gap: a change of pace is followed
            // within a few requests, a single outlier moves little.
            self.gap_estimate_ns = (3 * self.gap_estimate_ns + gap) / 4;
        }
        self.last_work_ns = Some(now_ns);
    }

    /// Until when (ns) to keep polling after the last work; None: block now.
    /// The window is three estimated gaps, within
    /// `POLL_WINDOW_MIN_NS..=POLL_WINDOW_MAX_NS`.
    pub fn poll_until_ns(&self) -> Option<u64> {
        let last = self.last_work_ns?;
        if self.gap_estimate_ns >= SPIN_WHILE_GAP_BELOW_NS {
            return None;
        }
        let window = (3 * self.gap_estimate_ns).clamp(POLL_WINDOW_MIN_NS, POLL_WINDOW_MAX_NS);
        Some(last.saturating_add(window))
    }

    /// Keep polling at `now_ns`?
    pub fn should_poll(&self, now_ns: u64) -> bool {
        self.poll_until_ns().is_some_and(|until| now_ns < until)
    }
}

/// How often a polling thread offers its CPU to other threads
/// (`sched_yield`), learnt from what the yields cost. A yield that comes back
/// at once found no other thread waiting for this CPU: on a host with cores
/// to spare, yielding only adds a system call to the round trip a request
/// may land in, so yields become rarer (down to one per `YIELD_EVERY_MAX`
/// looks). A yield that comes back late ran another thread: the machine is
/// oversubscribed (waves played by host threads, the application's own
/// threads), and a poller that kept the CPU would delay the very threads
/// that post the requests; yields become frequent (one per
/// `YIELD_EVERY_MIN` looks) at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YieldPacer {
    every: u32,
}

/// A yield that took longer than this ran another thread (a bare
/// `sched_yield` costs well under a microsecond, a VM's a little more).
pub const YIELD_RAN_OTHERS_NS: u64 = 5_000;
pub const YIELD_EVERY_MIN: u32 = 16;
pub const YIELD_EVERY_MAX: u32 = 1024;

impl Default for YieldPacer {
    fn default() -> Self {
        Self::new()
    }
}

impl YieldPacer {
    pub fn new() -> YieldPacer {
        YieldPacer { every: YIELD_EVERY_MIN }
    }

    /// Looks between two yields.
    pub fn every(&self) -> u32 {
        self.every
    }

    /// Records how long (ns) the last yield took.
    pub fn after_yield(&mut self, took_ns: u64) {
        self.every = if took_ns > YIELD_RAN_OTHERS_NS {
            YIELD_EVERY_MIN
        } else {
            (self.every * 2).min(YIELD_EVERY_MAX)
        };
    }
}

/// How long the doorbell must stay still before a thread may block, when a
/// buffer's device may post without ringing for `unrung_post_window_ns`
/// after another post's ring (`Buffer::unrung_post_window_ns`): twice that.
/// Any such post comes at most one window after a ring the thread has seen
/// move the value, so it is found by the polling this rule keeps up.
pub const fn quiet_ns(unrung_post_window_ns: u64) -> u64 {
    2 * unrung_post_window_ns
}

/// Tracks how long the doorbell value has been unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DoorbellQuiet {
    /// The value last seen, None before the first look.
    value: Option<i64>,
    /// When (ns) that value was first seen.
    since_ns: u64,
}

impl Default for DoorbellQuiet {
    fn default() -> Self {
        Self::new()
    }
}

impl DoorbellQuiet {
    pub const fn new() -> DoorbellQuiet {
        DoorbellQuiet { value: None, since_ns: 0 }
    }

    /// Records the doorbell value seen at `now_ns`; true once it has not
    /// moved for `quiet_ns(unrung_post_window_ns)` (a first look counts as a move).
    pub fn settled(&mut self, value: i64, now_ns: u64, unrung_post_window_ns: u64) -> bool {
        if self.value != Some(value) {
            self.value = Some(value);
            self.since_ns = now_ns;
        }
        now_ns.saturating_sub(self.since_ns) >= quiet_ns(unrung_post_window_ns)
    }
}

/// The blocked doorbell wait's timeout. While requests come it is
/// `WAIT_TIMEOUT` (100 ms). Each wait that times out with the doorbell
/// unmoved and nothing found makes the next one `IDLE_WAIT_GROWTH` times
/// longer, up to `IDLE_WAIT_MAX` (1 s): a wake-up after a long sleep costs a
/// thread far more CPU than the look itself, and every wake-up through the
/// HSA runtime's wait pays its 200 µs poll
/// (docs/listener.md#blocked-wait-and-idle-timeout). A ring, or work found,
/// brings it back to `WAIT_TIMEOUT`.
///
/// Lost rings (a wave posts and its ring never wakes the waiter) are not
/// this timeout's to catch: the lost-ring watch (`lost_ring_watch`) ends a
/// wait they leave waiting, whatever the timeout, so a listener that lost a
/// ring keeps the long idle waits and their low idle CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleTimeout {
    current_ms: u64,
}

impl Default for IdleTimeout {
    fn default() -> Self {
        Self::new()
    }
}

impl IdleTimeout {
    pub const fn new() -> IdleTimeout {
        IdleTimeout { current_ms: tunables::WAIT_TIMEOUT_MS }
    }

    /// The timeout for the next blocked wait.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.current_ms)
    }

    /// After a blocked wait and the scan that followed it. `rang`: the wait
    /// ended because the doorbell moved; `found`: the scan found work.
    pub fn after_wait(&mut self, rang: bool, found: bool) {
        if !rang && !found {
            self.current_ms = (self.current_ms * tunables::IDLE_WAIT_GROWTH).min(tunables::IDLE_WAIT_MAX_MS);
        } else {
            self.reset();
        }
    }

    /// Requests are coming: back to the shortest timeout.
    fn reset(&mut self) {
        self.current_ms = tunables::WAIT_TIMEOUT_MS;
    }
}

#[cfg(test)]
mod yield_tests {
    use super::*;

    #[test]
    fn quick_yields_make_yields_rare_and_a_late_one_makes_them_frequent_at_once() {
        let mut pacer = YieldPacer::new();
        assert_eq!(pacer.every(), YIELD_EVERY_MIN);
        for _ in 0..20 {
            pacer.after_yield(300);
        }
        assert_eq!(pacer.every(), YIELD_EVERY_MAX, "a host with idle cores: rare yields");
        pacer.after_yield(YIELD_RAN_OTHERS_NS + 1);
        assert_eq!(pacer.every(), YIELD_EVERY_MIN, "another thread ran: frequent yields");
        pacer.after_yield(YIELD_RAN_OTHERS_NS);
        assert_eq!(pacer.every(), 2 * YIELD_EVERY_MIN, "back off step by step");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// Feeds requests `gap` apart starting at `start`; returns the time of the last.
    fn feed(window: &mut PollWindow, start: u64, gap: u64, count: u32) -> u64 {
        let mut now = start;
        for _ in 0..count {
            window.work_found(now, false);
            now += gap;
        }
        now - gap
    }

    #[test]
    fn blocks_before_any_work() {
        let window = PollWindow::new();
        assert_eq!(window.poll_until_ns(), None);
        assert!(!window.should_poll(0));
    }

    #[test]
    fn back_to_back_requests_poll_for_the_minimum_window() {
        let mut window = PollWindow::new();
        let last = feed(&mut window, 1_000 * US, 3 * US, 40);
        assert!(window.gap_estimate_ns < 10 * US, "{}", window.gap_estimate_ns);
        assert_eq!(window.poll_until_ns(), Some(last + POLL_WINDOW_MIN_NS));
        assert!(window.should_poll(last + POLL_WINDOW_MIN_NS - 1));
        assert!(!window.should_poll(last + POLL_WINDOW_MIN_NS));
    }

    #[test]
    fn requests_every_50_us_are_polled_for() {
        let mut window = PollWindow::new();
        let last = feed(&mut window, 0, 53 * US, 40);
        let until = window.poll_until_ns().expect("polls");
        // The window covers the next request (53 µs after the last).
        assert!(until > last + 53 * US, "window {} us", (until - last) / US);
        assert!(until <= last + POLL_WINDOW_MAX_NS);
    }

    #[test]
    fn requests_every_220_us_are_caught_by_the_window_and_the_runtimes_poll() {
        let mut window = PollWindow::new();
        let last = feed(&mut window, 0, 220 * US, 40);
        let until = window.poll_until_ns().expect("polls");
        assert!(until + RUNTIME_WAIT_POLL_NS > last + 220 * US, "window {} us", (until - last) / US);
    }

    #[test]
    fn requests_every_400_us_are_waited_for_blocked() {
        let mut window = PollWindow::new();
        feed(&mut window, 0, 400 * US, 40);
        assert_eq!(window.poll_until_ns(), None);
    }

    #[test]
    fn a_burst_after_idle_starts_polling_within_a_few_requests() {
        let mut window = PollWindow::new();
        feed(&mut window, 0, 220 * US, 10);
        // Idle for a second, then back-to-back requests (the first few of
        // them each woke a blocked listener: about 30 µs apart).
        let start = 10 * 220 * US + 1_000_000 * US;
        let mut polls_after = None;
        for i in 0..20u32 {
            window.work_found(start + u64::from(i) * 30 * US, true);
            if polls_after.is_none() && window.poll_until_ns().is_some() {
                polls_after = Some(i + 1);
            }
        }
        let n = polls_after.expect("starts polling");
        assert!(n <= 8, "polling started after {n} requests");
    }

    #[test]
    fn one_long_gap_among_short_ones_does_not_stop_polling() {
        let mut window = PollWindow::new();
        let last = feed(&mut window, 0, 5 * US, 40);
        window.work_found(last + 2_000_000 * US, true);
        assert!(window.poll_until_ns().is_some(), "estimate {} us", window.gap_estimate_ns / US);
    }

    #[test]
    fn slowing_down_switches_to_blocking_and_speeding_up_back_to_polling() {
        let mut window = PollWindow::new();
        let mut now = feed(&mut window, 0, 5 * US, 40);
        assert!(window.poll_until_ns().is_some());
        for _ in 0..20 {
            now += 500 * US;
            window.work_found(now, true);
        }
        assert_eq!(window.poll_until_ns(), None);
        for _ in 0..20 {
            now += 5 * US;
            window.work_found(now, false);
        }
        assert!(window.poll_until_ns().is_some());
    }

    #[test]
    fn a_clock_that_goes_backwards_counts_as_no_gap() {
        let mut window = PollWindow::new();
        feed(&mut window, 1_000 * US, 5 * US, 40);
        window.work_found(10 * US, false);
        assert!(window.gap_estimate_ns < 10 * US);
        assert_eq!(window.poll_until_ns(), Some(10 * US + POLL_WINDOW_MIN_NS));
    }

    #[test]
    fn one_long_gap_does_not_trap_50_us_requests_in_blocking() {
        let mut window = PollWindow::new();
        let mut now = feed(&mut window, 0, 53 * US, 40);
        // The device stalls: a few long gaps, and the listener blocks (one
        // alone does not stop the polling).
        now += 2_000 * US;
        window.work_found(now, true);
        assert!(window.poll_until_ns().is_some());
        for _ in 0..2 {
            now += 2_000 * US;
            window.work_found(now, true);
        }
        assert_eq!(window.poll_until_ns(), None);
        // Requests 53 µs apart, each seen a wake-up (about 60 µs) late.
        let mut polls_after = None;
        for i in 0..10u32 {
            now += 53 * US + 60 * US;
            window.work_found(now, true);
            if window.poll_until_ns().is_some() {
                polls_after = Some(i + 1);
                break;
            }
        }
        let n = polls_after.expect("back to polling");
        assert!(n <= 6, "polling again after {n} requests");
    }

    #[test]
    fn requests_every_400_us_seen_after_waits_stay_blocked() {
        let mut window = PollWindow::new();
        let mut now = 0;
        for _ in 0..40 {
            now += 400 * US + 60 * US;
            window.work_found(now, true);
        }
        assert_eq!(window.poll_until_ns(), None);
    }

    #[test]
    fn window_never_exceeds_the_maximum() {
        let mut window = PollWindow::new();
        let last = feed(&mut window, 0, 250 * US, 60);
        let until = window.poll_until_ns().expect("polls below the runtime's poll and two wake-ups");
        assert_eq!(until - last, POLL_WINDOW_MAX_NS);
    }

    #[test]
    fn idle_waits_grow_to_the_maximum_and_a_ring_or_work_resets_them() {
        let mut idle = IdleTimeout::new();
        assert_eq!(idle.timeout(), Duration::from_millis(tunables::WAIT_TIMEOUT_MS));
        let mut seen = vec![idle.timeout().as_millis()];
        for _ in 0..5 {
            idle.after_wait(false, false);
            seen.push(idle.timeout().as_millis());
        }
        assert_eq!(seen, [100, 400, 1000, 1000, 1000, 1000]);
        // A wait ended by a ring (or followed by work) brings it back.
        idle.after_wait(true, false);
        assert_eq!(idle.timeout(), Duration::from_millis(100));
        idle.after_wait(false, false);
        idle.reset();
        assert_eq!(idle.timeout(), Duration::from_millis(100));
    }

    #[test]
    fn an_idle_listener_wakes_at_most_three_times_in_two_seconds_of_silence() {
        // Wake-ups in the two seconds that start 200 ms after the last work.
        let mut idle = IdleTimeout::new();
        let (mut now_ms, mut wakes) = (0u128, 0);
        while now_ms < 2_200 {
            now_ms += idle.timeout().as_millis();
            if (200..2_200).contains(&now_ms) {
                wakes += 1;
            }
            idle.after_wait(false, false);
        }
        assert!(wakes <= 3, "{wakes} wake-ups");
    }

    #[test]
    fn a_lost_ring_does_not_shorten_the_idle_waits() {
        // A lost ring (work after a wait that timed out) brings the timeout
        // back to the shortest once, as any work does; silence after it grows
        // the waits again to the idle maximum (the watch catches lost rings).
        let mut idle = IdleTimeout::new();
        for _ in 0..5 {
            idle.after_wait(false, false);
        }
        assert_eq!(idle.timeout(), Duration::from_millis(tunables::IDLE_WAIT_MAX_MS));
        idle.after_wait(false, true);
        assert_eq!(idle.timeout(), Duration::from_millis(tunables::WAIT_TIMEOUT_MS));
        let (mut now_ms, mut wakes) = (0u64, 0u64);
        while now_ms < 2_000 {
            now_ms += idle.timeout().as_millis() as u64;
            wakes += 1;
            idle.after_wait(false, false);
        }
        // 100, 400, 1000 ms and the one that ends past the two seconds.
        assert!(wakes <= 4, "{wakes} wake-ups in two silent seconds after a lost ring");
    }

    #[test]
    fn doorbell_quiet_waits_for_a_still_value() {
        // A phase-bit buffer's window (its device's ring throttle, 10 µs).
        const WINDOW: u64 = 10_000;
        let quiet_for = quiet_ns(WINDOW);
        assert_eq!(quiet_for, 20_000);
        let mut quiet = DoorbellQuiet::new();
        // First look: a move.
        assert!(!quiet.settled(5, 1_000_000, WINDOW));
        assert!(!quiet.settled(5, 1_000_000 + quiet_for - 1, WINDOW));
        assert!(quiet.settled(5, 1_000_000 + quiet_for, WINDOW));
        // A ring restarts the count from when it was seen.
        assert!(!quiet.settled(6, 2_000_000, WINDOW));
        assert!(!quiet.settled(6, 2_010_000, WINDOW));
        assert!(quiet.settled(6, 2_020_000, WINDOW));
        // A value going back (a wrap, or a reset) is a move too.
        assert!(!quiet.settled(5, 3_000_000, WINDOW));
    }
}
