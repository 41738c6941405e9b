//! The hostcall buffer layout shared with device code (ROCm device libraries,
//! "ockl" hostcall), and the tagged-pointer arithmetic of its packet stacks.
//!
//! Pure arithmetic: nothing here touches memory.
//!
//! # Equivalent struct
//!
//! A buffer for `n` packets is laid out as if it were this C struct (offsets
//! in bytes; `headers` and `payloads` hold absolute addresses so device code
//! finds the arrays without knowing `n`):
//!
//! ```text
//! struct hostcall_buffer {                    // offset
//!   struct packet_header* headers;            //  0  = &self->header_array[0]
//!   struct payload*       payloads;           //  8  = &self->payload_array[0]
//!   uint64_t              doorbell;           // 16  hsa_signal_t handle
//!   _Atomic uint64_t      free_stack;         // 24  tagged pointer, 0 = empty
//!   _Atomic uint64_t      ready_stack;        // 32  tagged pointer, 0 = empty
//!   uint64_t              index_mask;         // 40  next_power_of_two(n) - 1
//!   struct packet_header {                    // headers_offset()  = 48
//!     _Atomic uint64_t next;                  //  +0  next tagged pointer in its stack
//!     uint64_t         activemask;            //  +8  the wave's exec mask
//!     uint32_t         service;               // +16  service id
//!     _Atomic uint32_t control;               // +20  bit 0 = READY
//!   } header_array[n];                        // 24 bytes each
//!   struct payload {                          // payloads_offset(n), 8-aligned
//!     uint64_t slots[64][8];                  // slot i belongs to lane i
//!   } payload_array[n];                       // 4096 bytes each
//! };                                          // buffer_size(n)
//! ```
//!
//! # Tagged pointers
//!
//! Both stacks link packets by *tagged pointer*: `index | tag * (index_mask + 1)`.
//! The index (low bits, `ptr & index_mask`) names the packet; the tag (high
//! bits) is bumped every time a wave returns a packet to the free stack, so a
//! compare-and-swap that raced with a pop + push of the same packet fails
//! (ABA). The value 0 means "empty"; packet 0 therefore starts with tag 1 and
//! a bump that wraps to 0 is replaced by `index_mask + 1`.
//!
//! When `n` is not a power of two, an index in `n..=index_mask` fits the mask
//! but names no packet; such a pointer can only come from broken or hostile
//! device code, and `PacketIndex` (`classic/buffer.rs`) refuses it.

use core::mem::{align_of, offset_of, size_of};
use static_assertions::const_assert_eq;

use crate::protocol::payload::{align_up, slot_word};
pub use crate::protocol::payload::{Payload, ANSWER_WORDS, BUFFER_ALIGNMENT, LANES, SLOT_WORDS};

/// Packet header control bit 0: the packet waits for the host.
pub const CONTROL_READY: u32 = 1;

//===----------------------------------------------------------------------===//
// Layout structs (for size/offset pins only; never instantiated over device memory)
//===----------------------------------------------------------------------===//

/// The 48-byte buffer header.
#[repr(C)]
pub struct BufferHeader {
    pub headers: u64,
    pub payloads: u64,
    pub doorbell: u64,
    pub free_stack: u64,
    pub ready_stack: u64,
    pub index_mask: u64,
}

/// The 24-byte packet header.
#[repr(C)]
pub struct PacketHeader {
    pub next: u64,
    pub activemask: u64,
    pub service: u32,
    pub control: u32,
}

const_assert_eq!(size_of::<BufferHeader>(), 48);
const_assert_eq!(offset_of!(BufferHeader, headers), 0);
const_assert_eq!(offset_of!(BufferHeader, payloads), 8);
const_assert_eq!(offset_of!(BufferHeader, doorbell), 16);
const_assert_eq!(offset_of!(BufferHeader, free_stack), 24);
const_assert_eq!(offset_of!(BufferHeader, ready_stack), 32);
const_assert_eq!(offset_of!(BufferHeader, index_mask), 40);
const_assert_eq!(size_of::<PacketHeader>(), 24);
const_assert_eq!(align_of::<PacketHeader>(), 8);
const_assert_eq!(offset_of!(PacketHeader, next), 0);
const_assert_eq!(offset_of!(PacketHeader, activemask), 8);
const_assert_eq!(offset_of!(PacketHeader, service), 16);
const_assert_eq!(offset_of!(PacketHeader, control), 20);

