//! The two handler signatures the hostcall extension API shares with C
//! (`include/amdgpu_dropin_hostcall.h`), beside the host copy of one packet
//! they take (`amdgpu_dropin_hostcall_packet_t`, defined with the protocols
//! in the core crate and re-exported here for the services and the exports).

use core::ffi::c_void;

pub use hostcall_core::protocol::host_packet::{amdgpu_dropin_hostcall_packet_t, HostPacket};

/// A per-lane handler: answers one active lane of a packet of service
/// `service` from buffer `buffer`. `slot` points to the lane's 8 words (a host
/// copy); the answer goes to `slot[0..2]`. Returns 0 when it answered; any
/// other value makes the lane's answer `UINT64_MAX` in `slot[0]`.
pub type amdgpu_dropin_hostcall_lane_fn = Option<
    unsafe extern "C-unwind" fn(
        user_data: *mut c_void,
        buffer: *mut c_void,
        service: u32,
        lane: u32,
        slot: *mut u64,
    ) -> i32,
>;

/// A per-packet handler: answers every active lane of `packet` in place.
/// Returns 0 when it answered; any other value makes every active lane's
/// answer `UINT64_MAX` in `slot[0]`.
pub type amdgpu_dropin_hostcall_packet_fn = Option<
    unsafe extern "C-unwind" fn(user_data: *mut c_void, packet: *mut amdgpu_dropin_hostcall_packet_t) -> i32,
>;
