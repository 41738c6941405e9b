//! `Protocol`: the hostcall protocol a buffer is enabled with, and what it
//! asks of a buffer (size, alignment, packets, occupancy bitmap).

use core::ops::Range;

use super::classic::layout as classic_layout;
use super::phase_bit::layout as phase_layout;

/// The hostcall protocol a buffer is enabled with (the device code using
/// the buffer must have been built for the same one). The discriminants are
/// the C values of `amdgpu_dropin_hostcall_protocol_t`, pinned to them at
/// compile time (`src/ffi/hostcall_protocol.rs`).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Ready and free stacks of tagged pointers (`classic`).
    Classic = 0,
    /// Device and host phase words, packets claimed through the caller's
    /// occupancy bitmap (`phase_bit`).
    PhaseBit = 1,
}

impl Protocol {
    /// The protocol the C value `id` (`amdgpu_dropin_hostcall_protocol_t`)
    /// names; `None` if unknown.
    #[inline]
    pub fn from_id(id: u32) -> Option<Protocol> {
        [Protocol::Classic, Protocol::PhaseBit].into_iter().find(|protocol| *protocol as u32 == id)
    }

    /// Bytes a buffer of `packets` packets occupies in this protocol;
    /// defined for every count, 0 included.
    pub fn buffer_size(self, packets: u32) -> usize {
        match self {
            Protocol::Classic => classic_layout::buffer_size(packets),
            Protocol::PhaseBit => phase_layout::buffer_size(packets),
        }
    }

    /// The buffer's required alignment (8 in both).
    pub fn alignment(self) -> usize {
        match self {
            Protocol::Classic => classic_layout::BUFFER_ALIGNMENT,
            Protocol::PhaseBit => phase_layout::PHASE_BUFFER_ALIGNMENT,
        }
    }

    /// The fewest packets a buffer may have.
    pub fn min_packets(self) -> u32 {
        match self {
            // One packet would make the empty stack (0) and packet 0 alike.
            Protocol::Classic => 2,
            Protocol::PhaseBit => 1,
        }
    }

    /// Bytes of the occupancy bitmap a buffer of `packets` packets needs:
    /// one bit per packet in 32-bit words (phase-bit); 0 for classic.
    pub fn occupancy_size(self, packets: u32) -> usize {
        match self {
            Protocol::Classic => 0,
            Protocol::PhaseBit => phase_layout::occupancy_words(packets) * core::mem::size_of::<u32>(),
        }
    }

    /// Whether `occupied` may be the occupancy bitmap of the buffer at
    /// `buffer` with `packets` packets. Phase-bit: non-NULL, 4-aligned, not
    /// wrapping the address space and outside the buffer (waves set its bits
    /// while the host reads and writes the buffer). Classic takes none (0).
    pub fn accepts_occupancy(self, occupied: usize, packets: u32, buffer: Range<usize>) -> bool {
        match self {
            Protocol::Classic => occupied == 0,
            Protocol::PhaseBit => {
                let Some(bitmap_end) = occupied.checked_add(self.occupancy_size(packets)) else {
                    return false;
                };
                let inside = occupied < buffer.end && buffer.start < bitmap_end;
                occupied != 0 && occupied % core::mem::align_of::<u32>() == 0 && !inside
            }
        }
    }

    /// The protocol's name in log lines.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Classic => "classic",
            Protocol::PhaseBit => "phase-bit",
        }
    }
}
