//! A registered buffer in its protocol (`Buffer`) and the one way a listener
//! thread serves it (`Buffer::visit`): the peek, the phase-bit scan state, the
//! serving steps, and what a visit found wrong. The listener and the loom
//! models (`tests/loom_hostcall.rs`, `tests/loom_phase.rs`) call the same
//! entry, so the listener never names a protocol.

use super::classic::buffer::DeviceBuffer;
use super::classic::serve::{take_ready_packets, DrainStats};
use super::kind::Protocol;
use super::packet::Packet;
use super::phase_bit::buffer::PhaseBuffer;
use super::phase_bit::layout::DOORBELL_THROTTLE_NS;
use super::phase_bit::serve::{has_pending, serve_phases, PendingPhasePacket, PhaseStats, ScanCell};
use super::poll::PollChannel;
use crate::sync::Ordering;

/// A registered buffer, in the protocol it was enabled with.
pub enum Buffer {
    /// The classic protocol (ready and free stacks).
    Classic(DeviceBuffer),
    /// The phase-bit protocol, with the host's scan state.
    PhaseBit { buffer: PhaseBuffer, scan: ScanCell },
    /// A channel in a protocol of the caller's own, served by its poll
    /// callback (no memory of it is read here).
    Poll(PollChannel),
}

/// What a visit's server does with each packet it is handed (either
/// protocol's pending packet: generic, so each is served without dispatch).
pub trait PacketServer {
    fn serve<P: Packet>(&mut self, packet: &mut P);
}

/// A server answering lane by lane: `serve(service, lane, slot)` leaves the
/// lane's answer in `slot` (the unit tests and the loom models use it).
pub struct ByLane<F>(pub F);

impl<F: FnMut(u32, u32, &mut [u64; super::payload::SLOT_WORDS])> PacketServer for ByLane<F> {
    fn serve<P: Packet>(&mut self, packet: &mut P) {
        packet.serve_lanes(&mut self.0);
    }
}

/// What a visit that got past its peek did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VisitStats {
    /// Packets served; a dropped bad pointer or a cut chain counts as 1
    /// (work was found), so 0 means the visit found nothing.
    pub served: u32,
    /// The visit stopped early because `keep_going` said so: the packets not
    /// yet served are abandoned.
    pub stopped: bool,
    findings: Findings,
}

/// What a visit found wrong, in the protocol's words (told by `report_findings`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Findings {
    #[default]
    None,
    Classic {
        stats: DrainStats,
        index_mask: u64,
        packets: u32,
    },
    PhaseBit {
        odd_phases: u32,
    },
    /// A poll failed for the first time since it was registered (its key is
    /// the buffer key `report_findings` is given).
    PollFailed {
        outcome: i32,
    },
}

impl Buffer {
    /// Initializes the buffer at `base` for `protocol` (its doorbell signal
    /// handle `doorbell`; phase-bit: the occupancy bitmap at `occupied`,
    /// which `protocol.accepts_occupancy`) and returns the view of it.
    ///
    /// # Safety
    /// `base` is `protocol.alignment()`-aligned and valid for reads and
    /// writes of `protocol.buffer_size(packets)` bytes until the buffer is
    /// unregistered and the listener has let go of it, and accessed
    /// meanwhile only atomically or by device code following `protocol`.
    #[cfg(not(loom))]
    pub unsafe fn initialize(
        protocol: Protocol,
        base: core::ptr::NonNull<u8>,
        packets: u32,
        doorbell: u64,
        occupied: usize,
    ) -> Buffer {
        match protocol {
            Protocol::Classic => {
                // SAFETY: forwarded contract.
                let buffer = unsafe { DeviceBuffer::new(base, packets) };
                buffer.initialize(doorbell);
                Buffer::Classic(buffer)
            }
            Protocol::PhaseBit => {
                // SAFETY: forwarded contract, for the phase-bit size.
                let buffer = unsafe { PhaseBuffer::new(base, packets) };
                buffer.initialize(doorbell, occupied);
                Buffer::phase_bit(buffer)
            }
        }
    }

