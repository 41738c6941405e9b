//! The layout of a phase-bit hostcall buffer: the second hostcall protocol of
//! ROCm's device libraries (built with `USE_NEW_HOSTCALL_IMPL`), which a
//! runtime chooses at enable time (`amdgpu_dropin_hostcall_enable`).
//!
//! Pure arithmetic: nothing here touches memory.
//!
//! # The contract, in our words
//!
//! Device code reads a fixed prefix at the start of the buffer; the arrays
//! behind it are found through the prefix's addresses, so their placement is
//! the host's choice. We place them as the ROCm runtime does, so a buffer we
//! initialize looks like one it would have made:
//!
//! ```text
//! struct phase_buffer {                        // offset
//!   _Atomic uint32_t* device_phase;            //  0  = &self->device_phase_array[0]
//!   _Atomic uint32_t* host_phase;              //  8  = &self->host_phase_array[0]
//!   _Atomic uint32_t* occupied;                // 16  the caller's occupancy bitmap
//!   struct phase_packet_header* headers;       // 24  = &self->header_array[0]
//!   struct payload* payloads;                  // 32  = &self->payload_array[0]
//!   uint64_t doorbell;                         // 40  hsa_signal_t handle
//!   uint32_t num_packets;                      // 48
//!   uint32_t reserved;                         // 52  0 (the prefix is 56 bytes)
//!   _Atomic uint32_t device_phase_array[n];    // 56
//!   _Atomic uint32_t host_phase_array[n];      // 56 + 4n (4-aligned)
//!   struct phase_packet_header {               // 8-aligned
//!     uint64_t activemask;                     //  +0  the wave's exec mask
//!     uint32_t service;                        //  +8
//!     uint32_t reserved;                       // +12
//!   } header_array[n];                         // 16 bytes each
//!   struct payload payload_array[n];           // 8-aligned, 64 lanes × 8 words
//! };
//! ```
//!
//! Payloads are aligned like the classic ones: to the payload's alignment (8),
//! which is what the ROCm runtime's placement code uses for both protocols.
//!
//! The occupancy bitmap (`ceil(n / 32)` 32-bit words, bit `i % 32` of word
//! `i / 32` for packet `i`) lives outside the buffer, in memory the caller
//! allocates (device memory on a GPU) and zeroes before enabling. Only device
//! code uses it: a wave claims packet `i` by setting its bit. The host never
//! reads or writes it (it may not even be host-visible); it only stores its
//! address in the prefix.
//!
//! # Handshake (per wave; the first active lane acts for the wave)
//!
//! Packet `i` is free for the host when `device_phase[i] == host_phase[i]`.
//! A wave claims a bit with a `fetch_or`, skips (and releases) a packet whose
//! phases differ, writes the header and payload with plain stores, flips
//! `device_phase[i]` with a release store, rings the doorbell (throttled, see
//! below), waits until `host_phase[i] == device_phase[i]` (acquire), reads
//! slot[0..1] of each lane and clears its bit. The host serves every packet
//! whose phases differ and then makes them equal again (release).
//!
//! Doorbell throttle: a device rings only when at least 1000 ticks of its
//! 100 MHz steady counter (~10 µs) passed since the last ring on that device,
//! so the host must not depend on a ring per request; it polls while busy.

use core::mem::{align_of, offset_of, size_of};
use static_assertions::const_assert_eq;

use crate::protocol::payload::{align_up, slot_word, Payload, BUFFER_ALIGNMENT};

/// Occupancy bits per bitmap word.
pub const OCCUPANCY_BITS_PER_WORD: u32 = 32;

/// Ticks of the device's 100 MHz steady counter between two doorbell rings
/// of one device (~10 µs).
pub const DOORBELL_THROTTLE_TICKS: u64 = 1000;

/// The device's steady counter frequency the throttle is counted in.
const DEVICE_COUNTER_HZ: u64 = 100_000_000;

/// `DOORBELL_THROTTLE_TICKS` in nanoseconds: a wave that posts within this
/// after another wave's ring may not ring itself.
pub const DOORBELL_THROTTLE_NS: u64 = DOORBELL_THROTTLE_TICKS * 1_000_000_000 / DEVICE_COUNTER_HZ;

