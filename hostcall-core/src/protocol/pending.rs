//! A packet found pending in device memory (`Pending`, over either
//! protocol's buffer view) and how every such packet is served: lane by lane
//! in place, or through a host copy, with the next lanes' lines asked for
//! ahead.

use super::host_packet::HostPacket;
use super::packet::{LaneRequest, Packet};
use super::payload::{ANSWER_WORDS, SLOT_WORDS};

/// One pending packet's lanes in device memory, whichever protocol laid
/// them out (`Pending` over either buffer view): what the services' `Packet`
/// view needs from it. Every such packet is served the same way (below).
pub trait DeviceLanes {
    fn buffer_key(&self) -> usize;
    fn service(&self) -> u32;
    fn activemask(&self) -> u64;
    /// Hint: lane `lane`'s line is about to be read and then written.
    fn prefetch(&self, lane: u32);
    /// Lane `lane`'s 8 request words.
    fn read(&self, lane: u32) -> [u64; SLOT_WORDS];
    /// Lane `lane`'s 8 words where they lie (None: only a copy can be read).
    fn in_place(&self, lane: u32) -> Option<&[core::sync::atomic::AtomicU64; SLOT_WORDS]>;
    /// Writes lane `lane`'s answer words (all the wave reads back).
    fn write_answer(&self, lane: u32, answer: &[u64; ANSWER_WORDS]);
}

/// What a protocol's buffer view offers for the packets it hands out: the
/// slots of packet `Index`, read and answered in device memory.
pub trait SlotAccess {
    /// A packet index the view has checked against its packet count.
    type Index: Copy;
    fn base(&self) -> usize;
    fn prefetch_slot(&self, index: Self::Index, lane: u32);
    fn read_slot(&self, index: Self::Index, lane: u32) -> [u64; SLOT_WORDS];
    fn slot_words(
        &self,
        index: Self::Index,
        lane: u32,
    ) -> Option<&[core::sync::atomic::AtomicU64; SLOT_WORDS]>;
    fn write_answer(&self, index: Self::Index, lane: u32, answer: &[u64; ANSWER_WORDS]);
}

/// Implements `SlotAccess` for a buffer view by its inherent methods of the
/// same names (each protocol's view, real and modelled).
macro_rules! slot_access {
    ($buffer:ty, $index:ty) => {
        impl $crate::protocol::pending::SlotAccess for $buffer {
            type Index = $index;
            #[inline]
            fn base(&self) -> usize {
                <$buffer>::base(self)
            }
            #[inline]
            fn prefetch_slot(&self, index: $index, lane: u32) {
                <$buffer>::prefetch_slot(self, index, lane)
            }
            #[inline]
            fn read_slot(&self, index: $index, lane: u32) -> [u64; $crate::protocol::payload::SLOT_WORDS] {
                <$buffer>::read_slot(self, index, lane)
            }
            #[inline]
            fn slot_words(
                &self,
                index: $index,
                lane: u32,
            ) -> Option<&[core::sync::atomic::AtomicU64; $crate::protocol::payload::SLOT_WORDS]> {
                <$buffer>::slot_words(self, index, lane)
            }
            #[inline]
            fn write_answer(
                &self,
                index: $index,
                lane: u32,
                answer: &[u64; $crate::protocol::payload::ANSWER_WORDS],
            ) {
                <$buffer>::write_answer(self, index, lane, answer)
            }
        }
    };
}
pub(crate) use slot_access;

/// A packet found pending in a buffer and not yet handed back, in either
/// protocol: its header as the wave wrote it, its lanes in device memory.
pub struct Pending<'a, B: SlotAccess> {
    buffer: &'a B,
    index: B::Index,
    service: u32,
    activemask: u64,
}

impl<'a, B: SlotAccess> Pending<'a, B> {
    /// `service` and `activemask` as read from the packet's header.
    pub(crate) fn new(buffer: &'a B, index: B::Index, service: u32, activemask: u64) -> Self {
        Pending { buffer, index, service, activemask }
    }
}

impl<B: SlotAccess> DeviceLanes for Pending<'_, B> {
    fn buffer_key(&self) -> usize {
        self.buffer.base()
    }

    fn service(&self) -> u32 {
        self.service
    }

    fn activemask(&self) -> u64 {
        self.activemask
    }

    #[inline]
    fn prefetch(&self, lane: u32) {
        self.buffer.prefetch_slot(self.index, lane);
    }

    fn read(&self, lane: u32) -> [u64; SLOT_WORDS] {
        self.buffer.read_slot(self.index, lane)
    }

    fn in_place(&self, lane: u32) -> Option<&[core::sync::atomic::AtomicU64; SLOT_WORDS]> {
        self.buffer.slot_words(self.index, lane)
    }

    #[inline]
    fn write_answer(&self, lane: u32, answer: &[u64; ANSWER_WORDS]) {
        self.buffer.write_answer(self.index, lane, answer);
    }
}