    /// The wire protocol the buffer speaks (None: a poll's own).
    pub fn protocol(&self) -> Option<Protocol> {
        match self {
            Buffer::Classic(_) => Some(Protocol::Classic),
            Buffer::PhaseBit { .. } => Some(Protocol::PhaseBit),
            Buffer::Poll(_) => None,
        }
    }

    /// Bytes of device-shared memory the buffer spans; a poll's channel is
    /// not the library's to know, so it spans its key's one byte (enable
    /// refuses a buffer over it, and it a key inside a buffer).
    #[inline]
    pub fn size(&self) -> usize {
        match self {
            Buffer::Classic(buffer) => Protocol::Classic.buffer_size(buffer.packets()),
            Buffer::PhaseBit { buffer, .. } => Protocol::PhaseBit.buffer_size(buffer.packets()),
            Buffer::Poll(_) => 1,
        }
    }

    /// Whether this is a registered poll rather than a hostcall buffer.
    pub fn is_poll(&self) -> bool {
        matches!(self, Buffer::Poll(_))
    }

    /// A phase-bit buffer over `buffer`, its scan starting with the whole buffer.
    pub fn phase_bit(buffer: PhaseBuffer) -> Buffer {
        let scan = ScanCell::new(buffer.packets());
        Buffer::PhaseBit { buffer, scan }
    }

    /// Serves the packets waiting in the buffer. Classic: a relaxed peek at
    /// the ready stack first (a shared read that leaves the device's cache
    /// line alone), skipped when `expect_work` (the doorbell moved and this is
    /// the only buffer: the swap then takes the line once, not twice). A push
    /// the peek misses is seen by the next visit. Phase-bit: no one word to
    /// peek at; its scan reads the phase words, which the device writes only
    /// when it posts. `begin` runs once the visit goes ahead (classic: after
    /// the peek; phase-bit: before the first packet served, so not at all
    /// when none is pending); `keep_going()` is asked between packets. None:
    /// the peek found nothing.
    ///
    /// Only from inside the buffer's gate (the buffer may be freed otherwise,
    /// and the phase-bit scan state has one user at a time).
    pub fn visit<S, K>(
        &self,
        expect_work: bool,
        begin: impl FnOnce(),
        mut server: S,
        keep_going: K,
    ) -> Option<VisitStats>
    where
        S: PacketServer,
        K: FnMut() -> bool,
    {
        match self {
            Buffer::Classic(buffer) => {
                if !expect_work && buffer.ready_stack().load(Ordering::Relaxed) == 0 {
                    return None;
                }
                begin();
                let stats = take_ready_packets(buffer, |packet| server.serve(packet), keep_going);
                Some(VisitStats {
                    served: if stats.did_work() { stats.served.max(1) } else { 0 },
                    stopped: stats.stopped,
                    findings: Findings::Classic {
                        stats,
                        index_mask: buffer.index_mask(),
                        packets: buffer.packets(),
                    },
                })
            }
            Buffer::PhaseBit { buffer, scan } => {
                // `begin` once the scan finds a packet to serve: a scan that
                // finds none (most of a spinning listener's) costs no clock read.
                let mut begin = Some(begin);
                let mut limit = scan.get();
                let serve = |packet: &mut PendingPhasePacket<'_>| {
                    if let Some(begin) = begin.take() {
                        begin();
                    }
                    server.serve(packet)
                };
                let PhaseStats { served, odd_phases, stopped } =
                    serve_phases(buffer, &mut limit, serve, keep_going);
                scan.set(limit);
                Some(VisitStats { served, stopped, findings: Findings::PhaseBit { odd_phases } })
            }
            Buffer::Poll(channel) => {
                // No peek: only the callback can look. It serves by itself;
                // work it reports brings the listener back soon, as packets do.
                begin();
                let polled = channel.poll();
                Some(VisitStats {
                    served: u32::from(polled.served),
                    stopped: false,
                    findings: polled
                        .first_failure
                        .map_or(Findings::None, |outcome| Findings::PollFailed { outcome }),
                })
            }
        }
    }

    /// Asks for the line a visit reads first, so that the lines of several
    /// buffers are fetched at once rather than one per visit in turn.
    #[inline]
    pub fn prefetch(&self) {
        if let Buffer::Classic(buffer) = self {
            buffer.prefetch_ready_stack();
        }
    }

    /// How long (ns) after a ring the device may post without ringing: 0 when
    /// every post rings (classic), the device's ring throttle for phase-bit.
    pub fn unrung_post_window_ns(&self) -> u64 {
        match self {
            Buffer::Classic(_) => 0,
            Buffer::PhaseBit { .. } => DOORBELL_THROTTLE_NS,
            // The channel's device code rings for each request (ROCclr's RPC
            // does); a poll that served something is visited again anyway.
            Buffer::Poll(_) => 0,
        }
    }

    /// Whether requests are waiting to be served: relaxed peeks (serving
    /// reads again with acquire); true for a poll, which cannot be peeked at. Only while the buffer is alive: from
    /// inside its gate, or by disable before it returns.
    #[inline]
    pub fn has_waiting_requests(&self) -> bool {
        match self {
            Buffer::Classic(buffer) => buffer.ready_stack().load(Ordering::Relaxed) != 0,
            Buffer::PhaseBit { buffer, .. } => has_pending(buffer),
            // Only the callback can look: always worth a visit.
            Buffer::Poll(_) => true,
        }
    }

    /// What a look from outside a visit can tell (the lost-ring watch):
    /// whether requests wait, or None where only a visit can tell (a poll,
    /// whose device code rings for every request).
    #[inline]
    pub fn seen_waiting(&self) -> Option<bool> {
        match self {
            Buffer::Poll(_) => None,
            _ => Some(self.has_waiting_requests()),
        }
    }
}

