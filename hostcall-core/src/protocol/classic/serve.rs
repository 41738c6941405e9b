//! The host side of the classic hostcall protocol, written against the `sync`
//! shim so `tests/loom_hostcall.rs` model-checks exactly this code, through
//! the listener's own entry (`protocol::Buffer::visit`).
//!
//! # Protocol (per wave; ROCm device libraries, "ockl" hostcall)
//!
//! Device: pop a packet from `free_stack` (acquire CAS) → write service,
//! activemask, control = READY and the active lanes' payload words → push the
//! packet on `ready_stack` (`next` = old top, release CAS) → add 1 to the
//! doorbell signal (release) → spin until READY is clear (acquire) → read
//! slot[0..1] → push the packet back on `free_stack` with its tag bumped.
//!
//! Host (`take_ready_packets`, after the visit's peek in
//! `protocol::Buffer::visit`): detach the whole ready stack (swap with 0,
//! acquire) → for each packet of the detached chain (oldest first when the
//! chain is short): read its `next` *first*, copy each
//! active lane's words out, run the service, write the answer words
//! (slot[0..1]) back, clear READY (release). Once READY is clear the wave owns the packet again and may
//! recycle it at once, which is why `next` must have been read before.
//!
//! # Memory ordering
//!
//! * Host `swap(0, Acquire)` on ready_stack pairs with every device
//!   `CAS(Release)` that pushed a packet of the detached chain: the pushes are
//!   read-modify-writes, so each one's release sequence extends through all
//!   later pushes to the value our swap reads. Everything a wave wrote before
//!   its push (header, payload, `next`) is therefore visible, and plain
//!   (relaxed) loads suffice for them.
//! * Host `store(control & !READY, Release)` on control pairs with the wave's
//!   acquire spin on READY: the answer words are visible before the wave reads
//!   them, and our last access to the packet (`next` was read even earlier)
//!   happens before the wave reuses it.
//! * The doorbell is only a wake-up hint and carries no data; the listener
//!   never relies on it to find work (it rescans on timeout).
//!
//! # Malformed device traffic
//!
//! A tagged pointer whose index is not below the packet count (possible when
//! the count is not a power of two) is never dereferenced: the rest of the
//! chain (reachable only through that packet) is dropped and logged. A
//! packet in the chain without READY set (a cycle back to a packet already
//! released, or corruption), or a chain longer than the packet count, ends
//! the walk: every packet is served at most once per detach.

use super::buffer::{DeviceBuffer, PacketIndex};
use super::layout::CONTROL_READY;
use crate::protocol::pending::Pending;
use crate::sync::Ordering;

/// What one `take_ready_packets` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DrainStats {
    /// Packets served and released (READY cleared).
    pub served: u32,
    /// A tagged pointer with an out-of-range index ended the chain.
    pub bad_pointer: Option<u64>,
    /// The chain reached a packet without READY (a cycle back to a released
    /// packet, or corruption) or grew longer than the packet count; cut there.
    pub cycle: bool,
    /// The walk stopped early because `keep_going` said so.
    pub stopped: bool,
}

impl DrainStats {
    pub fn did_work(&self) -> bool {
        self.served > 0 || self.bad_pointer.is_some() || self.cycle
    }
}

