//! A buffer's counters (part of `include/amdgpu_dropin_hostcall.h`): what the
//! listener did for it since it was enabled.
//!
//! Only argument checks, logging, the panic boundary and status conversion
//! live here; the counting is in `crate::hostcall::counters`.

use core::ffi::c_void;

use static_assertions::const_assert_eq;

use crate::ffi::hostcall_ext::amdgpu_dropin_hostcall_status_t;
use crate::ffi::hostcall_ext::amdgpu_dropin_hostcall_status_t as Status;
use crate::ffi::panic::ffi_boundary;
use crate::hostcall::counters::{Counts, COUNTER_SERVICES};
use crate::hostcall::{self};
use crate::log::Level;

/// Service slots of `amdgpu_dropin_hostcall_counters_t`: ids 0 to 6 each in
/// their own, every other id in the last.
pub const AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES: usize = 8;
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES, COUNTER_SERVICES);

/// What the listener did for one buffer since it was enabled, as
/// `amdgpu_dropin_hostcall_get_counters` fills it in. Counting costs the
/// listener no locked instruction; a count read while the listener serves
/// is at most a few packets old. The same counts are logged at
/// `AMD_LOG_LEVEL` 3 or more when the buffer is disabled.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct amdgpu_dropin_hostcall_counters_t {
    /// Set by the caller to `sizeof(amdgpu_dropin_hostcall_counters_t)`
    /// before the call; a larger value (a later version of this struct) is
    /// accepted and the part this version knows is filled in.
    pub size: u32,
    /// Zero.
    pub reserved: u32,
    /// Packets served, by service id: ids 0 to 6 each in their slot (1
    /// FUNCTION_CALL, 2 PRINTF, 3 DEVMEM, 4 SANITIZER), every other id in
    /// slot 7.
    pub packets: [u64; AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES],
    /// Active lanes of those packets, slotted as `packets`.
    pub lanes: [u64; AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES],
    /// Changes of the doorbell's value the listener saw (one may stand for
    /// several rings that came together). The doorbell and its waits are the
    /// listener's, shared by every buffer it serves: this and the next two
    /// count since this buffer was enabled.
    pub doorbell_rings: u64,
    /// Blocked doorbell waits the listener made.
    pub blocked_waits: u64,
    /// Of those, the waits that ended at their timeout.
    pub wait_timeouts: u64,
    /// Lost rings: requests of this buffer found by a scan that no ring
    /// announced (after a wait that timed out, or woken by the listener's
    /// lost-ring watch).
    pub lost_rings: u64,
    /// Times this buffer was moved to the helper thread for slow buffers.
    pub helper_handoffs: u64,
    /// The longest one packet's service took, in nanoseconds (timed for the
    /// first packet of every visit of the buffer; a visit of one packet is
    /// all of it).
    pub longest_service_ns: u64,
}

impl From<&Counts> for amdgpu_dropin_hostcall_counters_t {
    fn from(c: &Counts) -> Self {
        amdgpu_dropin_hostcall_counters_t {
            size: core::mem::size_of::<amdgpu_dropin_hostcall_counters_t>() as u32,
            reserved: 0,
            packets: c.packets,
            lanes: c.lanes,
            doorbell_rings: c.doorbell_rings,
            blocked_waits: c.blocked_waits,
            wait_timeouts: c.wait_timeouts,
            lost_rings: c.lost_rings,
            helper_handoffs: c.helper_handoffs,
            longest_service_ns: c.longest_service_ns,
        }
    }
}

/// Copies the counters of `buffer` (enabled in either protocol) into `*out`.
/// `out->size` must be set to `sizeof(amdgpu_dropin_hostcall_counters_t)`
/// (or more) first; the library sets it to the size it wrote.
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL or misaligned `out`, `out->size`
/// too small, NULL `buffer`; `*out` untouched), `_ERROR_NOT_ENABLED`.
///
/// # Safety
/// `out`, if non-NULL and 8-aligned, must be valid for reads of its `size`
/// field and writes of `out->size` bytes (at least the struct). `buffer` is
/// only compared with the enabled buffers.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_get_counters(
    buffer: *const c_void,
    out: *mut amdgpu_dropin_hostcall_counters_t,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_get_counters", {
        let size = core::mem::size_of::<amdgpu_dropin_hostcall_counters_t>();
        if out.is_null() || out.align_offset(core::mem::align_of::<amdgpu_dropin_hostcall_counters_t>()) != 0
        {
            crate::log!(
                Level::Warning,
                "amdgpu_dropin_hostcall_get_counters: out {out:p} is NULL or misaligned"
            );
            return Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: non-NULL and aligned (checked); the caller's contract makes
        // the size field readable.
        let given = unsafe { core::ptr::addr_of!((*out).size).read() } as usize;
        if given < size {
            crate::log!(
                Level::Warning,
                "amdgpu_dropin_hostcall_get_counters: out->size is {given}, at least {size} needed"
            );
            return Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT;
        }
        match hostcall::counters(buffer) {
            Ok(counts) => {
                // SAFETY: the caller's contract: `out` is writable for
                // `out->size` >= `size` bytes (checked).
                unsafe { out.write(amdgpu_dropin_hostcall_counters_t::from(&counts)) };
                Status::AMDGPU_DROPIN_HOSTCALL_OK
            }
            Err(error) => {
                let status = Status::from(&error);
                crate::log!(
                    Level::Warning,
                    "amdgpu_dropin_hostcall_get_counters(buffer={buffer:p}): {error} ({})",
                    status.text().to_string_lossy()
                );
                status
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_arguments_are_refused_and_leave_out_alone() {
        assert_eq!(
            // SAFETY: NULL is refused before any access.
            unsafe { amdgpu_dropin_hostcall_get_counters(core::ptr::null(), core::ptr::null_mut()) },
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT
        );
        let mut out = amdgpu_dropin_hostcall_counters_t::from(&Counts::default());
        out.size = 8;
        out.lost_rings = 77;
        let buffer = 0x1000 as *const c_void;
        // SAFETY: `out` is a valid struct; the buffer is only compared.
        let status = unsafe { amdgpu_dropin_hostcall_get_counters(buffer, &mut out) };
        assert_eq!(status, Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
        assert_eq!(out.lost_rings, 77);
        out.size = core::mem::size_of::<amdgpu_dropin_hostcall_counters_t>() as u32;
        // SAFETY: as above.
        let status = unsafe { amdgpu_dropin_hostcall_get_counters(buffer, &mut out) };
        assert_eq!(status, Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED);
        assert_eq!(out.lost_rings, 77);
    }
}
