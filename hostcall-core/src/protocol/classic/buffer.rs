//! The classic protocol's view of a hostcall buffer in device-shared memory:
//! its stacks, headers and slots, each reached through the buffer's
//! `DeviceWords` (`protocol/device_words.rs`, the one place that turns an
//! offset into a reference).
//!
//! Device memory is never a Rust reference to plain data: the GPU (or the
//! device simulator) writes it concurrently, so every header field is read and
//! written through an atomic view (`AtomicU64::from_ptr` / `AtomicU32::from_ptr`),
//! and payload words through relaxed atomic loads and stores. The payload
//! accesses are not racy under the protocol (the READY handshake orders them),
//! but a misbehaving device could write a slot while we read it; with atomic
//! accesses that yields a garbage value, never undefined behaviour. On x86-64
//! and AArch64 a relaxed 64-bit load/store is an ordinary move, so this costs
//! nothing over volatile.
//!
//! Packet accesses take a `PacketIndex`, which can only be made from a tagged
//! pointer whose index is below the packet count (`DeviceBuffer::packet_index`):
//! an out-of-range pointer from the device can never become an address.
//!
//! Under `--cfg loom` the same API is backed by a modelled buffer (loom
//! atomics for the stacks and headers, loom `UnsafeCell`s for payload words) so
//! `classic/serve.rs` is model-checked unchanged.

use super::layout;
#[cfg(not(loom))]
use crate::protocol::device_words::DeviceWords;
use crate::sync::{AtomicU32, AtomicU64};

/// A packet index known to be below the buffer's packet count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketIndex(u32);

impl PacketIndex {
    /// Packet 0: a filler for arrays written before they are read.
    pub const FIRST: PacketIndex = PacketIndex(0);

    /// The index a tagged pointer designates, if it is below `packets`: the
    /// one check that stands between a device-written pointer and an address
    /// (shared by the real and the modelled buffer).
    fn checked(ptr: u64, index_mask: u64, packets: u32) -> Option<PacketIndex> {
        let index = layout::index_of(ptr, index_mask);
        (index < u64::from(packets)).then_some(PacketIndex(index as u32))
    }

    #[cfg(any(test, loom, feature = "device-model"))]
    #[inline]
    pub fn get(self) -> u32 {
        self.0
    }
}

/// The packet count, the index mask and the pointer check, the same in the
/// real and the modelled view (each has `packets` and `index_mask` fields).
macro_rules! packet_geometry {
    () => {
        pub fn packets(&self) -> u32 {
            self.packets
        }

        pub fn index_mask(&self) -> u64 {
            self.index_mask
        }

        /// The packet a tagged pointer designates, if it exists.
        pub fn packet_index(&self, ptr: u64) -> Option<PacketIndex> {
            PacketIndex::checked(ptr, self.index_mask, self.packets)
        }
    };
}

#[cfg(not(loom))]
pub use real::DeviceBuffer;

#[cfg(loom)]
pub use model::DeviceBuffer;

crate::protocol::pending::slot_access!(DeviceBuffer, PacketIndex);

#[cfg(not(loom))]
mod real {
    use super::*;
    use core::ptr::NonNull;
    use core::sync::atomic::Ordering;

    /// A view of a registered hostcall buffer.
    ///
    /// Holds the packet count and index mask as the host computed them at
    /// enable time; the copies in device memory are never trusted afterwards.
    #[derive(Clone, Copy, Debug)]
    pub struct DeviceBuffer {
        words: DeviceWords,
        packets: u32,
        index_mask: u64,
    }

    impl DeviceBuffer {
        /// # Safety
        /// * `base` is 8-aligned and valid for reads and writes of
        ///   `layout::buffer_size(packets)` bytes, from now until the buffer is
        ///   unregistered and the listener has let go of it
        ///   (`disableHostcalls` returned);
        /// * during that time the memory is only accessed atomically or per the
        ///   device protocol (the GPU side of ockl hostcall), never moved.
        pub unsafe fn new(base: NonNull<u8>, packets: u32) -> DeviceBuffer {
            debug_assert!(base.as_ptr() as usize % layout::BUFFER_ALIGNMENT == 0);
            // SAFETY: forwarded contract, for the whole buffer.
            let words = unsafe { DeviceWords::new(base, layout::buffer_size(packets)) };
            DeviceBuffer { words, packets, index_mask: layout::index_mask(packets) }
        }

        pub fn base(&self) -> usize {
            self.words.base()
        }