// Field offsets used by `classic/buffer.rs`.
pub const OFFSET_HEADERS: usize = offset_of!(BufferHeader, headers);
pub const OFFSET_PAYLOADS: usize = offset_of!(BufferHeader, payloads);
pub const OFFSET_DOORBELL: usize = offset_of!(BufferHeader, doorbell);
pub const OFFSET_FREE_STACK: usize = offset_of!(BufferHeader, free_stack);
pub const OFFSET_READY_STACK: usize = offset_of!(BufferHeader, ready_stack);
pub const OFFSET_INDEX_MASK: usize = offset_of!(BufferHeader, index_mask);
pub const PACKET_NEXT: usize = offset_of!(PacketHeader, next);
pub const PACKET_ACTIVEMASK: usize = offset_of!(PacketHeader, activemask);
pub const PACKET_SERVICE: usize = offset_of!(PacketHeader, service);
pub const PACKET_CONTROL: usize = offset_of!(PacketHeader, control);

//===----------------------------------------------------------------------===//
// Offsets
//===----------------------------------------------------------------------===//

/// Offset of packet header 0: the buffer header rounded up to the packet
/// header's alignment.
pub const fn headers_offset() -> usize {
    align_up(size_of::<BufferHeader>(), align_of::<PacketHeader>())
}

/// Offset of payload 0: the end of the `n` packet headers rounded up to the
/// payload's alignment.
pub const fn payloads_offset(packets: u32) -> usize {
    align_up(headers_offset() + packets as usize * size_of::<PacketHeader>(), align_of::<Payload>())
}

/// Bytes a buffer of `packets` packets occupies (`getHostcallBufferSize`).
/// Defined for every `u32`, 0 included (then only the buffer header).
pub const fn buffer_size(packets: u32) -> usize {
    payloads_offset(packets) + packets as usize * size_of::<Payload>()
}

/// Offset of packet header `index` (caller guarantees `index < packets`).
pub const fn packet_header_offset(index: u32) -> usize {
    headers_offset() + index as usize * size_of::<PacketHeader>()
}

/// Offset of word `word` of lane `lane`'s slot in payload `index` of a buffer
/// of `packets` packets.
pub const fn slot_word_offset(packets: u32, index: u32, lane: u32, word: usize) -> usize {
    slot_word(payloads_offset(packets), index, lane, word)
}

//===----------------------------------------------------------------------===//
// Tagged pointers
//===----------------------------------------------------------------------===//

/// `next_power_of_two(packets) - 1`; 0 for 0 or 1 packets.
pub const fn index_mask(packets: u32) -> u64 {
    if packets <= 1 {
        0
    } else {
        (packets as u64).next_power_of_two() - 1
    }
}

/// The packet index a tagged pointer designates (may be ≥ the packet count).
pub const fn index_of(ptr: u64, index_mask: u64) -> u64 {
    ptr & index_mask
}

/// The tag of a tagged pointer.
pub const fn tag_of(ptr: u64, index_mask: u64) -> u64 {
    ptr / (index_mask + 1)
}

/// The tagged pointer a wave pushes when it returns packet `ptr` to the free
/// stack: the same index with the tag incremented, never 0.
pub const fn bump_tag(ptr: u64, index_mask: u64) -> u64 {
    let step = index_mask.wrapping_add(1);
    let bumped = ptr.wrapping_add(step);
    if bumped == 0 {
        step
    } else {
        bumped
    }
}

/// The `next` word packet `index` gets at initialization (free stack
/// n-1 → n-2 → … → 1 → 0 with packet 0 tagged 1, and packet 0 ending it).
pub const fn initial_next(index: u32, index_mask: u64) -> u64 {
    match index {
        0 => 0,
        1 => index_mask + 1,
        i => (i - 1) as u64,
    }
}