/// Detaches `buffer`'s ready stack and serves every packet on it, a packet
/// at a time: `serve` gets the packet (its header, and its lanes one by one
/// or as a whole-packet host copy, `Packet`); READY is cleared after it
/// returns. `keep_going()` is asked between packets; when it returns false
/// the walk stops (the buffer is being unregistered) and the packets not yet
/// served are abandoned. The caller peeks first, or not
/// (`protocol::Buffer::visit`).
///
/// Order: the ready stack is last in, first out, so its chain lists the
/// newest packet first. A chain of at most `FIFO_UP_TO` packets (the usual
/// case) is served oldest first, so the wave that has waited longest is
/// answered first. A longer chain is served in chain order: looking ahead
/// through all of it first costs more listener CPU per packet than it gains
/// (each `next` is a cache miss the device wrote, chased serially;
/// docs/performance.md).
pub fn take_ready_packets<S, K>(buffer: &DeviceBuffer, mut serve: S, mut keep_going: K) -> DrainStats
where
    S: FnMut(&mut PendingPacket<'_>),
    K: FnMut() -> bool,
{
    let mut stats = DrainStats::default();
    // Acquire: pairs with the device's release CAS that pushed onto ready_stack
    // (see "Memory ordering" above).
    let mut chain = ChainWalk { ptr: buffer.ready_stack().swap(0, Ordering::Acquire), walked: 0 };
    if chain.finished() {
        return stats;
    }
    // Look ahead up to FIFO_UP_TO packets (their `next` read, nothing served).
    let mut ahead = [(PacketIndex::FIRST, 0u32); FIFO_UP_TO];
    let mut count = 0;
    while count < FIFO_UP_TO {
        let Some(packet) = chain.next(buffer, &ahead[..count], &mut stats) else { break };
        ahead[count] = packet;
        count += 1;
    }
    let ahead = &ahead[..count];
    if chain.finished() {
        // The whole chain: oldest first.
        for (served, &(index, control)) in ahead.iter().rev().enumerate() {
            serve_packet(buffer, index, control, &mut serve);
            stats.served += 1;
            if served + 1 < count && !keep_going() {
                stats.stopped = true;
                break;
            }
        }
        return stats;
    }
    // A long chain: in chain order, the looked-ahead packets first.
    let mut looked_ahead = ahead.iter().copied();
    while let Some((index, control)) = looked_ahead.next().or_else(|| chain.next(buffer, &[], &mut stats)) {
        serve_packet(buffer, index, control, &mut serve);
        stats.served += 1;
        if !chain.finished() && !keep_going() {
            stats.stopped = true;
            break;
        }
    }
    stats
}

/// Chains up to this long are served oldest first (see `take_ready_packets`).
const FIFO_UP_TO: usize = 16;

/// A walk along a detached ready-stack chain.
struct ChainWalk {
    /// The next tagged pointer; 0 when the chain has ended or was cut.
    ptr: u64,
    /// Packets taken so far (bounded by the packet count).
    walked: u64,
}

impl ChainWalk {
    fn finished(&self) -> bool {
        self.ptr == 0
    }

    /// The next packet (index, control) of the chain, its `next` already
    /// read; None at the end of the chain, or when the chain is cut (recorded
    /// in `stats`). `unserved`: packets taken but not yet served (READY
    /// still set), so a chain leading back to one of them is a cycle too.
    #[inline]
    fn next(
        &mut self,
        buffer: &DeviceBuffer,
        unserved: &[(PacketIndex, u32)],
        stats: &mut DrainStats,
    ) -> Option<(PacketIndex, u32)> {
        if self.ptr == 0 {
            return None;
        }
        let Some(index) = buffer.packet_index(self.ptr) else {
            stats.bad_pointer = Some(self.ptr);
            self.ptr = 0;
            return None;
        };
        self.walked += 1;
        // A packet on the ready stack always has READY set (the wave sets it
        // before the push). Without it the chain is corrupt: most likely a
        // cycle back to a packet this walk already released. Its `next` may
        // be stale, so stop here. Back to a packet taken but not yet served is
        // a cycle as well. The step bound is a last guard.
        // Relaxed: as for `next` below (and our own clears are program-ordered).
        let control = buffer.control(index).load(Ordering::Relaxed);
        if control & CONTROL_READY == 0
            || unserved.iter().any(|&(taken, _)| taken == index)
            || self.walked > u64::from(buffer.packets())
        {
            stats.cycle = true;
            self.ptr = 0;
            return None;
        }
        // Relaxed: made visible by the acquire swap. Read before the packet
        // is released: afterwards the wave may push it on the free stack and
        // overwrite `next`.
        self.ptr = buffer.next(index).load(Ordering::Relaxed);
        Some((index, control))
    }
}

/// A packet detached from the ready stack and not yet handed back.
pub type PendingPacket<'a> = Pending<'a, DeviceBuffer>;

/// Serves one packet, then hands it back to the wave. `control` is the
/// packet's control word as read in the walk.
fn serve_packet<S>(buffer: &DeviceBuffer, index: PacketIndex, control: u32, serve: &mut S)
where
    S: FnMut(&mut PendingPacket<'_>),
{
    // Relaxed: header fields written before the push, visible through the
    // acquire swap in `take_ready_packets`.
    let activemask = buffer.activemask(index).load(Ordering::Relaxed);
    let service = buffer.service(index).load(Ordering::Relaxed);
    serve(&mut Pending::new(buffer, index, service, activemask));
    // Release: publishes the answer words to the wave, whose acquire load that
    // sees READY clear pairs with this; also orders our `next` read and every
    // payload access before the wave's reuse of the packet. A plain store,
    // not a read-modify-write: while the packet is with the host the wave
    // only reads `control`, so nothing can change it under us.
    buffer.control(index).store(control & !CONTROL_READY, Ordering::Release);
}

//===----------------------------------------------------------------------===//
// The device side, for tests and the loom model
//===----------------------------------------------------------------------===//

/// One wave's steps of the device protocol, written from
/// docs/protocols.md#classic-device-steps for tests
/// (the C device simulator is the independent implementation).
#[cfg(any(test, loom, feature = "device-model"))]
pub mod device {
    use super::*;
    use crate::protocol::classic::layout;

    /// Pops a packet from the free stack; None when it is empty.
    pub fn pop_free(buffer: &DeviceBuffer) -> Option<u64> {
        let free = buffer.free_stack();
        // Acquire: pairs with the release CAS of the wave that pushed the top.
        let mut top = free.load(Ordering::Acquire);
        loop {
            if top == 0 {
                return None;
            }
            let index = buffer.packet_index(top).expect("free stack holds valid pointers");
            // Relaxed: written before the release push we acquired.
            let next = buffer.next(index).load(Ordering::Relaxed);
            // Acquire on success and on failure: either way we go on to read the
            // `next` word of the top we observed, published by its pusher's release CAS.
            match free.compare_exchange_weak(top, next, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return Some(top),
                Err(current) => top = current,
            }
        }
    }

    /// Fills a popped packet.
    pub fn fill(buffer: &DeviceBuffer, ptr: u64, service: u32, activemask: u64, lanes: &[[u64; 8]]) {
        let index = buffer.packet_index(ptr).unwrap();
        // Relaxed: published by the release push onto ready_stack.
        buffer.service(index).store(service, Ordering::Relaxed);
        buffer.activemask(index).store(activemask, Ordering::Relaxed);
        buffer.control(index).store(CONTROL_READY, Ordering::Relaxed);
        let mut mask = activemask;
        while mask != 0 {
            let lane = mask.trailing_zeros();
            mask &= mask - 1;
            buffer.write_slot(index, lane, &lanes[lane as usize]);
        }
    }

    /// Pushes a filled packet onto the ready stack.
    pub fn push_ready(buffer: &DeviceBuffer, ptr: u64) {
        let index = buffer.packet_index(ptr).unwrap();
        let ready = buffer.ready_stack();
        // Relaxed: the CAS below re-checks the value.
        let mut top = ready.load(Ordering::Relaxed);
        loop {
            buffer.next(index).store(top, Ordering::Relaxed);
            // Release: publishes the packet's contents to the host's acquire swap.
            match ready.compare_exchange_weak(top, ptr, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(current) => top = current,
            }
        }
    }

    /// True once the host has cleared READY.
    pub fn is_served(buffer: &DeviceBuffer, ptr: u64) -> bool {
        let index = buffer.packet_index(ptr).unwrap();
        // Acquire: pairs with the host's release clear of READY.
        buffer.control(index).load(Ordering::Acquire) & CONTROL_READY == 0
    }

    /// Reads lane `lane`'s answer words.
    pub fn read_answer(buffer: &DeviceBuffer, ptr: u64, lane: u32) -> [u64; 8] {
        buffer.read_slot(buffer.packet_index(ptr).unwrap(), lane)
    }

    /// Returns the packet to the free stack with its tag bumped.
    pub fn push_free(buffer: &DeviceBuffer, ptr: u64) {
        let index = buffer.packet_index(ptr).unwrap();
        let tagged = layout::bump_tag(ptr, buffer.index_mask());
        let free = buffer.free_stack();
        // Relaxed: the CAS below re-checks the value.
        let mut top = free.load(Ordering::Relaxed);
        loop {
            buffer.next(index).store(top, Ordering::Relaxed);
            // Release: publishes `next` (and our last reads of the packet) to the next popper.
            match free.compare_exchange_weak(top, tagged, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(current) => top = current,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::device::*;
    use super::*;
    use crate::protocol::classic::layout;
    use crate::protocol::packet::Packet;
    use core::ptr::NonNull;

    struct TestBuffer {
        _mem: Vec<u64>,
        buf: DeviceBuffer,
    }

    fn make(n: u32) -> TestBuffer {
        let mut mem = vec![0u64; layout::buffer_size(n) / 8];
        let base = NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `mem` is 8-aligned, large enough, and lives as long as the view
        // (both in TestBuffer; the Vec's heap block does not move).
        let buf = unsafe { DeviceBuffer::new(base, n) };
        buf.initialize(0);
        TestBuffer { _mem: mem, buf }
    }

    /// Serves the ready stack lane by lane (`serve(service, lane, slot)`).
    fn drain_ready<S, K>(buffer: &DeviceBuffer, mut serve: S, keep_going: K) -> DrainStats
    where
        S: FnMut(u32, u32, &mut [u64; layout::SLOT_WORDS]),
        K: FnMut() -> bool,
    {
        take_ready_packets(buffer, |packet| packet.serve_lanes(&mut serve), keep_going)
    }

    fn lanes_with(seed: u64) -> Vec<[u64; 8]> {
        (0..64u64).map(|l| core::array::from_fn(|w| seed * 1000 + l * 10 + w as u64)).collect()
    }

    #[test]
    fn serves_every_packet_and_every_active_lane_only() {
        for n in [2u32, 3, 5, 8] {
            let t = make(n);
            let b = &t.buf;
            let mut ptrs = Vec::new();
            let masks = [1u64, 0x8000_0000_0000_0001, u64::MAX, 0xF0, 0x5];
            for k in 0..n as usize {
                let ptr = pop_free(b).expect("free packet");
                fill(b, ptr, 7, masks[k % masks.len()], &lanes_with(k as u64));
                push_ready(b, ptr);
                ptrs.push((ptr, masks[k % masks.len()], k as u64));
            }
            assert_eq!(pop_free(b), None, "n={n}: all packets taken");
            let mut seen = Vec::new();
            let stats = drain_ready(
                b,
                |service, lane, slot| {
                    assert_eq!(service, 7);
                    seen.push((slot[0], lane));
                    slot[0] = !slot[0];
                    slot[1] = u64::from(lane);
                },
                || true,
            );
            assert_eq!(stats.served, n);
            assert_eq!(stats.bad_pointer, None);
            let expected_lanes: u32 = ptrs.iter().map(|p| p.1.count_ones()).sum();
            assert_eq!(seen.len() as u32, expected_lanes);
            for (ptr, mask, k) in &ptrs {
                assert!(is_served(b, *ptr));
                for lane in 0..64u32 {
                    let answer = read_answer(b, *ptr, lane);
                    let input = lanes_with(*k)[lane as usize];
                    if mask & (1 << lane) != 0 {
                        assert_eq!(answer[0], !input[0]);
                        assert_eq!(answer[1], u64::from(lane));
                        assert_eq!(answer[2..], input[2..]);
                    } else {
                        assert_eq!(answer, [0; 8], "inactive lane {lane} touched");
                    }
                }
                push_free(b, *ptr);
            }
            // Every packet is back with a bumped tag and can be popped again.
            let mut again = 0;
            while let Some(ptr) = pop_free(b) {
                assert!(layout::tag_of(ptr, b.index_mask()) >= 1);
                again += 1;
            }
            assert_eq!(again, n);
        }
    }

    #[test]
    fn empty_mask_only_clears_ready() {
        let t = make(2);
        let b = &t.buf;
        let ptr = pop_free(b).unwrap();
        fill(b, ptr, 1, 0, &lanes_with(0));
        push_ready(b, ptr);
        let stats = drain_ready(b, |_, _, _| panic!("no lane is active"), || true);
        assert_eq!(stats.served, 1);
        assert!(is_served(b, ptr));
    }

    #[test]
    fn out_of_range_index_is_never_touched() {
        let t = make(5); // index_mask 7: indices 5..7 name no packet
        let b = &t.buf;
        let good = pop_free(b).unwrap();
        fill(b, good, 1, 1, &lanes_with(1));
        push_ready(b, good);
        // A bad pointer on top of the stack: the good packet below is unreachable.
        b.ready_stack().store(6 + 8 * 2, Ordering::Relaxed);
        let stats = drain_ready(b, |_, _, _| panic!("nothing is served"), || true);
        assert_eq!(stats.bad_pointer, Some(6 + 8 * 2));
        assert_eq!(stats.served, 0);
        assert_eq!(b.ready_stack().load(Ordering::Relaxed), 0, "stack detached");
        // A bad pointer in a `next` word: packets before it are served.
        let t = make(5);
        let b = &t.buf;
        let p = pop_free(b).unwrap();
        fill(b, p, 1, 1, &lanes_with(1));
        push_ready(b, p);
        b.next(b.packet_index(p).unwrap()).store(7, Ordering::Relaxed);
        let stats = drain_ready(b, |_, _, slot| slot[0] = 42, || true);
        assert_eq!(stats.served, 1);
        assert_eq!(stats.bad_pointer, Some(7));
        assert_eq!(read_answer(b, p, 0)[0], 42);
    }

    #[test]
    fn a_cycle_is_cut_after_packet_count_steps() {
        let t = make(3);
        let b = &t.buf;
        let p = pop_free(b).unwrap();
        fill(b, p, 1, 1, &lanes_with(1));
        push_ready(b, p);
        // The packet points at itself.
        b.next(b.packet_index(p).unwrap()).store(p, Ordering::Relaxed);
        let mut calls = 0;
        let stats = drain_ready(b, |_, _, _| calls += 1, || true);
        assert!(stats.cycle);
        assert_eq!(stats.served, 1, "served exactly once");
        assert_eq!(calls, 1);
        // A packet in the chain whose READY bit is clear is not served.
        let t = make(3);
        let b = &t.buf;
        let p = pop_free(b).unwrap();
        fill(b, p, 1, 1, &lanes_with(1));
        b.control(b.packet_index(p).unwrap()).store(0, Ordering::Relaxed);
        push_ready(b, p);
        let stats = drain_ready(b, |_, _, _| panic!("not ready"), || true);
        assert!(stats.cycle);
        assert_eq!(stats.served, 0);
    }

    #[test]
    fn keep_going_false_stops_between_packets() {
        let t = make(4);
        let b = &t.buf;
        for _ in 0..3 {
            let p = pop_free(b).unwrap();
            fill(b, p, 1, 1, &lanes_with(1));
            push_ready(b, p);
        }
        let stats = drain_ready(b, |_, _, _| {}, || false);
        assert_eq!(stats.served, 1);
        assert!(stats.stopped);
    }

    /// Pushes `count` one-lane packets, lane 0's first word = push order;
    /// returns the order in which `drain_ready` served them.
    fn served_order(packets: u32, count: u64) -> Vec<u64> {
        let t = make(packets);
        let b = &t.buf;
        for k in 0..count {
            let p = pop_free(b).unwrap();
            fill(b, p, 1, 1, &lanes_with(k));
            push_ready(b, p);
        }
        let mut order = Vec::new();
        let stats = drain_ready(b, |_, _, slot| order.push(slot[0] / 1000), || true);
        assert_eq!(stats.served as u64, count);
        assert!(!stats.cycle && stats.bad_pointer.is_none());
        order
    }

    #[test]
    fn a_short_chain_is_served_oldest_first() {
        for count in [1u64, 2, 5, FIFO_UP_TO as u64] {
            assert_eq!(served_order(64, count), (0..count).collect::<Vec<_>>(), "{count} packets");
        }
    }

    #[test]
    fn a_long_chain_is_served_in_chain_order() {
        let count = FIFO_UP_TO as u64 + 5;
        assert_eq!(served_order(64, count), (0..count).rev().collect::<Vec<_>>());
    }

    #[test]
    fn a_cycle_back_to_a_packet_not_yet_served_serves_each_once() {
        for chain_len in [2u64, FIFO_UP_TO as u64 + 3] {
            let t = make(64);
            let b = &t.buf;
            let mut first = 0;
            for k in 0..chain_len {
                let p = pop_free(b).unwrap();
                fill(b, p, 1, 1, &lanes_with(k));
                push_ready(b, p);
                if k == 0 {
                    first = p;
                }
            }
            // The oldest packet (end of the chain) points back at the newest.
            let top = b.ready_stack().load(Ordering::Relaxed);
            b.next(b.packet_index(first).unwrap()).store(top, Ordering::Relaxed);
            let mut seen = Vec::new();
            let stats = drain_ready(b, |_, _, slot| seen.push(slot[0] / 1000), || true);
            assert!(stats.cycle, "chain of {chain_len}");
            seen.sort_unstable();
            assert_eq!(seen, (0..chain_len).collect::<Vec<_>>(), "each packet once");
        }
    }

    #[test]
    fn keep_going_false_stops_a_long_chain_between_packets() {
        let t = make(64);
        let b = &t.buf;
        for _ in 0..FIFO_UP_TO + 4 {
            let p = pop_free(b).unwrap();
            fill(b, p, 1, 1, &lanes_with(1));
            push_ready(b, p);
        }
        let mut asked = 0;
        let stats = drain_ready(
            b,
            |_, _, _| {},
            || {
                asked += 1;
                asked < FIFO_UP_TO + 2
            },
        );
        assert_eq!(stats.served as usize, FIFO_UP_TO + 2);
        assert!(stats.stopped);
    }
}
