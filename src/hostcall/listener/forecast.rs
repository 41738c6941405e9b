//! The pace forecast: when requests come at a steady pace too slow to poll
//! through (a kernel that calls the host once per iteration of a loop, every
//! millisecond), the listener knows roughly when the next one comes. A
//! blocked doorbell wait would pay the runtime's 200 µs poll and then a
//! wake-up after the request (tens of µs late, hundreds in the tail);
//! sleeping on a timer until a little before the expected request and then
//! polling costs one timer wake-up and the margin's polling, and the request
//! is found as it lands (docs/listener.md#the-pace-forecast).
//!
//! Pure like `pacing`: the caller passes the times (ns, any monotonic clock).
//!
//! * Only requests found one at a time count: a scan that serves several
//!   (waves answered together, whose next requests spread over the gap)
//!   ends the streak, so such waves keep waiting blocked.
//! * A forecast is made only after `STEADY_STREAK` gaps in a row each within
//!   an eighth of the estimated gap, and only for gaps between
//!   `MIN_GAP_NS` (below it the poll window polls through the gap) and
//!   `MAX_GAP_NS`.
//! * It says when to wake (the expected request less the margin) and until
//!   when to poll (the expected request plus the margin). The margin is
//!   `MARGIN_NS` plus twice the gaps' mean deviation.
//! * A request that is already there when the thread woke on time came early,
//!   and a poll that ends with nothing came too late: either way the pace
//!   is not steady, and the streak starts again (until then the listener
//!   waits blocked, as without a forecast). A request found late because the
//!   thread's own timer fired late says nothing about the pace: that gap
//!   and the next are not judged.

use super::pacing::SPIN_WHILE_GAP_BELOW_NS;

/// Shortest gap forecast: shorter gaps are polled through (`PollWindow`).
pub const MIN_GAP_NS: u64 = SPIN_WHILE_GAP_BELOW_NS;
/// Longest gap forecast: beyond it a blocked wait's cost is small beside the
/// gap, and a sleep that no ring can end would hold a new buffer or a stop
/// for long.
pub const MAX_GAP_NS: u64 = 10_000_000;
/// Gaps in a row within tolerance before the first forecast.
pub const STEADY_STREAK: u32 = 8;
/// How far before the expected request the thread wakes, and how long after
/// it keeps polling, beyond twice the gaps' deviation: a timer on a busy host
/// fires tens of µs late (the default timer slack alone is 50 µs).
pub const MARGIN_NS: u64 = 150_000;
/// A wake-up later than this past the planned time was the timer's fault:
/// what it finds says nothing about the pace.
pub const WOKE_LATE_NS: u64 = MARGIN_NS / 2;
/// A sleep shorter than this is not worth a timer wake-up: poll instead.
pub const MIN_SLEEP_NS: u64 = super::pacing::WAKE_COST_NS;

/// What to do until the next request, when it is forecast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Sleep until then (None: poll from now on).
    pub wake_at: Option<u64>,
    /// Poll until then; nothing by then: the forecast missed.
    pub poll_until: u64,
}

/// The pace of requests found one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaceForecast {
    /// When work was last found.
    last_ns: Option<u64>,
    /// Weighted mean gap and mean absolute deviation of gaps (ns).
    gap_ns: u64,
    deviation_ns: u64,
    /// Gaps in a row within tolerance.
    streak: u32,
    /// Gaps still to let pass unjudged (after a find the timer made late).
    unjudged: u8,
}

impl Default for PaceForecast {
    fn default() -> Self {
        Self::new()
    }
}

impl PaceForecast {
    pub const fn new() -> PaceForecast {
        PaceForecast { last_ns: None, gap_ns: 0, deviation_ns: 0, streak: 0, unjudged: 0 }
    }