/// The free stack's initial top: packet n-1 with tag 0 (non-zero since n ≥ 2).
pub const fn initial_free_top(packets: u32) -> u64 {
    packets as u64 - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size formula of the original implementation, written out longhand.
    fn upstream_size(n: u32) -> usize {
        let mut size = 48usize;
        size = (size + 7) & !7;
        size += n as usize * 24;
        size = (size + 7) & !7;
        size + n as usize * 4096
    }

    #[test]
    fn sizes_match_upstream_for_all_small_and_extreme_counts() {
        for n in (0..=4096).chain([65535, 65536, 1 << 20, u32::MAX - 1, u32::MAX]) {
            assert_eq!(buffer_size(n), upstream_size(n), "n = {n}");
        }
        assert_eq!(buffer_size(0), 48);
        assert_eq!(buffer_size(1), 48 + 24 + 4096);
        assert_eq!(buffer_size(2), 48 + 48 + 8192);
        assert_eq!(headers_offset(), 48);
        assert_eq!(payloads_offset(3), 48 + 72);
        assert_eq!(BUFFER_ALIGNMENT, 8);
    }

    #[test]
    fn offsets_are_aligned_and_disjoint() {
        for n in [2u32, 3, 5, 64, 100] {
            let last_header_end = packet_header_offset(n - 1) + 24;
            assert!(last_header_end <= payloads_offset(n));
            assert_eq!(payloads_offset(n) % 8, 0);
            assert_eq!(slot_word_offset(n, 0, 0, 0), payloads_offset(n));
            assert_eq!(slot_word_offset(n, 1, 0, 0), payloads_offset(n) + 4096);
            assert_eq!(slot_word_offset(n, 0, 1, 0), payloads_offset(n) + 64);
            assert_eq!(slot_word_offset(n, n - 1, 63, 7) + 8, buffer_size(n));
        }
    }

    #[test]
    fn index_mask_is_next_power_of_two_minus_one() {
        assert_eq!(index_mask(0), 0);
        assert_eq!(index_mask(1), 0);
        assert_eq!(index_mask(2), 1);
        assert_eq!(index_mask(3), 3);
        assert_eq!(index_mask(4), 3);
        assert_eq!(index_mask(5), 7);
        assert_eq!(index_mask(1000), 1023);
        assert_eq!(index_mask(1024), 1023);
        assert_eq!(index_mask(u32::MAX), (1u64 << 32) - 1);
    }

    #[test]
    fn tags_split_and_bump() {
        let mask = index_mask(5); // 7
        let ptr = 3 + 5 * (mask + 1);
        assert_eq!(index_of(ptr, mask), 3);
        assert_eq!(tag_of(ptr, mask), 5);
        let bumped = bump_tag(ptr, mask);
        assert_eq!(index_of(bumped, mask), 3);
        assert_eq!(tag_of(bumped, mask), 6);
        // Packet 0 wrapping around the whole tag space never becomes 0.
        let top0 = u64::MAX - mask; // index 0, highest tag
        assert_eq!(index_of(top0, mask), 0);
        assert_eq!(bump_tag(top0, mask), mask + 1);
        // Another index wraps to its tag-0 form, which is non-zero.
        let top3 = u64::MAX - mask + 3;
        assert_eq!(bump_tag(top3, mask), 3);
    }

    #[test]
    fn initial_free_stack_links_every_packet_once() {
        for n in [2u32, 3, 4, 5, 7, 8, 9, 100, 128] {
            let mask = index_mask(n);
            let mut seen = vec![false; n as usize];
            let mut ptr = initial_free_top(n);
            let mut steps = 0;
            while ptr != 0 {
                let index = index_of(ptr, mask);
                assert!(index < n as u64, "n={n}: index {index} out of range");
                assert!(!seen[index as usize], "n={n}: packet {index} twice");
                seen[index as usize] = true;
                ptr = initial_next(index as u32, mask);
                steps += 1;
                assert!(steps <= n);
            }
            assert!(seen.iter().all(|s| *s), "n={n}: not every packet is free");
            // Packet 0 is reached with tag 1 (a non-zero pointer).
            assert_eq!(initial_next(1, mask), mask + 1);
            assert_eq!(index_of(initial_next(1, mask), mask), 0);
        }
    }
}
