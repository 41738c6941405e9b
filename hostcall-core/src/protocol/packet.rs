//! The packet view the services see (`Packet`), the same for both
//! protocols and for a host copy: its header, its lanes one by one (in
//! device memory, `Packet::serve_lanes` / `answer_lanes`, what the built-in
//! services use) or a whole-packet host copy (`Packet::serve_whole`, for
//! registered handlers; `host_packet.rs`).

use super::host_packet::HostPacket;
use super::payload::{ANSWER_WORDS, SLOT_WORDS};

/// A packet being served, as the services see it: the one in device memory
/// (`Pending`, either protocol) or a host copy (tests).
pub trait Packet {
    fn service(&self) -> u32;
    fn buffer_key(&self) -> usize;
    /// How many lanes are active (what the listener's counters count).
    fn active_lane_count(&self) -> u32;
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
    #[inline]
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

/// A host copy is served in place.
impl Packet for HostPacket {
    fn service(&self) -> u32 {
        self.service
    }

    fn active_lane_count(&self) -> u32 {
        self.activemask.count_ones()
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