        packet_geometry!();

        // Offsets from `classic/layout.rs`: header fields, or packet fields of a
        // `PacketIndex` < packets; 64-bit fields at multiples of 8, the 32-bit
        // ones at 16 and 20 within an 8-aligned packet header.
        #[inline]
        fn word(&self, offset: usize) -> &AtomicU64 {
            self.words.word(offset)
        }

        #[inline]
        fn word32(&self, offset: usize) -> &AtomicU32 {
            self.words.word32(offset)
        }

        pub fn free_stack(&self) -> &AtomicU64 {
            self.word(layout::OFFSET_FREE_STACK)
        }

        pub fn ready_stack(&self) -> &AtomicU64 {
            self.word(layout::OFFSET_READY_STACK)
        }

        #[inline]
        pub fn next(&self, index: PacketIndex) -> &AtomicU64 {
            self.word(layout::packet_header_offset(index.0) + layout::PACKET_NEXT)
        }

        pub fn activemask(&self, index: PacketIndex) -> &AtomicU64 {
            self.word(layout::packet_header_offset(index.0) + layout::PACKET_ACTIVEMASK)
        }

        pub fn service(&self, index: PacketIndex) -> &AtomicU32 {
            self.word32(layout::packet_header_offset(index.0) + layout::PACKET_SERVICE)
        }

        pub fn control(&self, index: PacketIndex) -> &AtomicU32 {
            self.word32(layout::packet_header_offset(index.0) + layout::PACKET_CONTROL)
        }

        /// Copies lane `lane`'s 8 words out of payload `index`.
        #[inline]
        pub fn read_slot(&self, index: PacketIndex, lane: u32) -> [u64; layout::SLOT_WORDS] {
            debug_assert!((lane as usize) < layout::LANES);
            // The payload was published by the device's release CAS that
            // pushed the packet onto ready_stack, which our acquire swap
            // synchronized with (serve.rs).
            self.words.read_slot(layout::slot_word_offset(self.packets, index.0, lane, 0))
        }

        /// Lane `lane`'s slot of payload `index` where it lies.
        #[inline]
        pub fn slot_words(
            &self,
            index: PacketIndex,
            lane: u32,
        ) -> Option<&[core::sync::atomic::AtomicU64; layout::SLOT_WORDS]> {
            Some(self.words.slot(layout::slot_word_offset(self.packets, index.0, lane, 0)))
        }

        /// Hints that lane `lane`'s slot of payload `index` is about to be
        /// read and its answer written.
        #[inline]
        pub fn prefetch_slot(&self, index: PacketIndex, lane: u32) {
            self.words.prefetch_for_write(layout::slot_word_offset(self.packets, index.0, lane, 0));
        }

        /// Hints that the ready stack is about to be read and swapped. Only a
        /// hint, no access: allowed outside the gate, on a buffer that may be
        /// gone already.
        #[inline]
        pub fn prefetch_ready_stack(&self) {
            self.words.prefetch_for_write(layout::OFFSET_READY_STACK);
        }

        /// Writes lane `lane`'s answer (its first `ANSWER_WORDS` words) into
        /// payload `index`.
        #[inline]
        pub fn write_answer(&self, index: PacketIndex, lane: u32, answer: &[u64; layout::ANSWER_WORDS]) {
            self.write_lane_words(index, lane, answer);
        }

        /// Writes lane `lane`'s 8 words into payload `index` (tests play the
        /// device with it).
        #[cfg(any(test, feature = "device-model"))]
        pub fn write_slot(&self, index: PacketIndex, lane: u32, slot: &[u64; layout::SLOT_WORDS]) {
            self.write_lane_words(index, lane, slot);
        }

        /// Writes the first `words.len()` words of lane `lane`'s slot.
        #[inline]
        fn write_lane_words(&self, index: PacketIndex, lane: u32, words: &[u64]) {
            debug_assert!((lane as usize) < layout::LANES);
            // Published to the device by the release store that clears READY
            // (serve.rs), which the wave's acquire spin on READY pairs with.
            self.words.write_words(layout::slot_word_offset(self.packets, index.0, lane, 0), words);
        }

