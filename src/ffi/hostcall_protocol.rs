//! Choosing the hostcall protocol at enable time (part of
//! `include/amdgpu_dropin_hostcall.h`): buffer size and alignment per
//! protocol, the occupancy bitmap of the phase-bit protocol, enable and
//! disable with a status. The classic `rochostcall.hpp` entry points keep the
//! classic protocol.
//!
//! Only argument checks, logging, the panic boundary and status conversion
//! live here; the logic is in `crate::hostcall::{registry, protocol}`.

use core::ffi::c_void;

use crate::ffi::hostcall_ext::amdgpu_dropin_hostcall_status_t;
use crate::ffi::hostcall_ext::amdgpu_dropin_hostcall_status_t as Status;
use crate::ffi::panic::ffi_boundary;
use crate::hostcall::{self, Protocol};
use crate::log::Level;

/// The hostcall protocols. The device code using a buffer must have been
/// built for the protocol the buffer is enabled with.
// The C values; `Protocol`'s discriminants are pinned to them below.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)]
pub enum amdgpu_dropin_hostcall_protocol_t {
    /// Packets on lock-free ready and free stacks (ROCm device libraries'
    /// long-standing protocol; what `enableHostcalls` sets up).
    AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC = 0,
    /// Device and host phase words per packet, packets claimed through an
    /// occupancy bitmap (device libraries built with USE_NEW_HOSTCALL_IMPL).
    ///
    /// Device-side hazard: the ROCm device library clears a packet's
    /// occupancy bit with a relaxed `fetch_and` right after reading the
    /// answer and claims bits with a relaxed `fetch_or`. On a GPU the answer
    /// loads can then still be in flight when the next wave claims the packet
    /// and writes its request, and the first wave reads that request as its
    /// answer (seen on hardware with several waves per buffer). The host
    /// never sees the bitmap and cannot prevent it: the device code must
    /// clear the bit with release and claim it with acquire ordering (device
    /// scope). See docs/phase-bit-device-ordering.md.
    AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT = 1,
}

static_assertions::const_assert_eq!(
    Protocol::Classic as u32,
    amdgpu_dropin_hostcall_protocol_t::AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC as u32
);
static_assertions::const_assert_eq!(
    Protocol::PhaseBit as u32,
    amdgpu_dropin_hostcall_protocol_t::AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT as u32
);

/// Bytes a hostcall buffer of `num_packets` packets occupies in `protocol`
/// (an `amdgpu_dropin_hostcall_protocol_t` value); 0 for an unknown protocol.
/// For the classic protocol the same as `getHostcallBufferSize`.
#[no_mangle]
pub extern "C" fn amdgpu_dropin_hostcall_buffer_size(protocol: u32, num_packets: u32) -> usize {
    ffi_boundary!("amdgpu_dropin_hostcall_buffer_size", {
        Protocol::from_id(protocol).map_or(0, |protocol| protocol.buffer_size(num_packets))
    })
}

/// Required alignment of a hostcall buffer in `protocol` (8 for both); 0 for
/// an unknown protocol.
#[no_mangle]
pub extern "C" fn amdgpu_dropin_hostcall_buffer_alignment(protocol: u32) -> u32 {
    ffi_boundary!("amdgpu_dropin_hostcall_buffer_alignment", {
        Protocol::from_id(protocol).map_or(0, |protocol| protocol.alignment() as u32)
    })
}

/// Bytes of the occupancy bitmap a phase-bit buffer of `num_packets` packets
/// needs: one bit per packet in 32-bit words (ceil(num_packets / 32) * 4).
/// Allocate it where the device can use atomics on it (device memory on a
/// GPU), 4-aligned, zeroed; the library never reads or writes it.
#[no_mangle]
pub extern "C" fn amdgpu_dropin_hostcall_occupancy_size(num_packets: u32) -> usize {
    ffi_boundary!("amdgpu_dropin_hostcall_occupancy_size", { Protocol::PhaseBit.occupancy_size(num_packets) })
}

/// Initializes `buffer` for `protocol` and registers it with the listener,
/// as `enableHostcalls` does for the classic protocol.
///
/// * Classic: `occupancy` must be NULL; at least 2 packets.
/// * Phase-bit: `occupancy` is the zeroed bitmap
///   (`amdgpu_dropin_hostcall_occupancy_size` bytes, 4-aligned) whose address
///   the buffer hands to device code; at least 1 packet.
///
/// The buffer must be `amdgpu_dropin_hostcall_buffer_size(protocol,
/// num_packets)` bytes with `amdgpu_dropin_hostcall_buffer_alignment(protocol)`
/// alignment. Classic and phase-bit buffers can be enabled at the same time;
/// one listener serves both, with the same services and handlers. Disable
/// with `amdgpu_dropin_hostcall_disable` or `disableHostcalls`.
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL or misaligned buffer or bitmap,
/// a bitmap inside the buffer, a bitmap for classic, too few packets, an unknown protocol, a range that
/// wraps the address space), `_ERROR_ALREADY_ENABLED`, `_ERROR_HSA` (no HSA
/// runtime for the doorbell signal), `_ERROR_UNAVAILABLE` (process exiting,
/// thread cannot start), `_ERROR_BUSY` (disabled from inside one of its own
/// services, which this thread still runs: see "Disabling from inside a
/// buffer's own service" at the top of this header). Every error is logged.
///
/// # Safety
/// `buffer` must be valid for reads and writes of the buffer size until
/// disable returns for it, and used meanwhile only by device code speaking
/// `protocol`. `occupancy` (phase-bit) must stay valid as long.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_enable(
    buffer: *mut c_void,
    num_packets: u32,
    queue: *const c_void,
    protocol: u32,
    occupancy: *mut u32,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_enable", {
        let chosen = match (Protocol::from_id(protocol), occupancy.is_null()) {
            (Some(Protocol::Classic), false) => {
                Err("the classic protocol takes no occupancy bitmap".to_string())
            }
            (Some(chosen), _) => Ok(chosen),
            (None, _) => Err(format!("unknown protocol {protocol}")),
        };
        let result = match chosen {
            Ok(chosen) => {
                // SAFETY: forwarded caller contract (see `# Safety`).
                unsafe { hostcall::enable_with(buffer, num_packets, queue, chosen, occupancy as usize) }
                    .map_err(|e| (Status::from(&e), e.to_string()))
            }
            Err(text) => Err((Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT, text)),
        };
        match result {
            Ok(()) => Status::AMDGPU_DROPIN_HOSTCALL_OK,
            Err((status, text)) => {
                crate::log!(
                    Level::Error,
                    "amdgpu_dropin_hostcall_enable(buffer={buffer:p}, num_packets={num_packets}, \
                     queue={queue:p}, protocol={protocol}, occupancy={occupancy:p}): {text}"
                );
                status
            }
        }
    })
}

