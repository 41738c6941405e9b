//! The services behind the packets: FUNCTION_CALL, PRINTF, and the defined
//! answer to everything else.
//!
//! Error value: a lane whose request cannot be served (unknown service id,
//! FUNCTION_CALL with a NULL function, a panic inside a service) gets
//! `ERROR_VALUE` (u64::MAX, i.e. -1) in slot[0]; its other words are left as
//! the device wrote them. READY is cleared as for any other packet, so the
//! wave always continues. Upstream aborts the process instead.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::layout::SLOT_WORDS;
use super::printf::PrintfService;
use crate::log::Level;

/// Service id: call a host function named by the device.
pub const SERVICE_FUNCTION_CALL: u32 = 1;
/// Service id: device printf (message protocol, `printf/`).
pub const SERVICE_PRINTF: u32 = 2;

/// slot[0] of a lane whose request failed.
pub const ERROR_VALUE: u64 = super::tunables::ERROR_VALUE;

/// The FUNCTION_CALL signature: `void f(uint64_t out[2], const uint64_t in[7])`.
type HostFunction = unsafe extern "C" fn(out: *mut u64, input: *const u64);

/// Unknown ids are logged once each, up to this many distinct ids.
const MAX_LOGGED_UNKNOWN_IDS: usize = 64;

pub struct Services {
    printf: PrintfService,
    unknown_logged: spin::Mutex<Vec<u32>>,
    /// Requests with this id panic (test builds only).
    #[cfg(any(test, feature = "test-hooks"))]
    panic_service: Option<u32>,
}

impl Services {
    pub fn new() -> Services {
        Services {
            printf: PrintfService::new(),
            unknown_logged: spin::Mutex::new(Vec::new()),
            #[cfg(any(test, feature = "test-hooks"))]
            panic_service: cfg!(feature = "test-hooks").then_some(super::tunables::TEST_PANIC_SERVICE),
        }
    }

    /// Answers one active lane of a packet. Never unwinds: a panic in a
    /// service is caught here, logged, and answered with `ERROR_VALUE`.
    pub fn serve_lane(&self, buffer_key: usize, service: u32, lane: u32, slot: &mut [u64; SLOT_WORDS]) {
        let result = catch_unwind(AssertUnwindSafe(|| self.dispatch(buffer_key, service, lane, slot)));
        if let Err(payload) = result {
            crate::log!(
                Level::Error,
                "hostcall listener: service {} panicked on buffer {:#x} lane {}: {}; \
                 the lane gets the error value and the listener keeps serving",
                service,
                buffer_key,
                lane,
                crate::log::panic_message(&*payload)
            );
            slot[0] = ERROR_VALUE;
        }
    }

    /// Drops per-buffer state (on disable).
    pub fn forget_buffer(&self, buffer_key: usize) {
        self.printf.forget_buffer(buffer_key);
    }

    fn dispatch(&self, buffer_key: usize, service: u32, lane: u32, slot: &mut [u64; SLOT_WORDS]) {
        #[cfg(any(test, feature = "test-hooks"))]
        if self.panic_service == Some(service) {
            panic!("amdgpu-dropin test hook: requested panic in service {service:#x}");
        }
        match service {
            SERVICE_FUNCTION_CALL => function_call(slot),
            SERVICE_PRINTF => self.printf.serve_lane(buffer_key, lane, slot),
            unknown => {
                self.log_unknown(unknown, buffer_key);
                slot[0] = ERROR_VALUE;
            }
        }
    }

    fn log_unknown(&self, service: u32, buffer_key: usize) {
        if !crate::log::enabled(Level::Error) {
            return;
        }
        let first = {
            let mut seen = self.unknown_logged.lock();
            if seen.contains(&service) || seen.len() >= MAX_LOGGED_UNKNOWN_IDS {
                false
            } else {
                seen.push(service);
                true
            }
        };
        if first {
            crate::log!(
                Level::Error,
                "hostcall: unknown service id {} (first seen on buffer {:#x}); its lanes get -1 \
                 in slot[0] (logged once per id)",
                service,
                buffer_key
            );
        }
    }
}