        /// Initializes the buffer header and packet headers
        /// (docs/protocols.md#initialization-and-publication).
        ///
        /// Relaxed stores: the buffer is published to the device by whatever
        /// the caller does after `enableHostcalls` returns (a kernel launch,
        /// which orders host memory), and to the listener through the
        /// registry's lock.
        pub fn initialize(&self, doorbell: u64) {
            let relaxed = Ordering::Relaxed;
            let headers = self.base() + layout::headers_offset();
            let payloads = self.base() + layout::payloads_offset(self.packets);
            self.word(layout::OFFSET_HEADERS).store(headers as u64, relaxed);
            self.word(layout::OFFSET_PAYLOADS).store(payloads as u64, relaxed);
            self.word(layout::OFFSET_DOORBELL).store(doorbell, relaxed);
            self.word(layout::OFFSET_INDEX_MASK).store(self.index_mask, relaxed);
            for i in 0..self.packets {
                let index = PacketIndex(i);
                self.next(index).store(layout::initial_next(i, self.index_mask), relaxed);
                self.activemask(index).store(0, relaxed);
                self.service(index).store(0, relaxed);
                self.control(index).store(0, relaxed);
            }
            self.ready_stack().store(0, relaxed);
            self.free_stack().store(layout::initial_free_top(self.packets), relaxed);
        }

        /// The header words as device code would read them.
        #[cfg(test)]
        pub fn header_word(&self, offset: usize) -> u64 {
            assert!(offset % 8 == 0 && offset < layout::headers_offset());
            // Relaxed: diagnostic read.
            self.word(offset).load(Ordering::Relaxed)
        }
    }
}

#[cfg(loom)]
mod model {
    use super::*;
    use crate::sync::UnsafeCell;
    use loom::sync::Arc;

    struct Packet {
        next: AtomicU64,
        activemask: AtomicU64,
        service: AtomicU32,
        control: AtomicU32,
        slots: Box<[UnsafeCell<u64>]>,
    }

    struct Memory {
        free_stack: AtomicU64,
        ready_stack: AtomicU64,
        packets: Box<[Packet]>,
    }

    /// A modelled buffer with `lanes` lanes per payload (kept small: loom
    /// tracks every cell).
    #[derive(Clone)]
    pub struct DeviceBuffer {
        memory: Arc<Memory>,
        packets: u32,
        lanes: u32,
        index_mask: u64,
    }

    impl DeviceBuffer {
        pub fn new_model(packets: u32, lanes: u32) -> DeviceBuffer {
            let index_mask = layout::index_mask(packets);
            let packet_vec = (0..packets)
                .map(|i| Packet {
                    next: AtomicU64::new(layout::initial_next(i, index_mask)),
                    activemask: AtomicU64::new(0),
                    service: AtomicU32::new(0),
                    control: AtomicU32::new(0),
                    slots: (0..lanes as usize * layout::SLOT_WORDS).map(|_| UnsafeCell::new(0)).collect(),
                })
                .collect();
            DeviceBuffer {
                memory: Arc::new(Memory {
                    free_stack: AtomicU64::new(layout::initial_free_top(packets)),
                    ready_stack: AtomicU64::new(0),
                    packets: packet_vec,
                }),
                packets,
                lanes,
                index_mask,
            }
        }

        pub fn base(&self) -> usize {
            Arc::as_ptr(&self.memory) as usize
        }

        packet_geometry!();

        fn packet(&self, index: PacketIndex) -> &Packet {
            &self.memory.packets[index.0 as usize]
        }

        pub fn free_stack(&self) -> &AtomicU64 {
            &self.memory.free_stack
        }

        pub fn ready_stack(&self) -> &AtomicU64 {
            &self.memory.ready_stack
        }

        pub fn next(&self, index: PacketIndex) -> &AtomicU64 {
            &self.packet(index).next
        }

        pub fn activemask(&self, index: PacketIndex) -> &AtomicU64 {
            &self.packet(index).activemask
        }

        pub fn service(&self, index: PacketIndex) -> &AtomicU32 {
            &self.packet(index).service
        }

        pub fn control(&self, index: PacketIndex) -> &AtomicU32 {
            &self.packet(index).control
        }

        /// A cache hint in the real buffer; nothing to model.
        pub fn prefetch_slot(&self, _index: PacketIndex, _lane: u32) {}

        /// A cache hint in the real buffer; nothing to model.
        pub fn prefetch_ready_stack(&self) {}

        /// The model's slots are loom cells: callees get a copy.
        pub fn slot_words(
            &self,
            _index: PacketIndex,
            _lane: u32,
        ) -> Option<&[core::sync::atomic::AtomicU64; layout::SLOT_WORDS]> {
            None
        }

