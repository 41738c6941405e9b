//! Access to a phase-bit hostcall buffer in device-shared memory (layout in
//! `phase_bit/layout.rs`), with the same rules as the classic view beside it:
//! every word is read and written through an atomic view, and a packet is
//! only addressed through a `PhaseIndex` below the host's packet count (the
//! device's copy of the count is never read back).
//!
//! Under `--cfg loom` a modelled buffer stands in (loom atomics for the phase
//! words, loom `UnsafeCell`s for headers and payload words, so an access not
//! ordered by the phase handshake is reported as a data race).

#[cfg(not(loom))]
use super::layout;
use crate::protocol::payload::{ANSWER_WORDS, SLOT_WORDS};
use crate::sync::AtomicU32;

/// A packet index known to be below the buffer's packet count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PhaseIndex(u32);

impl PhaseIndex {
    #[cfg(any(test, loom, feature = "device-model"))]
    #[inline]
    pub fn get(self) -> u32 {
        self.0
    }
}

#[cfg(not(loom))]
pub use real::PhaseBuffer;

#[cfg(loom)]
pub use model::PhaseBuffer;

crate::protocol::pending::slot_access!(PhaseBuffer, PhaseIndex);

#[cfg(not(loom))]
mod real {
    use super::*;
    use crate::protocol::device_words::DeviceWords;
    use core::ptr::NonNull;
    use core::sync::atomic::{AtomicU64, Ordering};

    /// A view of a registered phase-bit buffer.
    #[derive(Clone, Copy, Debug)]
    pub struct PhaseBuffer {
        words: DeviceWords,
        packets: u32,
    }

    impl PhaseBuffer {
        /// # Safety
        /// * `base` is 8-aligned and valid for reads and writes of
        ///   `phase_layout::buffer_size(packets)` bytes until the buffer is
        ///   unregistered and the listener has let go of it;
        /// * meanwhile the memory is only accessed atomically or by device
        ///   code following the phase-bit protocol, never moved.
        pub unsafe fn new(base: NonNull<u8>, packets: u32) -> PhaseBuffer {
            debug_assert!(base.as_ptr() as usize % layout::PHASE_BUFFER_ALIGNMENT == 0);
            // SAFETY: forwarded contract, for the whole buffer.
            let words = unsafe { DeviceWords::new(base, layout::buffer_size(packets)) };
            PhaseBuffer { words, packets }
        }

        pub fn base(&self) -> usize {
            self.words.base()
        }

        pub fn packets(&self) -> u32 {
            self.packets
        }

        /// The packet `index` names, if it is below the packet count.
        pub fn index(&self, index: u32) -> Option<PhaseIndex> {
            (index < self.packets).then_some(PhaseIndex(index))
        }

        // Offsets from `phase_bit/layout.rs`: prefix fields, or fields of a
        // `PhaseIndex` < packets; 64-bit ones at multiples of 8, the phase
        // words (from 56) and the header's service (at 8) 4-aligned.
        #[inline]
        fn word(&self, offset: usize) -> &AtomicU64 {
            self.words.word(offset)
        }

        #[inline]
        fn word32(&self, offset: usize) -> &AtomicU32 {
            self.words.word32(offset)
        }

        pub fn device_phase(&self, index: PhaseIndex) -> &AtomicU32 {
            self.word32(layout::device_phase_at(index.0))
        }

        pub fn host_phase(&self, index: PhaseIndex) -> &AtomicU32 {
            self.word32(layout::host_phase_at(self.packets, index.0))
        }

        /// The header as the wave wrote it: (activemask, service).
        #[inline]
        pub fn read_header(&self, index: PhaseIndex) -> (u64, u32) {
            let header = layout::header_at(self.packets, index.0);
            // Relaxed: the wave's plain stores are made visible by the
            // acquire fence after its device-phase flip was seen (`phase_bit/serve.rs`).
            let activemask = self.word(header + layout::HEADER_ACTIVEMASK).load(Ordering::Relaxed);
            let service = self.word32(header + layout::HEADER_SERVICE).load(Ordering::Relaxed);
            (activemask, service)
        }

        /// Writes a header as a wave would (device simulator tests only).
        #[cfg(any(test, feature = "device-model"))]
        pub fn write_header(&self, index: PhaseIndex, activemask: u64, service: u32) {
            let header = layout::header_at(self.packets, index.0);
            // Relaxed: published by the device-phase release store that follows.
            self.word(header + layout::HEADER_ACTIVEMASK).store(activemask, Ordering::Relaxed);
            self.word32(header + layout::HEADER_SERVICE).store(service, Ordering::Relaxed);
        }

        /// Lane `lane`'s slot of packet `index` where it lies.
        #[inline]
        pub fn slot_words(
            &self,
            index: PhaseIndex,
            lane: u32,
        ) -> Option<&[core::sync::atomic::AtomicU64; SLOT_WORDS]> {
            Some(self.words.slot(layout::slot_word_at(self.packets, index.0, lane, 0)))
        }