/// The prefix device code reads (for size/offset pins only).
#[repr(C)]
pub struct PhasePrefix {
    pub device_phase: u64,
    pub host_phase: u64,
    pub occupied: u64,
    pub headers: u64,
    pub payloads: u64,
    pub doorbell: u64,
    pub num_packets: u32,
    pub reserved: u32,
}

/// One packet header of the phase-bit protocol.
#[repr(C)]
pub struct PhasePacketHeader {
    pub activemask: u64,
    pub service: u32,
    pub reserved: u32,
}

const_assert_eq!(size_of::<PhasePrefix>(), 56);
const_assert_eq!(offset_of!(PhasePrefix, device_phase), 0);
const_assert_eq!(offset_of!(PhasePrefix, host_phase), 8);
const_assert_eq!(offset_of!(PhasePrefix, occupied), 16);
const_assert_eq!(offset_of!(PhasePrefix, headers), 24);
const_assert_eq!(offset_of!(PhasePrefix, payloads), 32);
const_assert_eq!(offset_of!(PhasePrefix, doorbell), 40);
const_assert_eq!(offset_of!(PhasePrefix, num_packets), 48);
const_assert_eq!(size_of::<PhasePacketHeader>(), 16);
const_assert_eq!(align_of::<PhasePacketHeader>(), 8);
const_assert_eq!(offset_of!(PhasePacketHeader, activemask), 0);
const_assert_eq!(offset_of!(PhasePacketHeader, service), 8);
// Both protocols align the buffer (and the payload array) to 8.
const_assert_eq!(PHASE_BUFFER_ALIGNMENT, 8);

/// Required alignment of a phase-bit buffer (as the classic one: the payload's).
pub const PHASE_BUFFER_ALIGNMENT: usize = BUFFER_ALIGNMENT;

// Field offsets used by `phase_bit/buffer.rs`.
pub const OFFSET_DEVICE_PHASE: usize = offset_of!(PhasePrefix, device_phase);
pub const OFFSET_HOST_PHASE: usize = offset_of!(PhasePrefix, host_phase);
pub const OFFSET_OCCUPIED: usize = offset_of!(PhasePrefix, occupied);
pub const OFFSET_HEADERS: usize = offset_of!(PhasePrefix, headers);
pub const OFFSET_PAYLOADS: usize = offset_of!(PhasePrefix, payloads);
pub const OFFSET_DOORBELL: usize = offset_of!(PhasePrefix, doorbell);
pub const OFFSET_NUM_PACKETS: usize = offset_of!(PhasePrefix, num_packets);
pub const OFFSET_RESERVED: usize = offset_of!(PhasePrefix, reserved);
pub const HEADER_ACTIVEMASK: usize = offset_of!(PhasePacketHeader, activemask);
pub const HEADER_SERVICE: usize = offset_of!(PhasePacketHeader, service);

/// Offset of `device_phase[0]`: the prefix rounded up to a u32.
pub const fn device_phase_offset() -> usize {
    align_up(size_of::<PhasePrefix>(), align_of::<u32>())
}

/// Offset of `host_phase[0]`: right after the `packets` device phases.
pub const fn host_phase_offset(packets: u32) -> usize {
    align_up(device_phase_offset() + packets as usize * size_of::<u32>(), align_of::<u32>())
}

/// Offset of packet header 0: after the host phases, 8-aligned.
pub const fn headers_offset(packets: u32) -> usize {
    align_up(
        host_phase_offset(packets) + packets as usize * size_of::<u32>(),
        align_of::<PhasePacketHeader>(),
    )
}

/// Offset of payload 0: after the packet headers, aligned like a payload.
pub const fn payloads_offset(packets: u32) -> usize {
    align_up(
        headers_offset(packets) + packets as usize * size_of::<PhasePacketHeader>(),
        align_of::<Payload>(),
    )
}

/// Bytes a phase-bit buffer of `packets` packets occupies. Defined for every
/// `u32`, 0 included (then only the prefix).
pub const fn buffer_size(packets: u32) -> usize {
    payloads_offset(packets) + packets as usize * size_of::<Payload>()
}

