//! The listener's clock: nanoseconds on a monotonic clock, behind a trait so
//! the classifier's and the visits' decisions are unit-tested with made-up
//! clocks.

/// Nanoseconds on a monotonic clock.
pub type Nanos = u64;

/// A clock for the classifier and the listener threads.
pub trait Clock {
    fn now(&self) -> Nanos;
}

/// The monotonic clock the listener uses (`CLOCK_MONOTONIC`, from boot: no
/// process-wide origin to make, so nothing a fork could find half made).
#[derive(Clone, Copy, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Nanos {
        crate::sys::monotonic_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_monotonic_and_counts_nanoseconds() {
        let clock = MonotonicClock;
        let first = clock.now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let second = clock.now();
        assert!(second >= first + 2_000_000, "a 2 ms sleep moved the clock {} ns", second - first);
        assert!(clock.now() >= second);
    }
}