        /// Hints that lane `lane`'s slot of packet `index` is about to be
        /// read and its answer written.
        #[inline]
        pub fn prefetch_slot(&self, index: PhaseIndex, lane: u32) {
            self.words.prefetch_for_write(layout::slot_word_at(self.packets, index.0, lane, 0));
        }

        #[inline]
        pub fn read_slot(&self, index: PhaseIndex, lane: u32) -> [u64; SLOT_WORDS] {
            // Ordered by the acquire load of the device phase, as for the header.
            self.words.read_slot(layout::slot_word_at(self.packets, index.0, lane, 0))
        }

        /// Writes lane `lane`'s 8 words (tests play the device with it).
        #[cfg(any(test, feature = "device-model"))]
        pub fn write_slot(&self, index: PhaseIndex, lane: u32, slot: &[u64; SLOT_WORDS]) {
            self.write_lane_words(index, lane, slot);
        }

        /// Writes lane `lane`'s answer words (all the wave reads back).
        #[inline]
        pub fn write_answer(&self, index: PhaseIndex, lane: u32, answer: &[u64; ANSWER_WORDS]) {
            self.write_lane_words(index, lane, answer);
        }

        /// Writes the first `words.len()` words of lane `lane`'s slot.
        #[inline]
        fn write_lane_words(&self, index: PhaseIndex, lane: u32, words: &[u64]) {
            // Published by the host-phase release store that hands the packet
            // back (the wave's acquire load pairs with it).
            self.words.write_words(layout::slot_word_at(self.packets, index.0, lane, 0), words);
        }

        /// Writes the prefix and zeroes both phase arrays (every packet free).
        /// Headers and payloads are left alone; the bitmap is the caller's.
        ///
        /// Relaxed stores: published to the device by the kernel launch that
        /// follows enable, to the listener by the registry's lock.
        pub fn initialize(&self, doorbell: u64, occupied: usize) {
            let relaxed = Ordering::Relaxed;
            let base = self.base() as u64;
            let n = self.packets;
            self.word(layout::OFFSET_DEVICE_PHASE)
                .store(base + layout::device_phase_offset() as u64, relaxed);
            self.word(layout::OFFSET_HOST_PHASE).store(base + layout::host_phase_offset(n) as u64, relaxed);
            self.word(layout::OFFSET_OCCUPIED).store(occupied as u64, relaxed);
            self.word(layout::OFFSET_HEADERS).store(base + layout::headers_offset(n) as u64, relaxed);
            self.word(layout::OFFSET_PAYLOADS).store(base + layout::payloads_offset(n) as u64, relaxed);
            self.word(layout::OFFSET_DOORBELL).store(doorbell, relaxed);
            self.word32(layout::OFFSET_NUM_PACKETS).store(n, relaxed);
            self.word32(layout::OFFSET_RESERVED).store(0, relaxed);
            for i in 0..n {
                self.device_phase(PhaseIndex(i)).store(0, relaxed);
                self.host_phase(PhaseIndex(i)).store(0, relaxed);
            }
        }

        /// A prefix word as device code reads it.
        #[cfg(test)]
        pub fn prefix_word(&self, offset: usize) -> u64 {
            assert!(offset % 8 == 0 && offset < layout::device_phase_offset());
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
        device_phase: AtomicU32,
        host_phase: AtomicU32,
        activemask: UnsafeCell<u64>,
        service: UnsafeCell<u32>,
        slots: Box<[UnsafeCell<u64>]>,
    }

    /// A modelled phase-bit buffer with `lanes` lanes per payload.
    #[derive(Clone)]
    pub struct PhaseBuffer {
        packets_memory: Arc<Box<[Packet]>>,
        packets: u32,
        lanes: u32,
    }

    impl PhaseBuffer {
        pub fn new_model(packets: u32, lanes: u32) -> PhaseBuffer {
            let memory: Vec<Packet> = (0..packets)
                .map(|_| Packet {
                    device_phase: AtomicU32::new(0),
                    host_phase: AtomicU32::new(0),
                    activemask: UnsafeCell::new(0),
                    service: UnsafeCell::new(0),
                    slots: (0..lanes as usize * SLOT_WORDS).map(|_| UnsafeCell::new(0)).collect(),
                })
                .collect();
            PhaseBuffer { packets_memory: Arc::new(memory.into_boxed_slice()), packets, lanes }
        }

        pub fn base(&self) -> usize {
            self.packets_memory.as_ptr() as usize
        }

        pub fn packets(&self) -> u32 {
            self.packets
        }

        pub fn index(&self, index: u32) -> Option<PhaseIndex> {
            (index < self.packets).then_some(PhaseIndex(index))
        }

        fn packet(&self, index: PhaseIndex) -> &Packet {
            &self.packets_memory[index.0 as usize]
        }

        pub fn device_phase(&self, index: PhaseIndex) -> &AtomicU32 {
            &self.packet(index).device_phase
        }

