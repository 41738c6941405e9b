//! Diagnostics to stderr, off by default.
//!
//! Follows ROCclr's convention: `AMD_LOG_LEVEL` = 0 (default) silent, 1 errors,
//! 2 warnings, 3 info, 4 debug. Nothing is formatted when the level is off.
//! An enabled message is formatted into one heap buffer and written with a
//! single `write(2)`, so lines from concurrent threads never interleave.
//! Logging never panics and ignores write errors (diagnostics must never
//! fail the caller).

use core::sync::atomic::{AtomicU8, Ordering};
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
    crate::sys::write_all(libc::STDERR_FILENO, &line);
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