    /// Work found at `now_ns`: `served` packets in one scan; `timer_late`:
    /// it was found late because the thread's forecast sleep ended late.
    pub fn work_found(&mut self, now_ns: u64, served: u32, timer_late: bool) {
        if served > 1 {
            // Not one request at a time.
            self.last_ns = Some(now_ns);
            self.streak = 0;
            return;
        }
        if timer_late {
            self.unjudged = 2;
        }
        let Some(last) = self.last_ns.replace(now_ns) else {
            return;
        };
        let gap = now_ns.saturating_sub(last);
        if self.unjudged > 0 {
            self.unjudged -= 1;
            return;
        }
        let off = gap.abs_diff(self.gap_ns);
        if self.streak > 0 && off <= self.gap_ns / 8 {
            self.streak = self.streak.saturating_add(1);
        } else {
            // The first gap of a streak sets the estimate.
            self.streak = 1;
            self.gap_ns = gap;
            self.deviation_ns = 0;
            return;
        }
        // Weight 1/4 for the newest gap, as `PollWindow`.
        self.gap_ns = (3 * self.gap_ns + gap) / 4;
        self.deviation_ns = (3 * self.deviation_ns + off) / 4;
    }

    /// The forecast missed (nothing by `poll_until`, or the request came
    /// well before the planned wake-up): wait blocked until the pace is
    /// steady again.
    pub fn missed(&mut self) {
        self.streak = 0;
    }

    /// Whether the pace is steady enough to forecast.
    fn steady(&self) -> bool {
        self.streak >= STEADY_STREAK && (MIN_GAP_NS..=MAX_GAP_NS).contains(&self.gap_ns)
    }