/// Unregisters a buffer enabled in either protocol (as `disableHostcalls`,
/// with a status): when it returns the listener no longer touches the buffer
/// (nor its occupancy bitmap, which it never touches), except when called
/// from a service of that same buffer (see "Disabling from inside a buffer's
/// own service" at the top of this header).
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL buffer), `_ERROR_NOT_ENABLED`.
///
/// # Safety
/// `buffer` is only compared with the enabled buffers before use.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_disable(
    buffer: *mut c_void,
    queue: *const c_void,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_disable", {
        match hostcall::disable(buffer, queue) {
            Ok(()) => Status::AMDGPU_DROPIN_HOSTCALL_OK,
            Err(error) => {
                let status = Status::from(&error);
                crate::log!(
                    Level::Warning,
                    "amdgpu_dropin_hostcall_disable(buffer={buffer:p}, queue={queue:p}): {error} ({})",
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
    use crate::hostcall::protocol::phase_bit::layout as phase_layout;

    #[test]
    fn the_c_protocol_values_name_the_protocols() {
        use amdgpu_dropin_hostcall_protocol_t as Id;
        assert_eq!(
            Protocol::from_id(Id::AMDGPU_DROPIN_HOSTCALL_PROTOCOL_CLASSIC as u32),
            Some(Protocol::Classic)
        );
        assert_eq!(
            Protocol::from_id(Id::AMDGPU_DROPIN_HOSTCALL_PROTOCOL_PHASE_BIT as u32),
            Some(Protocol::PhaseBit)
        );
        assert_eq!(Protocol::from_id(2), None);
    }

    #[test]
    fn sizes_and_alignments_per_protocol() {
        for n in [0u32, 1, 2, 3, 64, 1000] {
            assert_eq!(
                amdgpu_dropin_hostcall_buffer_size(0, n),
                crate::hostcall::protocol::classic::layout::buffer_size(n)
            );
            assert_eq!(amdgpu_dropin_hostcall_buffer_size(1, n), phase_layout::buffer_size(n));
            assert_eq!(amdgpu_dropin_hostcall_buffer_size(2, n), 0);
        }
        assert_eq!(amdgpu_dropin_hostcall_buffer_alignment(0), 8);
        assert_eq!(amdgpu_dropin_hostcall_buffer_alignment(1), 8);
        assert_eq!(amdgpu_dropin_hostcall_buffer_alignment(7), 0);
        assert_eq!(amdgpu_dropin_hostcall_occupancy_size(0), 0);
        assert_eq!(amdgpu_dropin_hostcall_occupancy_size(1), 4);
        assert_eq!(amdgpu_dropin_hostcall_occupancy_size(33), 8);
    }

    #[test]
    fn enable_rejects_bad_arguments_before_touching_anything() {
        let mut buffer = vec![0u64; phase_layout::buffer_size(4) / 8];
        let mut bitmap = [0u32; 1];
        let b = buffer.as_mut_ptr().cast::<c_void>();
        let q = core::ptr::null();
        let invalid = Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT;
        // SAFETY: every call below is rejected before the buffer is used.
        unsafe {
            assert_eq!(amdgpu_dropin_hostcall_enable(b, 4, q, 5, core::ptr::null_mut()), invalid);
            assert_eq!(amdgpu_dropin_hostcall_enable(b, 4, q, 0, bitmap.as_mut_ptr()), invalid);
            assert_eq!(amdgpu_dropin_hostcall_enable(b, 4, q, 1, core::ptr::null_mut()), invalid);
            let odd = bitmap.as_mut_ptr().cast::<u8>().add(1).cast::<u32>();
            assert_eq!(amdgpu_dropin_hostcall_enable(b, 4, q, 1, odd), invalid);
            assert_eq!(amdgpu_dropin_hostcall_enable(b, 0, q, 1, bitmap.as_mut_ptr()), invalid);
            let inside = buffer.as_mut_ptr().add(100).cast::<u32>();
            assert_eq!(amdgpu_dropin_hostcall_enable(b, 4, q, 1, inside), invalid, "bitmap in the buffer");
            assert_eq!(amdgpu_dropin_hostcall_enable(b, 1, q, 0, core::ptr::null_mut()), invalid);
            assert_eq!(
                amdgpu_dropin_hostcall_disable(core::ptr::null_mut(), q),
                Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT
            );
            assert_eq!(
                amdgpu_dropin_hostcall_disable(b, q),
                Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED
            );
        }
        assert!(buffer.iter().all(|w| *w == 0));
    }
}
