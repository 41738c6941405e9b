//! A request channel in a protocol of the caller's own (ROCclr's RPC
//! buffers), served by the caller's poll callback
//! (`amdgpu_dropin_hostcall_register_poll`): the listener visits it like a
//! buffer (`Buffer::Poll`), and the callback serves whatever the channel
//! holds. The library never reads the channel; `key` only names it.

use core::ffi::c_void;

use crate::log::Level;
use core::sync::atomic::{AtomicBool, Ordering};

/// The non-NULL form of `amdgpu_dropin_hostcall_poll_fn`:
/// `(user_data, key) -> 1 served something, 0 nothing, < 0 failed`.
pub type PollFn = unsafe extern "C-unwind" fn(*mut c_void, *mut c_void) -> i32;

/// One registered poll.
pub struct PollChannel {
    key: usize,
    function: PollFn,
    user_data: usize,
    /// A failure was logged (once per registration).
    failure_logged: AtomicBool,
}

impl PollChannel {
    pub fn new(key: usize, function: PollFn, user_data: usize) -> PollChannel {
        PollChannel { key, function, user_data, failure_logged: AtomicBool::new(false) }
    }

    /// The key the channel was registered under.
    pub fn key(&self) -> usize {
        self.key
    }

    /// Calls the poll once; true when it served something. Only from inside
    /// the entry's gate: the registration's contract holds until unregister,
    /// which waits for the gate.
    pub fn poll(&self) -> bool {
        // SAFETY: the registration contract: `function` may be called with
        // `user_data` and `key` until unregister returns, and unregister
        // closes the gate this call is inside and waits for it.
        let outcome = unsafe { (self.function)(self.user_data as *mut c_void, self.key as *mut c_void) };
        if outcome < 0 {
            // Relaxed: only deduplicates a diagnostic.
            if !self.failure_logged.swap(true, Ordering::Relaxed) {
                crate::log!(
                    Level::Error,
                    "hostcall: the poll registered for key {:#x} returned {outcome} (failed); taken as \
                     nothing served (logged once)",
                    self.key
                );
            }
            return false;
        }
        outcome > 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicI32;

    unsafe extern "C-unwind" fn counted(user: *mut c_void, key: *mut c_void) -> i32 {
        // SAFETY: the tests pass a live AtomicI32 as user data.
        let next = unsafe { &*(user as *const AtomicI32) };
        assert_eq!(key as usize, 0x5000);
        next.load(Ordering::Relaxed)
    }

    #[test]
    fn a_poll_reports_work_nothing_or_a_failure_taken_as_nothing() {
        let answer = AtomicI32::new(1);
        let channel = PollChannel::new(0x5000, counted, &answer as *const AtomicI32 as usize);
        assert!(channel.poll(), "1: served something");
        answer.store(0, Ordering::Relaxed);
        assert!(!channel.poll(), "0: nothing pending");
        answer.store(7, Ordering::Relaxed);
        assert!(channel.poll(), "any positive value is work");
        answer.store(-3, Ordering::Relaxed);
        assert!(!channel.poll(), "a failure serves nothing");
        assert!(channel.failure_logged.load(Ordering::Relaxed));
        assert_eq!(channel.key(), 0x5000);
    }
}