impl<L: DeviceLanes> Packet for L {
    fn service(&self) -> u32 {
        DeviceLanes::service(self)
    }

    fn active_lane_count(&self) -> u32 {
        self.activemask().count_ones()
    }

    fn buffer_key(&self) -> usize {
        DeviceLanes::buffer_key(self)
    }

    fn serve_lanes<F: FnMut(u32, u32, &mut [u64; SLOT_WORDS])>(&mut self, mut serve: F) {
        let service = DeviceLanes::service(self);
        for_each_lane(
            self.activemask(),
            |lane| self.prefetch(lane),
            |lane| {
                let mut slot = self.read(lane);
                serve(service, lane, &mut slot);
                // Only the answer words go back: the wave reads nothing else.
                self.write_answer(lane, &[slot[0], slot[1]]);
            },
        );
    }

    fn answer_lanes<F: FnMut(u32, LaneRequest<'_>) -> [u64; ANSWER_WORDS]>(&mut self, mut answer: F) {
        for_each_lane(
            self.activemask(),
            |lane| self.prefetch(lane),
            |lane| {
                // The request is read where it lies (a copy only where the
                // buffer cannot lend its words), the answer written straight
                // back: no host copy of the slot is written back.
                let words = match self.in_place(lane) {
                    Some(words) => answer(lane, LaneRequest::InPlace(words)),
                    None => answer(lane, LaneRequest::Copy(&self.read(lane))),
                };
                self.write_answer(lane, &words);
            },
        );
    }

    fn serve_whole<F: FnOnce(&mut HostPacket)>(&mut self, serve: F) {
        let mut packet =
            HostPacket::new(DeviceLanes::buffer_key(self), DeviceLanes::service(self), self.activemask());
        // The lines are written again below (the answers).
        for_each_lane(
            self.activemask(),
            |lane| self.prefetch(lane),
            |lane| packet.slots[lane as usize] = self.read(lane),
        );
        serve(&mut packet);
        // Only the lanes the wave sent, whatever the service did to the copy's
        // header, and only their answer words: the wave reads nothing else.
        // (Their lines were asked for writing when they were read.)
        for_each_lane(
            self.activemask(),
            |_| {},
            |lane| {
                let slot = &packet.slots[lane as usize];
                self.write_answer(lane, &[slot[0], slot[1]]);
            },
        );
    }
}

/// How many active lanes ahead `for_each_lane` hints the next lines: about
/// the misses a core keeps in flight (10–16 line fill buffers), so the
/// transfers of the next lanes overlap (chosen by measurement:
/// docs/performance.md).
const PREFETCH_LANES_AHEAD: u32 = 8;

/// Calls `visit` for each lane of `activemask` in lane order, after calling
/// `prefetch` for the lane `PREFETCH_LANES_AHEAD` active lanes further on:
/// each lane's line is read and then written (the answer), so asking for it
/// for writing early overlaps its transfer with the lanes before it and
/// saves the upgrade after the read.
pub(crate) fn for_each_lane(activemask: u64, mut prefetch: impl FnMut(u32), mut visit: impl FnMut(u32)) {
    let mut ahead = activemask;
    let mut next_ahead = |ahead: &mut u64| {
        if *ahead != 0 {
            prefetch(ahead.trailing_zeros());
            *ahead &= *ahead - 1;
        }
    };
    for _ in 0..PREFETCH_LANES_AHEAD {
        next_ahead(&mut ahead);
    }
    let mut mask = activemask;
    while mask != 0 {
        let lane = mask.trailing_zeros();
        mask &= mask - 1;
        next_ahead(&mut ahead);
        visit(lane);
    }
}

#[cfg(test)]
mod lane_order_tests {
    use super::for_each_lane;

    #[test]
    fn every_lane_is_visited_once_in_order_and_hinted_before() {
        for mask in [0u64, 1, 0b1011, 1 << 63, u64::MAX, 0x8000_0000_0000_0001] {
            let events = std::cell::RefCell::new(Vec::new());
            for_each_lane(
                mask,
                |lane| events.borrow_mut().push(('p', lane)),
                |lane| events.borrow_mut().push(('v', lane)),
            );
            let events = events.into_inner();
            let visited: Vec<u32> = events.iter().filter(|e| e.0 == 'v').map(|e| e.1).collect();
            let lanes: Vec<u32> = (0..64).filter(|l| mask & (1u64 << l) != 0).collect();
            assert_eq!(visited, lanes, "mask {mask:#x}");
            for lane in lanes {
                let hinted = events.iter().position(|&e| e == ('p', lane)).expect("hinted");
                let seen = events.iter().position(|&e| e == ('v', lane)).unwrap();
                assert!(hinted < seen, "lane {lane} hinted before it is visited");
            }
        }
    }
}
