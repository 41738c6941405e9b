//! The one way a caller waits for a listener thread to let go of something
//! (a buffer's gate on disable, a handler's running calls on unregister):
//! yield briefly, then sleep in short steps, and say periodically why it is
//! still waiting.

use std::time::{Duration, Instant};

/// How often a waiting caller says why it is still waiting.
pub const WARN_PERIOD: Duration = Duration::from_secs(1);

/// Returns once `done()` is true; calls `warn(waited so far)` every `WARN_PERIOD`.
pub fn wait_until(mut done: impl FnMut() -> bool, mut warn: impl FnMut(Duration)) {
    let start = Instant::now();
    let mut warned = start;
    let mut step = 0u32;
    while !done() {
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
}