impl VisitStats {
    /// Classic: the tagged pointer with an out-of-range index that ended the chain.
    pub fn bad_pointer(&self) -> Option<u64> {
        match self.findings {
            Findings::Classic { stats, .. } => stats.bad_pointer,
            _ => None,
        }
    }

    /// Classic: the chain was cut (a cycle or corruption).
    pub fn cycle(&self) -> bool {
        matches!(self.findings, Findings::Classic { stats, .. } if stats.cycle)
    }

    /// Phase-bit: packets whose device phase was neither 0 nor 1.
    pub fn odd_phases(&self) -> u32 {
        match self.findings {
            Findings::PhaseBit { odd_phases } => odd_phases,
            _ => 0,
        }
    }

    /// Hands `report` one line for each thing the visit found wrong in
    /// buffer `key` (the listener logs them as errors; this crate logs nothing).
    pub fn report_findings(&self, key: usize, mut report: impl FnMut(core::fmt::Arguments<'_>)) {
        match self.findings {
            Findings::None => {}
            Findings::Classic { stats, index_mask, packets } => {
                if let Some(ptr) = stats.bad_pointer {
                    report(format_args!(
                        "hostcall: buffer {key:#x}: ready stack holds tagged pointer {ptr:#x} whose index {} is \
                         not below the packet count {packets}; it and the packets behind it are dropped, never \
                         touched",
                        ptr & index_mask,
                    ));
                }
                if stats.cycle {
                    report(format_args!(
                        "hostcall: buffer {key:#x}: ready stack chain reaches a packet without READY or is longer \
                         than its {packets} packets (a cycle or corruption); walk stopped, each packet served at \
                         most once",
                    ));
                }
            }
            Findings::PhaseBit { odd_phases } => {
                if odd_phases > 0 {
                    report(format_args!(
                        "hostcall: buffer {key:#x}: {odd_phases} packet(s) had a device phase other than 0 or 1 \
                         (corruption); served once and settled",
                    ));
                }
            }
            Findings::PollFailed { outcome } => report(format_args!(
                "hostcall: the poll registered for key {key:#x} returned {outcome} (failed); taken as nothing \
                 served (logged once)",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use core::ptr::NonNull;

    use super::*;
    use crate::protocol::classic::serve::device as classic_device;
    use crate::protocol::phase_bit::serve::device as phase_device;

    fn answer(service: u32, _lane: u32, slot: &mut [u64; 8]) {
        slot[0] += 100;
        slot[1] = u64::from(service);
    }

    /// A buffer of `packets` packets in host memory; the Vec outlives the view.
    fn buffer(protocol: Protocol, packets: u32, occupied: usize) -> (Vec<u64>, Buffer) {
        let mut memory = vec![0u64; protocol.buffer_size(packets) / 8];
        let base = NonNull::new(memory.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: 8-aligned, large enough; the caller keeps the Vec alive.
        let buffer = unsafe { Buffer::initialize(protocol, base, packets, 0, occupied) };
        (memory, buffer)
    }

    #[test]
    fn a_classic_visit_peeks_first_unless_work_is_expected() {
        let (_memory, visited) = buffer(Protocol::Classic, 4, 0);
        let Buffer::Classic(classic) = &visited else { unreachable!() };
        let mut begun = 0;
        assert_eq!(visited.visit(false, || begun += 1, ByLane(answer), || true), None, "empty: peek says no");
        assert_eq!(begun, 0);
        let expected = visited.visit(true, || begun += 1, ByLane(answer), || true).expect("no peek");
        assert_eq!((expected.served, begun), (0, 1), "expected work that is not there");
        let ptr = classic_device::pop_free(classic).unwrap();
        classic_device::fill(classic, ptr, 7, 0b11, &[[1u64; 8]; 64]);
        classic_device::push_ready(classic, ptr);
        assert!(visited.has_waiting_requests());
        let stats = visited.visit(false, || begun += 1, ByLane(answer), || true).expect("work");
        assert_eq!(
            (stats.served, stats.stopped, stats.bad_pointer(), stats.cycle()),
            (1, false, None, false)
        );
        assert_eq!(begun, 2);
        assert!(classic_device::is_served(classic, ptr));
        assert_eq!(classic_device::read_answer(classic, ptr, 1)[..2], [101, 7]);
        assert!(!visited.has_waiting_requests());
    }

    #[test]
    fn a_classic_visit_counts_a_dropped_bad_pointer_as_work() {
        let (_memory, visited) = buffer(Protocol::Classic, 5, 0);
        let Buffer::Classic(classic) = &visited else { unreachable!() };
        classic.ready_stack().store(6 + 8 * 2, Ordering::Relaxed);
        let stats = visited.visit(false, || {}, ByLane(answer), || true).expect("work");
        assert_eq!((stats.served, stats.bad_pointer()), (1, Some(6 + 8 * 2)));
        let mut lines = Vec::new();
        stats.report_findings(0x1000, |line| lines.push(line.to_string()));
        assert_eq!(lines.len(), 1);
        assert!(lines[0]
            .starts_with("hostcall: buffer 0x1000: ready stack holds tagged pointer 0x16 whose index 6"));
    }

    #[test]
    fn a_phase_bit_visit_has_no_peek_and_keeps_its_scan_state() {
        let occupied = [crate::sync::AtomicU32::new(0)];
        let (_memory, visited) = buffer(Protocol::PhaseBit, 4, occupied.as_ptr() as usize);
        let Buffer::PhaseBit { buffer: phase, scan } = &visited else { unreachable!() };
        let mut begun = 0;
        let empty = visited.visit(false, || begun += 1, ByLane(answer), || true).expect("no peek");
        assert_eq!((empty.served, begun), (0, 0), "nothing pending: the visit never began");
        let index = phase_device::claim(phase, &occupied).unwrap();
        phase_device::fill(phase, index, 9, 1, &[[2u64; 8]; 64]);
        phase_device::publish(phase, index);
        assert!(visited.has_waiting_requests());
        let stats = visited.visit(false, || begun += 1, ByLane(answer), || true).unwrap();
        assert_eq!((stats.served, stats.odd_phases(), stats.stopped, begun), (1, 0, false, 1));
        assert!(phase_device::is_answered(phase, index));
        assert_eq!(scan.get().limit, index.get() + 1, "the scan narrows to the busy packet");
    }

    #[test]
    fn the_protocols_ring_property_and_prefetch() {
        let (_m1, classic) = buffer(Protocol::Classic, 2, 0);
        let occupied = [0u32; 1];
        let (_m2, phase) = buffer(Protocol::PhaseBit, 2, occupied.as_ptr() as usize);
        assert_eq!(classic.unrung_post_window_ns(), 0, "every classic post rings");
        assert_eq!(phase.unrung_post_window_ns(), 10_000, "1000 ticks of the device's 100 MHz counter");
        classic.prefetch();
        phase.prefetch();
        assert_eq!(
            (classic.size(), phase.size()),
            (Protocol::Classic.buffer_size(2), Protocol::PhaseBit.buffer_size(2))
        );
    }

    unsafe extern "C-unwind" fn served_once(
        user: *mut core::ffi::c_void,
        _key: *mut core::ffi::c_void,
    ) -> i32 {
        // SAFETY: the test passes a live AtomicU32 counting the calls.
        let calls = unsafe { &*(user as *const core::sync::atomic::AtomicU32) };
        i32::from(calls.fetch_add(1, core::sync::atomic::Ordering::Relaxed) == 0)
    }

    #[test]
    fn a_poll_visit_calls_the_callback_without_a_peek() {
        let calls = core::sync::atomic::AtomicU32::new(0);
        let channel =
            crate::protocol::poll::PollChannel::new(0x9000, served_once, &calls as *const _ as usize);
        let visited = Buffer::Poll(channel);
        assert!(visited.is_poll() && visited.protocol().is_none());
        assert!(visited.has_waiting_requests(), "a poll cannot be peeked at");
        assert_eq!((visited.size(), visited.unrung_post_window_ns()), (1, 0));
        let mut begun = 0;
        let first = visited.visit(false, || begun += 1, ByLane(answer), || true).expect("no peek");
        assert_eq!((first.served, first.stopped, begun), (1, false, 1), "served something");
        let second = visited.visit(true, || begun += 1, ByLane(answer), || true).expect("no peek");
        assert_eq!((second.served, begun), (0, 2), "nothing more");
        assert_eq!(calls.load(core::sync::atomic::Ordering::Relaxed), 2);
        visited.prefetch();
        let mut lines = 0;
        second.report_findings(0x9000, |_| lines += 1);
        assert_eq!(lines, 0, "nothing went wrong");
    }

    unsafe extern "C-unwind" fn failing(_user: *mut core::ffi::c_void, _key: *mut core::ffi::c_void) -> i32 {
        -5
    }

    #[test]
    fn a_failed_poll_is_reported_once() {
        let visited = Buffer::Poll(crate::protocol::poll::PollChannel::new(0x9100, failing, 0));
        let mut lines = Vec::new();
        for _ in 0..2 {
            let stats = visited.visit(false, || {}, ByLane(answer), || true).expect("no peek");
            assert_eq!(stats.served, 0, "a failure serves nothing");
            stats.report_findings(0x9100, |line| lines.push(line.to_string()));
        }
        assert_eq!(
            lines,
            ["hostcall: the poll registered for key 0x9100 returned -5 (failed); taken as nothing served (logged once)"]
        );
    }

    #[test]
    fn the_occupancy_rule() {
        let p = Protocol::PhaseBit;
        let buffer = 0x1000..0x2000;
        assert!(p.accepts_occupancy(0x4000, 64, buffer.clone()));
        assert!(!p.accepts_occupancy(0, 64, buffer.clone()), "NULL");
        assert!(!p.accepts_occupancy(0x4002, 64, buffer.clone()), "not 4-aligned");
        assert!(!p.accepts_occupancy(0x1800, 64, buffer.clone()), "inside the buffer");
        assert!(!p.accepts_occupancy(0xFFC, 64, buffer.clone()), "overlapping its start");
        assert!(p.accepts_occupancy(0xFF8, 64, buffer.clone()), "just before it");
        assert!(!p.accepts_occupancy(usize::MAX - 3, 64, buffer.clone()), "wrapping");
        assert!(Protocol::Classic.accepts_occupancy(0, 2, buffer.clone()));
        assert!(!Protocol::Classic.accepts_occupancy(0x4000, 2, buffer));
        assert_eq!(p.occupancy_size(33), 8);
        assert_eq!(Protocol::Classic.occupancy_size(33), 0);
    }
}
