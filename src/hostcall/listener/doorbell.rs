//! The doorbell: the one HSA signal every enabled buffer names, which waves
//! ring after pushing a packet, and the listener's blocked wait on it.
//!
//! All HSA calls of the listener are here, resolved at run time through
//! `crate::hsa` (docs/listener.md#the-doorbell). Callers decide whether HSA may still be called
//! (`Listener::hsa_usable`); this module only makes the calls.

use core::ffi::c_void;
use std::time::Duration;

use hsa_sys::*;

use crate::log::Level;

/// HSA signal functions, resolved at run time.
#[derive(Clone, Copy)]
pub struct SignalApi {
    create: pfn_hsa_signal_create,
    destroy: pfn_hsa_signal_destroy,
    load: pfn_hsa_signal_load,
    add: pfn_hsa_signal_add,
    wait: pfn_hsa_signal_wait,
    /// hsa_system_get_info, if the runtime has it (`runtime_initialized`).
    get_info: Option<pfn_hsa_system_get_info>,
    /// Wait-timeout ticks per second (HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY).
    ticks_per_second: u64,
}

fn resolve_first<F: Copy>(names: &[&core::ffi::CStr]) -> Result<F, String> {
    let mut last = String::new();
    for name in names {
        // SAFETY: every caller passes names whose C signature is `F`.
        match unsafe { crate::hsa::resolve_fn::<F>(name) } {
            Ok(f) => return Ok(f),
            Err(e) => last = e,
        }
    }
    Err(last)
}

impl SignalApi {
    pub fn resolve() -> Result<SignalApi, String> {
        let create = resolve_first::<pfn_hsa_signal_create>(&[c"hsa_signal_create"])?;
        let destroy = resolve_first::<pfn_hsa_signal_destroy>(&[c"hsa_signal_destroy"])?;
        let load = resolve_first::<pfn_hsa_signal_load>(&[
            c"hsa_signal_load_scacquire",
            c"hsa_signal_load_acquire",
        ])?;
        let add =
            resolve_first::<pfn_hsa_signal_add>(&[c"hsa_signal_add_screlease", c"hsa_signal_add_release"])?;
        let wait = resolve_first::<pfn_hsa_signal_wait>(&[
            c"hsa_signal_wait_scacquire",
            c"hsa_signal_wait_acquire",
        ])?;
        let mut ticks_per_second = 1_000_000_000u64;
        let get_info = resolve_first::<pfn_hsa_system_get_info>(&[c"hsa_system_get_info"]).ok();
        if let Some(get_info) = get_info {
            let mut value = 0u64;
            // SAFETY: TIMESTAMP_FREQUENCY writes one uint64_t to the pointer.
            let status = unsafe {
                get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, (&mut value as *mut u64).cast::<c_void>())
            };
            if status == HSA_STATUS_SUCCESS && value > 0 {
                ticks_per_second = value;
            } else {
                crate::log!(
                    Level::Info,
                    "hostcall: hsa_system_get_info(TIMESTAMP_FREQUENCY) failed ({:#x}); assuming 1 GHz",
                    status
                );
            }
        }
        Ok(SignalApi { create, destroy, load, add, wait, get_info, ticks_per_second })
    }

    /// Creates the doorbell: value 1, no consumer restriction (as upstream).
    pub fn create_doorbell(self) -> Result<Doorbell, String> {
        let mut signal = hsa_signal_t::default();
        // SAFETY: resolved hsa_signal_create; `signal` is writable; NULL consumers with count 0.
        let status = unsafe { (self.create)(1, 0, core::ptr::null(), &mut signal) };
        if status != HSA_STATUS_SUCCESS {
            return Err(format!("hsa_signal_create failed: {}", crate::hsa::status_text(status)));
        }
        Ok(Doorbell { api: self, signal })
    }

    fn timeout_ticks(&self, timeout: Duration) -> u64 {
        (timeout.as_nanos() * u128::from(self.ticks_per_second) / 1_000_000_000).min(u64::MAX as u128) as u64
    }
}

/// How long ROCr's blocked wait polls the signal before it sleeps
/// (`InterruptSignal::WaitRelaxed`): every blocked wait not answered at once
/// costs this much CPU.
pub const RUNTIME_WAIT_POLL: Duration = Duration::from_micros(200);