    /// The plan until the next request, if it is forecast and not yet
    /// overdue at `now_ns`.
    pub fn plan(&self, now_ns: u64) -> Option<Plan> {
        if !self.steady() {
            return None;
        }
        let expected = self.last_ns?.saturating_add(self.gap_ns);
        let margin = (MARGIN_NS + 2 * self.deviation_ns).min(self.gap_ns / 2);
        let poll_until = expected.saturating_add(margin);
        if now_ns >= poll_until {
            return None;
        }
        let wake_at = expected.saturating_sub(margin);
        let wake_at = (wake_at > now_ns.saturating_add(MIN_SLEEP_NS)).then_some(wake_at);
        Some(Plan { wake_at, poll_until })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// Feeds finds `gap` apart from `start`; returns the last find's time.
    fn feed(forecast: &mut PaceForecast, start: u64, gap: u64, count: u32) -> u64 {
        let mut now = start;
        for _ in 0..count {
            forecast.work_found(now, 1, false);
            now += gap;
        }
        now - gap
    }

    /// Feeds `count` finds whose gaps alternate between `first` and
    /// `second`; returns the last find's time.
    fn feed_alternating(forecast: &mut PaceForecast, first: u64, second: u64, count: u64) -> u64 {
        let mut now = 0;
        for i in 0..count {
            now += if i % 2 == 0 { first } else { second };
            forecast.work_found(now, 1, false);
        }
        now
    }

    #[test]
    fn a_steady_millisecond_is_forecast_after_the_streak() {
        let mut forecast = PaceForecast::new();
        let last = feed(&mut forecast, 0, 1_000 * US, STEADY_STREAK);
        assert_eq!(forecast.plan(last), None, "one gap short of the streak");
        let last = feed(&mut forecast, last + 1_000 * US, 1_000 * US, 1);
        let plan = forecast.plan(last + 2 * US).expect("steady");
        assert_eq!(plan, Plan { wake_at: Some(last + 850 * US), poll_until: last + 1_150 * US });
        // Past the planned wake-up: poll at once; past the end: no plan.
        assert_eq!(forecast.plan(last + 900 * US).unwrap().wake_at, None);
        assert_eq!(forecast.plan(last + 1_150 * US), None);
    }

    #[test]
    fn jitter_widens_the_margin() {
        let mut forecast = PaceForecast::new();
        let now = feed_alternating(&mut forecast, 960 * US, 1_040 * US, 40);
        let plan = forecast.plan(now).expect("within an eighth");
        let margin = plan.poll_until - now - forecast.gap_ns;
        assert!(
            margin > MARGIN_NS + 40 * US && margin <= MARGIN_NS + 2 * 80 * US,
            "margin {} us",
            margin / US
        );
    }

    #[test]
    fn uneven_bursty_fast_or_slow_paces_are_not_forecast() {
        let mut uneven = PaceForecast::new();
        let now = feed_alternating(&mut uneven, 600 * US, 1_400 * US, 40);
        assert_eq!(uneven.plan(now), None);
        // Sixteen waves answered together, then a millisecond.
        let mut bursty = PaceForecast::new();
        let mut now = 0;
        for i in 0..160u64 {
            now += if i % 16 == 0 { 1_000 * US } else { 2 * US };
            bursty.work_found(now, 1, false);
        }
        assert_eq!(bursty.plan(now), None);
        for gap in [MIN_GAP_NS - 1, MAX_GAP_NS + 1] {
            let mut forecast = PaceForecast::new();
            let last = feed(&mut forecast, 0, gap, 40);
            assert_eq!(forecast.plan(last), None, "gap {gap} ns");
        }
        let mut at_the_bounds = PaceForecast::new();
        let last = feed(&mut at_the_bounds, 0, MIN_GAP_NS, 40);
        assert!(at_the_bounds.plan(last).is_some());
    }

    #[test]
    fn requests_served_together_are_not_one_at_a_time() {
        // Sixteen waves whose requests one scan serves together, once a
        // millisecond: steady gaps between scans, but not one request each.
        let mut forecast = PaceForecast::new();
        let mut now = 0;
        for _ in 0..40 {
            now += 1_000 * US;
            forecast.work_found(now, 16, false);
        }
        assert_eq!(forecast.plan(now), None);
        // One of them alone breaks a streak of single requests.
        let last = feed(&mut forecast, now + 1_000 * US, 1_000 * US, 20);
        assert!(forecast.plan(last).is_some());
        forecast.work_found(last + 1_000 * US, 2, false);
        assert_eq!(forecast.plan(last + 1_000 * US), None);
    }

    #[test]
    fn a_miss_stops_forecasting_until_the_pace_is_steady_again() {
        let mut forecast = PaceForecast::new();
        let last = feed(&mut forecast, 0, 1_000 * US, 20);
        assert!(forecast.plan(last).is_some());
        forecast.missed();
        assert_eq!(forecast.plan(last), None);
        let last = feed(&mut forecast, last + 3_000 * US, 1_000 * US, STEADY_STREAK);
        assert_eq!(forecast.plan(last), None, "the gap of the miss starts a new streak");
        let last = feed(&mut forecast, last + 1_000 * US, 1_000 * US, 1);
        assert!(forecast.plan(last).is_some());
    }

    #[test]
    fn a_late_timer_neither_breaks_the_streak_nor_moves_the_estimate() {
        let mut forecast = PaceForecast::new();
        let mut now = feed(&mut forecast, 0, 1_000 * US, 20);
        // Found 400 µs late (the timer), then the next on the device's pace
        // from that answer, and the one after from the usual.
        now += 1_400 * US;
        forecast.work_found(now, 1, true);
        now += 1_000 * US;
        forecast.work_found(now, 1, false);
        let plan = forecast.plan(now).expect("still steady");
        assert_eq!(plan.poll_until, now + 1_000 * US + MARGIN_NS);
        // A device whose pace ignores the answers: late, then early.
        now += 1_400 * US;
        forecast.work_found(now, 1, true);
        now += 600 * US;
        forecast.work_found(now, 1, false);
        assert!(forecast.plan(now).is_some());
    }

    #[test]
    fn a_clock_that_goes_backwards_counts_as_an_uneven_gap() {
        let mut forecast = PaceForecast::new();
        let last = feed(&mut forecast, 10_000 * US, 1_000 * US, 20);
        forecast.work_found(last - 5 * US, 1, false);
        assert_eq!(forecast.plan(last), None);
    }
}
