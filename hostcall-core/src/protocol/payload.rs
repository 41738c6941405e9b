//! What both wire protocols share: the payload of a packet (64 lanes of 8
//! words), the answer words a wave reads back, and the alignment rule of the
//! arrays behind a buffer's header (docs/protocols.md). Pure arithmetic.

use core::mem::{align_of, size_of};
use static_assertions::const_assert_eq;

/// Lanes per wave (slots per payload).
pub const LANES: usize = 64;
/// 64-bit words per lane slot.
pub const SLOT_WORDS: usize = 8;
/// Words of a slot the wave reads back after the host answered: slot[0..1];
/// the host writes back only these.
pub const ANSWER_WORDS: usize = 2;

/// One packet's payload: 64 lanes × 8 words.
#[repr(C)]
pub struct Payload {
    pub slots: [[u64; SLOT_WORDS]; LANES],
}

/// The buffer's required alignment in both protocols, as upstream reports it:
/// the payload array's alignment (8), which also satisfies every 64-bit field.
pub const BUFFER_ALIGNMENT: usize = align_of::<Payload>();

const_assert_eq!(size_of::<Payload>(), 4096);
const_assert_eq!(BUFFER_ALIGNMENT, 8);
// Addresses are stored in 64-bit header words and sizes reach 2^32 packets × 4 KiB.
const_assert_eq!(size_of::<usize>(), 8);

/// `value` rounded up to `alignment` (a power of two).
pub const fn align_up(value: usize, alignment: usize) -> usize {
    (value + alignment - 1) & !(alignment - 1)
}

/// Offset of word `word` of lane `lane`'s slot in payload `index`, for a
/// payload array that starts at `payloads`.
pub const fn slot_word(payloads: usize, index: u32, lane: u32, word: usize) -> usize {
    payloads + index as usize * size_of::<Payload>() + (lane as usize * SLOT_WORDS + word) * size_of::<u64>()
}
