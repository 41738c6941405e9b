//! The listener's clock: nanoseconds on a monotonic clock, behind a trait so
//! the classifier's and the visits' decisions are unit-tested with made-up
//! clocks.

use std::time::Instant;

/// Nanoseconds on a monotonic clock.
pub type Nanos = u64;

/// A clock for the classifier and the listener threads.
pub trait Clock {
    fn now(&self) -> Nanos;
}

/// The process-wide monotonic clock the listener uses.
#[derive(Clone, Copy, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    fn now(&self) -> Nanos {
        // Lock-free (docs/process.md): a fork can never find it half made.
        static ORIGIN: crate::race_once::RaceOnce<Instant> = crate::race_once::RaceOnce::new();
        ORIGIN.get_or_make(Instant::now).elapsed().as_nanos() as Nanos
    }
}
