//! The one way a caller waits for a listener thread to let go of something
//! (a buffer's gate on disable, a handler's running calls on unregister, a
//! stopping listener, the threads at exit): yield briefly, then sleep in
//! short steps, until done or a deadline, and say periodically why it is
//! still waiting.

use std::time::{Duration, Instant};

/// How often a waiting caller says why it is still waiting.
pub const WARN_PERIOD: Duration = Duration::from_secs(1);

/// Returns once `done()` is true; calls `warn(waited so far)` every `WARN_PERIOD`.
pub fn wait_until(done: impl FnMut() -> bool, warn: impl FnMut(Duration)) {
    wait(done, None, warn);
}

/// Returns true once `done()` is true, false when `timeout` passed first.
pub fn wait_for(timeout: Duration, done: impl FnMut() -> bool) -> bool {
    wait(done, Some(Instant::now() + timeout), |_| {})
}

/// The one loop: until `done()` or `deadline`, yield (the first 64 rounds),
/// then sleep 200 µs a round; `warn` every `WARN_PERIOD`. True when done.
fn wait(mut done: impl FnMut() -> bool, deadline: Option<Instant>, mut warn: impl FnMut(Duration)) -> bool {
    let start = Instant::now();
    let mut warned = start;
    let mut step = 0u32;
    loop {
        if done() {
            return true;
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return false;
        }
        if step < 64 {
            std::thread::yield_now();
            step += 1;
        } else {
            std::thread::sleep(Duration::from_micros(200));
        }
        if warned.elapsed() >= WARN_PERIOD {
            warned = Instant::now();
            warn(start.elapsed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_when_done_without_warning_early() {
        let mut polls = 0;
        let mut warnings = 0;
        wait_until(
            || {
                polls += 1;
                polls > 100
            },
            |_| warnings += 1,
        );
        assert_eq!(polls, 101);
        assert_eq!(warnings, 0);
    }

    #[test]
    fn a_deadline_ends_the_wait_and_done_wins_over_it() {
        assert!(!wait_for(Duration::ZERO, || false), "never done: the deadline ends it");
        assert!(wait_for(Duration::ZERO, || true), "done at the first look");
        let mut polls = 0;
        assert!(wait_for(Duration::from_secs(3600), || {
            polls += 1;
            polls == 70
        }));
        assert_eq!(polls, 70, "past the yields, into the sleeps");
    }
}