/// FUNCTION_CALL: slot[0] = address of a `HostFunction`, slot[1..8] its
/// 7 inputs; its 2 outputs go to slot[0..2]. A NULL address is answered with
/// `ERROR_VALUE` in slot[0].
fn function_call(slot: &mut [u64; SLOT_WORDS]) {
    let address = slot[0] as usize;
    if address == 0 {
        crate::log!(Level::Error, "hostcall: FUNCTION_CALL with a NULL function; lane gets -1");
        slot[0] = ERROR_VALUE;
        return;
    }
    let input: [u64; 7] = core::array::from_fn(|i| slot[i + 1]);
    let mut out = [0u64; 2];
    // SAFETY: the FUNCTION_CALL contract: device code places in slot[0] the
    // address of a host function of this process with the `HostFunction`
    // signature (the host application handed it to the kernel). The address
    // cannot be verified; `out` and `input` are live arrays of 2 and 7 words.
    // A C++ exception escaping the function terminates the process, as with
    // any `extern "C"` callback.
    unsafe {
        let function = core::mem::transmute::<usize, HostFunction>(address);
        function(out.as_mut_ptr(), input.as_ptr());
    }
    slot[0] = out[0];
    slot[1] = out[1];
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn sum_and_xor(out: *mut u64, input: *const u64) {
        // SAFETY: called by `function_call` with 2 and 7 valid words.
        let input = unsafe { core::slice::from_raw_parts(input, 7) };
        // SAFETY: as above.
        let out = unsafe { core::slice::from_raw_parts_mut(out, 2) };
        out[0] = input.iter().copied().fold(0u64, u64::wrapping_add);
        out[1] = input.iter().fold(0, |a, b| a ^ b);
    }

    #[test]
    fn function_call_passes_seven_inputs_and_returns_two_words() {
        let services = Services::new();
        let mut slot = [
            sum_and_xor as unsafe extern "C" fn(*mut u64, *const u64) as usize as u64,
            3,
            5,
            7,
            11,
            13,
            17,
            19,
        ];
        services.serve_lane(0x1000, SERVICE_FUNCTION_CALL, 0, &mut slot);
        assert_eq!(slot[0], 75, "sum of the 7 inputs");
        assert_eq!(slot[1], 5, "xor of the 7 inputs");
        assert_eq!(slot[2..], [5, 7, 11, 13, 17, 19]);
    }

    #[test]
    fn null_function_and_unknown_service_answer_minus_one() {
        let services = Services::new();
        let mut slot = [0, 9, 9, 9, 9, 9, 9, 9];
        services.serve_lane(0x1000, SERVICE_FUNCTION_CALL, 0, &mut slot);
        assert_eq!(slot, [ERROR_VALUE, 9, 9, 9, 9, 9, 9, 9]);
        for id in [0u32, 3, 4, 77, u32::MAX] {
            let mut slot = [5; 8];
            services.serve_lane(0x1000, id, 3, &mut slot);
            assert_eq!(slot[0], ERROR_VALUE, "id {id}");
            assert_eq!(slot[1..], [5; 7]);
        }
    }

    #[test]
    fn a_panicking_service_is_answered_with_minus_one() {
        let mut services = Services::new();
        services.panic_service = Some(9);
        let mut slot = [5; 8];
        services.serve_lane(0x1000, 9, 0, &mut slot);
        assert_eq!(slot[0], ERROR_VALUE);
        // The service object is still usable.
        let mut slot =
            [sum_and_xor as unsafe extern "C" fn(*mut u64, *const u64) as usize as u64, 1, 1, 1, 1, 1, 1, 1];
        services.serve_lane(0x1000, SERVICE_FUNCTION_CALL, 0, &mut slot);
        assert_eq!(slot[0], 7);
    }
}