        pub fn read_slot(&self, index: PacketIndex, lane: u32) -> [u64; layout::SLOT_WORDS] {
            assert!(lane < self.lanes, "model buffer has {} lanes", self.lanes);
            let base = lane as usize * layout::SLOT_WORDS;
            let mut out = [0u64; layout::SLOT_WORDS];
            for (word, value) in out.iter_mut().enumerate() {
                // SAFETY: loom checks that no write to this cell is concurrent.
                *value = self.packet(index).slots[base + word].with(|p| unsafe { *p });
            }
            out
        }

        pub fn write_answer(&self, index: PacketIndex, lane: u32, answer: &[u64; layout::ANSWER_WORDS]) {
            self.write_lane_words(index, lane, answer);
        }

        pub fn write_slot(&self, index: PacketIndex, lane: u32, slot: &[u64; layout::SLOT_WORDS]) {
            self.write_lane_words(index, lane, slot);
        }

        fn write_lane_words(&self, index: PacketIndex, lane: u32, words: &[u64]) {
            assert!(lane < self.lanes, "model buffer has {} lanes", self.lanes);
            let base = lane as usize * layout::SLOT_WORDS;
            for (word, value) in words.iter().enumerate() {
                // SAFETY: loom checks that no other access to this cell is concurrent.
                self.packet(index).slots[base + word].with_mut(|p| unsafe { *p = *value });
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::Ordering;

    /// 8-aligned heap storage for a buffer of `n` packets.
    pub(crate) fn storage(n: u32) -> Vec<u64> {
        vec![0xDEAD_BEEF_DEAD_BEEFu64; layout::buffer_size(n) / 8]
    }

    #[test]
    fn initialize_writes_spec_layout() {
        for n in [2u32, 3, 5, 8] {
            let mut mem = storage(n);
            let base = core::ptr::NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
            // SAFETY: `mem` is 8-aligned, buffer_size(n) bytes, outlives `buf`, and is
            // only accessed through `buf` below.
            let buf = unsafe { DeviceBuffer::new(base, n) };
            buf.initialize(0x1234);
            let mask = layout::index_mask(n);
            assert_eq!(buf.header_word(0), buf.base() as u64 + 48);
            assert_eq!(buf.header_word(8), (buf.base() + layout::payloads_offset(n)) as u64);
            assert_eq!(buf.header_word(16), 0x1234);
            assert_eq!(buf.header_word(24), u64::from(n) - 1);
            assert_eq!(buf.header_word(32), 0);
            assert_eq!(buf.header_word(40), mask);
            let p = |i| buf.packet_index(i).unwrap();
            assert_eq!(buf.next(p(0)).load(Ordering::Relaxed), 0);
            assert_eq!(buf.next(p(1)).load(Ordering::Relaxed), mask + 1);
            for i in 2..u64::from(n) {
                assert_eq!(buf.next(p(i)).load(Ordering::Relaxed), i - 1);
            }
            for i in 0..u64::from(n) {
                assert_eq!(buf.control(p(i)).load(Ordering::Relaxed), 0);
            }
            // Payloads are left alone.
            assert_eq!(mem[layout::payloads_offset(n) / 8], 0xDEAD_BEEF_DEAD_BEEF);
        }
    }

    #[test]
    fn packet_index_rejects_indices_past_the_count() {
        let mut mem = storage(5);
        let base = core::ptr::NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: as above.
        let buf = unsafe { DeviceBuffer::new(base, 5) };
        assert_eq!(buf.index_mask(), 7);
        for index in 0..5u64 {
            assert_eq!(buf.packet_index(index + 8 * 3).map(|p| p.get()), Some(index as u32));
        }
        for index in 5..8u64 {
            assert!(buf.packet_index(index).is_none());
            assert!(buf.packet_index(index + 8 * 1000).is_none());
        }
    }

    #[test]
    fn slots_round_trip_at_the_right_offsets() {
        let n = 3;
        let mut mem = storage(n);
        let base = core::ptr::NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: as above.
        let buf = unsafe { DeviceBuffer::new(base, n) };
        let index = buf.packet_index(2).unwrap();
        let slot = [1, 2, 3, 4, 5, 6, 7, 8];
        buf.write_slot(index, 63, &slot);
        assert_eq!(buf.read_slot(index, 63), slot);
        let first = layout::slot_word_offset(n, 2, 63, 0) / 8;
        assert_eq!(&mem[first..first + 8], &slot);
        assert_eq!(first + 8, mem.len());
    }
}
