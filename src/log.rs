//! Diagnostics to stderr, off by default.
//!
//! Follows ROCclr's convention: `AMD_LOG_LEVEL` = 0 (default) silent, 1 errors,
//! 2 warnings, 3 info, 4 debug. Nothing is formatted when the level is off.
//! An enabled message is formatted into one heap buffer and written with a
//! single `write(2)`, so lines from concurrent threads never interleave.
//! Logging never panics and ignores write errors (diagnostics must never
//! fail the caller).

use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::io::Write;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Error = 1,
    Warning = 2,
    Info = 3,
    Debug = 4,
}

/// 0xFF = not read yet. Relaxed is enough: every thread computes the same
/// value from the environment, so a race only repeats the same work.
static LEVEL: AtomicU8 = AtomicU8::new(0xFF);

/// The level from `AMD_LOG_LEVEL`, read once.
pub fn max_level() -> u8 {
    let cached = LEVEL.load(Ordering::Relaxed);
    if cached != 0xFF {
        return cached;
    }
    let level =
        std::env::var("AMD_LOG_LEVEL").ok().and_then(|v| v.trim().parse::<u8>().ok()).unwrap_or(0).min(4);
    LEVEL.store(level, Ordering::Relaxed);
    level
}

pub fn enabled(level: Level) -> bool {
    (level as u8) <= max_level()
}

/// Writes one line `amdgpu-dropin: <level>: <message>\n` with one write.
pub fn write_line(level: Level, args: core::fmt::Arguments<'_>) {
    let tag = match level {
        Level::Error => "error",
        Level::Warning => "warning",
        Level::Info => "info",
        Level::Debug => "debug",
    };
    let mut line = Vec::with_capacity(160);
    let _ = write!(line, "amdgpu-dropin: {tag}: ");
    let _ = line.write_fmt(args);
    line.push(b'\n');
    write_out(libc::STDERR_FILENO, &line);
}

/// Set once the first EPIPE was seen (and logged).
static BROKEN_PIPE_SEEN: AtomicBool = AtomicBool::new(false);

/// Writes all of `bytes` to `fd` (`sys::write_all`: no SIGPIPE); returns the
/// bytes written. The first write of the process to a pipe whose reader is
/// gone is logged, once.
pub fn write_out(fd: libc::c_int, bytes: &[u8]) -> usize {
    let written = crate::sys::write_all(fd, bytes);
    // Relaxed: only deduplicates a diagnostic.
    if written.broken_pipe && !BROKEN_PIPE_SEEN.swap(true, Ordering::Relaxed) {
        // Likely to the same broken pipe (stderr): then this line is lost
        // too, quietly, and never repeated.
        crate::log!(
            Level::Warning,
            "writing to fd {fd}: the pipe's reader is gone (EPIPE); output written there is dropped \
             (said once; the process goes on)"
        );
    }
    written.bytes
}

/// Describes a caught panic payload for the log (the C boundary and the
/// listener threads both catch panics and log them).
pub fn panic_message(payload: &(dyn core::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "non-string panic payload"
    }
}

/// `log!(Level::Warning, "fmt", args...)`: formats only when the level is on.
/// Crate-private; reached as `crate::log!` through the re-export in lib.rs.
macro_rules! log {
    ($level:expr, $($arg:tt)*) => {
        if $crate::log::enabled($level) {
            $crate::log::write_line($level, format_args!($($arg)*));
        }
    };
}
pub(crate) use log;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_broken_pipe_is_noted_once() {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: `fds` has room for the two descriptors pipe(2) writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fds[0] is the read end just created; nothing else uses it.
        unsafe { libc::close(fds[0]) };
        assert_eq!(write_out(fds[1], b"lost\n"), 0);
        assert!(BROKEN_PIPE_SEEN.load(Ordering::Relaxed));
        assert_eq!(write_out(fds[1], b"lost too\n"), 0);
        // SAFETY: `fds[1]` is ours.
        unsafe { libc::close(fds[1]) };
    }
}
