//! A request channel in a protocol of the caller's own (ROCclr's RPC
//! buffers), served by the caller's poll callback
//! (`amdgpu_dropin_hostcall_register_poll`): the listener visits it like a
//! buffer (`Buffer::Poll`), and the callback serves whatever the channel
//! holds. The library never reads the channel; `key` only names it.

use core::ffi::c_void;

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

    /// Calls the poll once: whether it served something, and the outcome of
    /// a failure (< 0, taken as nothing served) when it is this
    /// registration's first, for the caller to log once. Only from inside
    /// the entry's gate: the registration's contract holds until unregister,
    /// which waits for the gate.
    #[inline]
    pub fn poll(&self) -> Polled {
        // SAFETY: the registration contract: `function` may be called with
        // `user_data` and `key` until unregister returns, and unregister
        // closes the gate this call is inside and waits for it.
        let outcome = unsafe { (self.function)(self.user_data as *mut c_void, self.key as *mut c_void) };
        if outcome < 0 {
            // Relaxed: only deduplicates a diagnostic.
            let first = !self.failure_logged.swap(true, Ordering::Relaxed);
            return Polled { served: false, first_failure: first.then_some(outcome) };
        }
        Polled { served: outcome > 0, first_failure: None }
    }
}

/// What one call of a poll did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polled {
    /// It served something.
    pub served: bool,
    /// It failed with this outcome, for the first time since it was registered.
    pub first_failure: Option<i32>,
}

#[cfg(test)]
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
        let served = |served| Polled { served, first_failure: None };
        assert_eq!(channel.poll(), served(true), "1: served something");
        answer.store(0, Ordering::Relaxed);
        assert_eq!(channel.poll(), served(false), "0: nothing pending");
        answer.store(7, Ordering::Relaxed);
        assert_eq!(channel.poll(), served(true), "any positive value is work");
        answer.store(-3, Ordering::Relaxed);
        assert_eq!(
            channel.poll(),
            Polled { served: false, first_failure: Some(-3) },
            "a failure serves nothing"
        );
        assert_eq!(channel.poll(), served(false), "the failure is reported once");
    }
}