/// After its first poll, ROCr's wait sleeps on the signal's event for the
/// time left rounded down to whole milliseconds, and polls whatever is left
/// below a millisecond. A timeout of whole milliseconds would therefore end
/// in up to 800 µs of polling; whole milliseconds plus the first poll and
/// 50 µs leave at most 50 µs (less the wake-up's own latency).
const ROCR_WAIT_SLACK: Duration = RUNTIME_WAIT_POLL.saturating_add(Duration::from_micros(50));

/// The timeout to pass for a wait of about `timeout` (at least 1 ms).
fn rocr_wait_timeout(timeout: Duration) -> Duration {
    let whole_ms = timeout.as_millis().clamp(1, u128::from(u32::MAX)) as u64;
    Duration::from_millis(whole_ms) + ROCR_WAIT_SLACK
}

/// One live doorbell signal. Destroyed only through `destroy`, which the
/// owner calls when HSA may still be called (never at exit).
pub struct Doorbell {
    api: SignalApi,
    signal: hsa_signal_t,
}

impl Doorbell {
    /// The signal handle buffers carry in their header.
    pub fn handle(&self) -> u64 {
        self.signal.handle
    }

    /// Ok when the HSA runtime answers a query (it has not been shut down);
    /// else why it cannot tell (the function is missing, or the query
    /// failed). Only called while the runtime's code is known to be mapped
    /// and its destructors not yet run (`registry::at_exit`).
    pub fn runtime_initialized(&self) -> Result<(), String> {
        let Some(get_info) = self.api.get_info else {
            return Err(
                "the HSA runtime has no hsa_system_get_info, so whether it still answers is unknown".into()
            );
        };
        let mut frequency = 0u64;
        // SAFETY: resolved hsa_system_get_info; TIMESTAMP_FREQUENCY writes one uint64_t.
        let status = unsafe {
            get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, (&mut frequency as *mut u64).cast::<c_void>())
        };
        if status == HSA_STATUS_SUCCESS {
            Ok(())
        } else {
            Err(format!("HSA no longer answers (hsa_system_get_info: {})", crate::hsa::status_text(status)))
        }
    }

    /// Changes the value so a blocked wait returns.
    pub fn ring(&self) {
        // SAFETY: resolved hsa_signal_add_screlease on our live signal.
        unsafe { (self.api.add)(self.signal, 1) };
    }

    /// The current value. Acquire: pairs with the waves' release add, so a
    /// push that preceded a ring we observe is seen by the scan that follows.
    pub fn load(&self) -> i64 {
        // SAFETY: resolved hsa_signal_load_scacquire on our live signal.
        unsafe { (self.api.load)(self.signal) }
    }

    /// Blocked wait until the value differs from `observed` or `timeout`
    /// passes; returns the value the wait saw last.
    pub fn wait_while_equal(&self, observed: i64, timeout: Duration) -> i64 {
        // SAFETY: resolved hsa_signal_wait_scacquire on our live signal.
        unsafe {
            (self.api.wait)(
                self.signal,
                HSA_SIGNAL_CONDITION_NE,
                observed,
                self.api.timeout_ticks(rocr_wait_timeout(timeout)),
                HSA_WAIT_STATE_BLOCKED,
            )
        }
    }

    /// Destroys the signal. The caller guarantees no thread uses it any more
    /// and no enabled buffer names it.
    pub fn destroy(&self) {
        // SAFETY: resolved hsa_signal_destroy on our live signal; see above.
        let status = unsafe { (self.api.destroy)(self.signal) };
        if status != HSA_STATUS_SUCCESS {
            crate::log!(Level::Warning, "hostcall: hsa_signal_destroy failed ({:#x})", status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_timeouts_are_whole_milliseconds_plus_the_initial_poll_and_a_little() {
        assert_eq!(rocr_wait_timeout(Duration::from_millis(100)), Duration::from_micros(100_250));
        assert_eq!(rocr_wait_timeout(Duration::from_micros(1_999)), Duration::from_micros(1_250));
        assert_eq!(rocr_wait_timeout(Duration::ZERO), Duration::from_micros(1_250));
        // What is left after ROCr's 200 µs poll rounds down to the whole
        // milliseconds asked for, so it sleeps all of them.
        for ms in [1u64, 100, 400, 1000] {
            let left_after_poll = rocr_wait_timeout(Duration::from_millis(ms)) - RUNTIME_WAIT_POLL;
            assert_eq!(left_after_poll.as_millis() as u64, ms);
        }
    }
}
