//! The listener's timing constants: the one place the C test suite takes
//! them from. cbindgen generates
//! `ctest/include/amdgpu_dropin_hostcall_constants.h` from this file and
//! `test_hooks.rs` (see build.rs; `tests/headers.rs` catches drift), so no
//! test hard-codes them.
//! Only plain integers and strings here: the Rust code builds its `Duration`s
//! from them where it uses them.

/// The longest the listener keeps polling after it last found work (µs);
/// the adaptive window (listener/pacing.rs) polls only while requests come often.
pub const POLL_WINDOW_US: u64 = 100;

/// Timeout of the listener's blocked doorbell wait (ms) while requests come.
pub const WAIT_TIMEOUT_MS: u64 = 100;

/// Idle, each blocked wait that times out with nothing rung and nothing found
/// makes the next one `IDLE_WAIT_GROWTH` times longer, up to this (ms): the
/// main listener's idle wake-up period (lost rings are the watch's).
pub const IDLE_WAIT_MAX_MS: u64 = 1000;
pub const IDLE_WAIT_GROWTH: u64 = 4;

/// The lost-ring watch (listener/lost_ring_watch.rs) looks this often (ms)
/// for requests no ring announced while the main listener sleeps, and acts
/// on what it still finds `LOST_RING_CONFIRM_US` later: every lost ring is
/// served within their sum and a wake-up, under 20 ms.
pub const LOST_RING_WATCH_MS: u64 = 15;
pub const LOST_RING_CONFIRM_US: u64 = 1000;

/// Longest process exit waits for listener threads to leave their loop (ms);
/// a thread still inside the HSA doorbell wait then (no ring could reach it)
/// is waited for up to `IDLE_WAIT_MAX_MS + EXIT_TIMEOUT_MS` more.
pub const EXIT_TIMEOUT_MS: u64 = 250;

/// Longest the last `disableHostcalls` waits for the listener to end (ms).
pub const STOP_TIMEOUT_MS: u64 = 5000;

/// A visit of a buffer longer than this plus `SLOW_PER_PACKET_US` per packet
/// served is slow (µs). The allowance per packet is well above what a
/// legitimate packet's work takes (a full-warp printf packet: about 25 µs on
/// a GPU's host), so only a service that blocks makes a buffer slow.
pub const SLOW_VISIT_US: u64 = 250;
pub const SLOW_PER_PACKET_US: u64 = 200;

/// Slow visits in a row before a buffer moves to the helper thread.
pub const SLOW_STREAK: u32 = 3;

/// A buffer on the helper that has been fast for this long comes back (ms).
pub const SLOW_DEMOTE_AFTER_MS: u64 = 1000;
