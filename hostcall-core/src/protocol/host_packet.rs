//! The host copy of one packet, a type the hostcall extension API shares
//! with C (`include/amdgpu_dropin_hostcall.h`; the two handler signatures
//! that take it are amdgpu-dropin's, beside its services).
//!
//! For a registered service the listener copies the active lanes' words out
//! of device memory into this struct, lets the service answer in place, and
//! copies the active lanes' answer words back before it hands the packet
//! back. Inactive lanes are zero in the copy and are never written back, so a
//! handler cannot touch a lane the wave did not use.

use core::ffi::c_void;

use super::payload::{LANES, SLOT_WORDS};

/// One packet being served: its header fields and a host copy of its payload.
///
/// `slots[lane]` holds the 8 words lane `lane` wrote (lanes set in
/// `activemask`; the others are zero). A service leaves each active lane's
/// answer in `slots[lane][0..2]`: only those two words of each active lane
/// are written back to the device (the wave reads nothing else); what it
/// leaves in the other words and in the header is dropped.
#[repr(C)]
pub struct amdgpu_dropin_hostcall_packet_t {
    /// The hostcall buffer the packet came from (the `enableHostcalls` key).
    pub buffer: *mut c_void,
    /// The service id the wave asked for.
    pub service: u32,
    /// Zero.
    pub reserved: u32,
    /// The wave's active lanes: bit `i` set means `slots[i]` carries a request.
    pub activemask: u64,
    /// The lanes' words: requests on entry, answers on return.
    pub slots: [[u64; 8]; 64],
}

static_assertions::const_assert_eq!(LANES, 64);
static_assertions::const_assert_eq!(SLOT_WORDS, 8);
static_assertions::assert_eq_size!(amdgpu_dropin_hostcall_packet_t, [u8; 24 + 4096]);
static_assertions::const_assert_eq!(core::mem::offset_of!(amdgpu_dropin_hostcall_packet_t, buffer), 0);
static_assertions::const_assert_eq!(core::mem::offset_of!(amdgpu_dropin_hostcall_packet_t, service), 8);
static_assertions::const_assert_eq!(core::mem::offset_of!(amdgpu_dropin_hostcall_packet_t, reserved), 12);
static_assertions::const_assert_eq!(core::mem::offset_of!(amdgpu_dropin_hostcall_packet_t, activemask), 16);
static_assertions::const_assert_eq!(core::mem::offset_of!(amdgpu_dropin_hostcall_packet_t, slots), 24);

/// The Rust-side name.
pub type HostPacket = amdgpu_dropin_hostcall_packet_t;

impl HostPacket {
    /// An empty packet of buffer `buffer_key`.
    pub fn new(buffer_key: usize, service: u32, activemask: u64) -> HostPacket {
        HostPacket {
            buffer: buffer_key as *mut c_void,
            service,
            reserved: 0,
            activemask,
            slots: [[0; SLOT_WORDS]; LANES],
        }
    }

    /// The buffer address as the registry keys it.
    pub fn buffer_key(&self) -> usize {
        self.buffer as usize
    }

    /// The active lanes, lowest first.
    pub fn active_lanes(&self) -> impl Iterator<Item = u32> {
        let mut mask = self.activemask;
        core::iter::from_fn(move || {
            if mask == 0 {
                return None;
            }
            let lane = mask.trailing_zeros();
            mask &= mask - 1;
            Some(lane)
        })
    }

    /// Runs `serve(service, lane, slot)` for every active lane.
    pub fn for_each_active_lane(&mut self, mut serve: impl FnMut(u32, u32, &mut [u64; SLOT_WORDS])) {
        let service = self.service;
        let mut mask = self.activemask;
        while mask != 0 {
            let lane = mask.trailing_zeros();
            mask &= mask - 1;
            serve(service, lane, &mut self.slots[lane as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_lanes_lowest_first_and_only_those() {
        let mut packet = HostPacket::new(0x1000, 9, 0x8000_0000_0000_0005);
        assert_eq!(packet.active_lanes().collect::<Vec<_>>(), [0, 2, 63]);
        let mut seen = Vec::new();
        packet.for_each_active_lane(|service, lane, slot| {
            assert_eq!(service, 9);
            slot[0] = u64::from(lane) + 1;
            seen.push(lane);
        });
        assert_eq!(seen, [0, 2, 63]);
        assert_eq!(packet.slots[1], [0; 8]);
        assert_eq!(packet.slots[63][0], 64);
        assert_eq!(packet.buffer_key(), 0x1000);
    }
}
