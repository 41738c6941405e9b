//! A buffer's counters (part of `include/amdgpu_dropin_hostcall.h`): what the
//! listener did for it since it was enabled.
//!
//! Only argument checks, logging, the panic boundary and status conversion
//! live here; the counting, and the struct it fills in, are in
//! `crate::hostcall::counters`.

use core::ffi::c_void;

use crate::ffi::hostcall_ext::amdgpu_dropin_hostcall_status_t;
use crate::ffi::hostcall_ext::amdgpu_dropin_hostcall_status_t as Status;
use crate::ffi::panic::ffi_boundary;
use crate::hostcall::counters::{amdgpu_dropin_hostcall_counters_t, COUNTERS_V4_SIZE};
use crate::hostcall::{self};
use crate::log::Level;

/// Copies the counters of `buffer` (enabled in either protocol) into `*out`.
/// `out->size` must be set to `sizeof(amdgpu_dropin_hostcall_counters_t)`
/// first; the library sets it to the size it wrote: the struct of the
/// caller's version or of its own, the smaller (a caller built with the
/// version 4 header gives that version's size and gets its fields only).
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL or misaligned `out`, `out->size`
/// smaller than version 4's struct, NULL `buffer`; `*out` untouched),
/// `_ERROR_NOT_ENABLED`.
///
/// # Safety
/// `out`, if non-NULL and 8-aligned, must be valid for reads of its `size`
/// field and writes of `out->size` bytes. `buffer` is only compared with the
/// enabled buffers.
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
        if given < COUNTERS_V4_SIZE {
            crate::log!(
                Level::Warning,
                "amdgpu_dropin_hostcall_get_counters: out->size is {given}, at least {COUNTERS_V4_SIZE} needed"
            );
            return Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT;
        }
        match hostcall::counters(buffer) {
            Ok(mut counts) => {
                let written = given.min(size);
                counts.size = written as u32;
                // SAFETY: the caller's contract: `out` is writable for
                // `out->size` >= `written` bytes; `counts` is a plain struct
                // of at least `written` bytes, not overlapping the caller's.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        core::ptr::addr_of!(counts).cast::<u8>(),
                        out.cast::<u8>(),
                        written,
                    )
                };
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
        let mut out = amdgpu_dropin_hostcall_counters_t { size: 8, lost_rings: 77, ..Default::default() };
        let buffer = 0x1000 as *const c_void;
        // SAFETY: `out` is a valid struct; the buffer is only compared.
        let status = unsafe { amdgpu_dropin_hostcall_get_counters(buffer, &mut out) };
        assert_eq!(status, Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
        assert_eq!(out.lost_rings, 77);
        out.size = COUNTERS_V4_SIZE as u32 - 8;
        // SAFETY: as above.
        let status = unsafe { amdgpu_dropin_hostcall_get_counters(buffer, &mut out) };
        assert_eq!(status, Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, "smaller than version 4's");
        out.size = COUNTERS_V4_SIZE as u32;
        // SAFETY: as above.
        let status = unsafe { amdgpu_dropin_hostcall_get_counters(buffer, &mut out) };
        assert_eq!(status, Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED);
        assert_eq!(out.lost_rings, 77);
    }
}
