//! The types the hostcall extension API shares with C
//! (`include/amdgpu_dropin_hostcall.h`): the host copy of one packet and the
//! two handler signatures.
//!
//! For a registered service the listener copies the active lanes' words out
//! of device memory into this struct, lets the service answer in place, and
//! writes each active lane's two answer words (`slot[0..1]`) back before it
//! clears READY. Inactive lanes are zero in the copy and are never written
//! back, so a handler cannot touch a lane the wave did not use. The built-in services (FUNCTION_CALL, PRINTF)
//! skip the copy and go lane by lane (`Packet::answer_lanes`,
//! `Packet::serve_lanes`).

use core::ffi::c_void;

use super::payload::{ANSWER_WORDS, LANES, SLOT_WORDS};

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

/// The Rust-side name.
pub type HostPacket = amdgpu_dropin_hostcall_packet_t;

/// A packet being served, as the services see it: the one in device memory
/// (`Pending`, either protocol) or a host copy (tests).
pub trait Packet {
    fn service(&self) -> u32;
    fn buffer_key(&self) -> usize;
    /// Runs `serve(service, lane, slot)` for every active lane, in place.
    fn serve_lanes<F: FnMut(u32, u32, &mut [u64; SLOT_WORDS])>(&mut self, serve: F);
    /// Runs `answer(lane, request)` for every active lane: it gets the lane's
    /// 8 words and returns the lane's answer, which becomes `slot[0..2]`; the
    /// other words stay as the device wrote them. For services that only
    /// read the request (FUNCTION_CALL): a packet in device memory then
    /// writes back just the answer words, and its request is read in place.
    fn answer_lanes<F: FnMut(u32, LaneRequest<'_>) -> [u64; ANSWER_WORDS]>(&mut self, mut answer: F) {
        self.serve_lanes(|_, lane, slot| {
            let words = answer(lane, LaneRequest::Copy(slot));
            slot[..ANSWER_WORDS].copy_from_slice(&words);
        });
    }
    /// Runs `serve` on a host copy of the whole packet; the active lanes'
    /// answer words (`slot[0..1]`) are written back.
    fn serve_whole<F: FnOnce(&mut HostPacket)>(&mut self, serve: F);
}

/// A lane's 8 request words: where they lie in device memory (the wave waits
/// for its answer, so they hold still), or a copy.
#[derive(Clone, Copy)]
pub enum LaneRequest<'a> {
    InPlace(&'a [core::sync::atomic::AtomicU64; SLOT_WORDS]),
    Copy(&'a [u64; SLOT_WORDS]),
}

impl LaneRequest<'_> {
    pub fn word(&self, word: usize) -> u64 {
        match self {
            // Relaxed: ordered by the protocol step that found the packet.
            LaneRequest::InPlace(words) => words[word].load(core::sync::atomic::Ordering::Relaxed),
            LaneRequest::Copy(words) => words[word],
        }
    }

    /// The address of words 1..8, for a C callee that reads them (an
    /// `AtomicU64` has the layout of a `u64`).
    pub fn inputs(&self) -> *const u64 {
        match self {
            LaneRequest::InPlace(words) => words[1..].as_ptr().cast(),
            LaneRequest::Copy(words) => words[1..].as_ptr(),
        }
    }
}

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
        impl $crate::hostcall::protocol::packet::SlotAccess for $buffer {
            type Index = $index;
            fn base(&self) -> usize {
                <$buffer>::base(self)
            }
            fn prefetch_slot(&self, index: $index, lane: u32) {
                <$buffer>::prefetch_slot(self, index, lane)
            }
            fn read_slot(
                &self,
                index: $index,
                lane: u32,
            ) -> [u64; $crate::hostcall::protocol::payload::SLOT_WORDS] {
                <$buffer>::read_slot(self, index, lane)
            }
            fn slot_words(
                &self,
                index: $index,
                lane: u32,
            ) -> Option<&[core::sync::atomic::AtomicU64; $crate::hostcall::protocol::payload::SLOT_WORDS]>
            {
                <$buffer>::slot_words(self, index, lane)
            }
            fn write_answer(
                &self,
                index: $index,
                lane: u32,
                answer: &[u64; $crate::hostcall::protocol::payload::ANSWER_WORDS],
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

    fn prefetch(&self, lane: u32) {
        self.buffer.prefetch_slot(self.index, lane);
    }

    fn read(&self, lane: u32) -> [u64; SLOT_WORDS] {
        self.buffer.read_slot(self.index, lane)
    }

    fn in_place(&self, lane: u32) -> Option<&[core::sync::atomic::AtomicU64; SLOT_WORDS]> {
        self.buffer.slot_words(self.index, lane)
    }

    fn write_answer(&self, lane: u32, answer: &[u64; ANSWER_WORDS]) {
        self.buffer.write_answer(self.index, lane, answer);
    }
}

impl<L: DeviceLanes> Packet for L {
    fn service(&self) -> u32 {
        DeviceLanes::service(self)
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

impl Packet for HostPacket {
    fn service(&self) -> u32 {
        self.service
    }

    fn buffer_key(&self) -> usize {
        HostPacket::buffer_key(self)
    }

    fn serve_lanes<F: FnMut(u32, u32, &mut [u64; SLOT_WORDS])>(&mut self, serve: F) {
        self.for_each_active_lane(serve);
    }

    fn serve_whole<F: FnOnce(&mut HostPacket)>(&mut self, serve: F) {
        serve(self);
    }
}

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

#[cfg(all(test, not(loom)))]
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