        pub fn host_phase(&self, index: PhaseIndex) -> &AtomicU32 {
            &self.packet(index).host_phase
        }

        pub fn read_header(&self, index: PhaseIndex) -> (u64, u32) {
            let packet = self.packet(index);
            // SAFETY: loom checks that no write to these cells is concurrent.
            unsafe { (packet.activemask.with(|p| *p), packet.service.with(|p| *p)) }
        }

        pub fn write_header(&self, index: PhaseIndex, activemask: u64, service: u32) {
            let packet = self.packet(index);
            // SAFETY: loom checks that no other access to these cells is concurrent.
            unsafe {
                packet.activemask.with_mut(|p| *p = activemask);
                packet.service.with_mut(|p| *p = service);
            }
        }

        /// A cache hint in the real buffer; nothing to model.
        pub fn prefetch_slot(&self, _index: PhaseIndex, _lane: u32) {}

        /// The model's slots are loom cells: callees get a copy.
        pub fn slot_words(
            &self,
            _index: PhaseIndex,
            _lane: u32,
        ) -> Option<&[core::sync::atomic::AtomicU64; SLOT_WORDS]> {
            None
        }

        pub fn read_slot(&self, index: PhaseIndex, lane: u32) -> [u64; SLOT_WORDS] {
            assert!(lane < self.lanes, "model buffer has {} lanes", self.lanes);
            let base = lane as usize * SLOT_WORDS;
            let mut out = [0u64; SLOT_WORDS];
            for (word, value) in out.iter_mut().enumerate() {
                // SAFETY: loom checks that no write to this cell is concurrent.
                *value = self.packet(index).slots[base + word].with(|p| unsafe { *p });
            }
            out
        }

        pub fn write_slot(&self, index: PhaseIndex, lane: u32, slot: &[u64; SLOT_WORDS]) {
            self.write_lane_words(index, lane, slot);
        }

        pub fn write_answer(&self, index: PhaseIndex, lane: u32, answer: &[u64; ANSWER_WORDS]) {
            self.write_lane_words(index, lane, answer);
        }

        fn write_lane_words(&self, index: PhaseIndex, lane: u32, words: &[u64]) {
            assert!(lane < self.lanes, "model buffer has {} lanes", self.lanes);
            let base = lane as usize * SLOT_WORDS;
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
    use crate::protocol::phase_bit::layout;
    use core::sync::atomic::Ordering;

    #[test]
    fn initialize_writes_the_prefix_and_frees_every_packet() {
        for n in [1u32, 3, 33] {
            let mut mem = vec![0xA5A5_A5A5_A5A5_A5A5u64; layout::buffer_size(n) / 8];
            let base = core::ptr::NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
            // SAFETY: `mem` is 8-aligned, buffer_size(n) bytes, outlives `buf`.
            let buf = unsafe { PhaseBuffer::new(base, n) };
            buf.initialize(0x77, 0x5000);
            let b = buf.base() as u64;
            assert_eq!(buf.prefix_word(0), b + 56);
            assert_eq!(buf.prefix_word(8), b + layout::host_phase_offset(n) as u64);
            assert_eq!(buf.prefix_word(16), 0x5000);
            assert_eq!(buf.prefix_word(24), b + layout::headers_offset(n) as u64);
            assert_eq!(buf.prefix_word(32), b + layout::payloads_offset(n) as u64);
            assert_eq!(buf.prefix_word(40), 0x77);
            assert_eq!(buf.prefix_word(48), u64::from(n), "num_packets, then reserved 0");
            for i in 0..n {
                let index = buf.index(i).unwrap();
                assert_eq!(buf.device_phase(index).load(Ordering::Relaxed), 0);
                assert_eq!(buf.host_phase(index).load(Ordering::Relaxed), 0);
            }
            assert!(buf.index(n).is_none());
            assert_eq!(mem[layout::payloads_offset(n) / 8], 0xA5A5_A5A5_A5A5_A5A5, "payloads untouched");
        }
    }

    #[test]
    fn headers_and_slots_round_trip_at_their_offsets() {
        let n = 3;
        let mut mem = vec![0u64; layout::buffer_size(n) / 8];
        let base = core::ptr::NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: as above.
        let buf = unsafe { PhaseBuffer::new(base, n) };
        let index = buf.index(2).unwrap();
        buf.write_header(index, 0x8000_0000_0000_0001, 9);
        assert_eq!(buf.read_header(index), (0x8000_0000_0000_0001, 9));
        let slot = [1, 2, 3, 4, 5, 6, 7, 8];
        buf.write_slot(index, 63, &slot);
        assert_eq!(buf.read_slot(index, 63), slot);
        assert_eq!(mem[layout::header_at(n, 2) / 8], 0x8000_0000_0000_0001);
        let first = layout::slot_word_at(n, 2, 63, 0) / 8;
        assert_eq!(&mem[first..first + 8], &slot);
        assert_eq!(first + 8, mem.len());
    }
}