/// Words of the occupancy bitmap for `packets` packets: ceil(packets / 32).
pub const fn occupancy_words(packets: u32) -> usize {
    (packets as usize).div_ceil(OCCUPANCY_BITS_PER_WORD as usize)
}

/// Offset of `device_phase[index]`.
pub const fn device_phase_at(index: u32) -> usize {
    device_phase_offset() + index as usize * size_of::<u32>()
}

/// Offset of `host_phase[index]` in a buffer of `packets` packets.
pub const fn host_phase_at(packets: u32, index: u32) -> usize {
    host_phase_offset(packets) + index as usize * size_of::<u32>()
}

/// Offset of packet header `index` in a buffer of `packets` packets.
pub const fn header_at(packets: u32, index: u32) -> usize {
    headers_offset(packets) + index as usize * size_of::<PhasePacketHeader>()
}

/// Offset of word `word` of lane `lane` in payload `index`.
pub const fn slot_word_at(packets: u32, index: u32, lane: u32, word: usize) -> usize {
    slot_word(payloads_offset(packets), index, lane, word)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placement rules written out longhand (prefix 56, two u32 arrays,
    /// 8-aligned 16-byte headers, 8-aligned 4096-byte payloads).
    fn longhand_size(n: u32) -> usize {
        let n = n as usize;
        let mut offset = 56 + 4 * n; // device phases
        offset += 4 * n; // host phases
        offset = (offset + 7) & !7;
        offset += 16 * n; // headers
        offset = (offset + 7) & !7;
        offset + 4096 * n
    }

    #[test]
    fn sizes_follow_the_placement_rules_for_small_and_extreme_counts() {
        for n in (0..=1100).chain([65535, 65536, 1 << 20, u32::MAX - 1, u32::MAX]) {
            assert_eq!(buffer_size(n), longhand_size(n), "n = {n}");
        }
        assert_eq!(buffer_size(0), 56);
        assert_eq!(buffer_size(1), 56 + 4 + 4 + 16 + 4096);
        assert_eq!(device_phase_offset(), 56);
        assert_eq!(host_phase_offset(3), 68);
        // 68 + 12 = 80, already 8-aligned; odd counts need padding.
        assert_eq!(headers_offset(3), 80);
        assert_eq!(headers_offset(1), 64);
        assert_eq!(headers_offset(2), 72);
        assert_eq!(PHASE_BUFFER_ALIGNMENT, 8);
    }

    #[test]
    fn regions_are_aligned_disjoint_and_fill_the_buffer() {
        for n in [1u32, 2, 3, 5, 31, 32, 33, 64, 100] {
            assert_eq!(device_phase_at(n - 1) + 4, host_phase_offset(n));
            assert!(host_phase_at(n, n - 1) + 4 <= headers_offset(n));
            assert_eq!(headers_offset(n) % 8, 0);
            assert!(header_at(n, n - 1) + 16 <= payloads_offset(n));
            assert_eq!(payloads_offset(n) % 8, 0);
            assert_eq!(slot_word_at(n, 0, 0, 0), payloads_offset(n));
            assert_eq!(slot_word_at(n, 0, 1, 0), payloads_offset(n) + 64);
            assert_eq!(slot_word_at(n, n - 1, 63, 7) + 8, buffer_size(n));
        }
    }

    #[test]
    fn a_device_phase_past_the_count_lands_on_host_phase_zero() {
        // What a device that claims packet n would touch: the host's own
        // phase of packet 0 (in bounds, never past the buffer).
        for n in [1u32, 3, 8, 100] {
            assert_eq!(device_phase_at(n), host_phase_at(n, 0));
        }
    }

    #[test]
    fn occupancy_words_round_up_to_32_bits() {
        assert_eq!(occupancy_words(0), 0);
        assert_eq!(occupancy_words(1), 1);
        assert_eq!(occupancy_words(32), 1);
        assert_eq!(occupancy_words(33), 2);
        assert_eq!(occupancy_words(u32::MAX), (1 << 27));
    }
}
