//! The host side of the phase-bit hostcall protocol (layout and device steps
//! in `phase_bit/layout.rs`), written against the `sync` shim so
//! `tests/loom_phase.rs` model-checks exactly this code.
//!
//! # Host (`serve_phases`)
//!
//! Look at packets `[0, limit)`; a packet whose device phase differs from its
//! host phase holds a request: read its header and the active lanes' words,
//! run the service, write the words back, and make the phases equal again.
//! The phases are peeked `PEEK_CHUNK` packets at a time in a loop that only
//! loads and compares (its loads do not wait on each other, and no service
//! state is live across them), then that chunk's requests are served; a
//! request posted into a chunk already peeked is found by the next visit.
//! `limit` narrows to one past the highest packet that held a request, so a
//! busy buffer with few waves costs few reads per visit; it widens to the
//! whole buffer when a narrowed visit finds nothing.
//!
//! Differences from the ROCm runtime, which keeps the narrowed limit until a
//! visit finds nothing below it: waves claim the lowest free packet, but one
//! that found the low packets taken claims a higher one, and as long as the
//! low packets keep receiving requests it would wait unserved. We therefore
//! scan the whole buffer at least every `FULL_SCAN_EVERY` visits, and a
//! narrowed visit that finds nothing scans the rest at once.
//!
//! The host hands a packet back by storing the device phase it observed into
//! the host phase. For a well-formed packet (phases 0/1) that is the flip the
//! device waits for; a device phase corrupted to another value is served
//! once and settled, instead of looking pending forever.
//!
//! # Memory ordering
//!
//! * The scan peeks at the phases with relaxed loads; once they differ the
//!   device phase is loaded again with acquire, which pairs with the wave's
//!   release store of it, so the header and payload written before it (plain
//!   stores) are visible.
//! * The host phase is stored with release: the answer words are visible to
//!   the wave whose acquire load sees the phases equal, and every host access
//!   to the packet happens before the wave reuses it.
//! * The occupancy bitmap belongs to the device (waves claiming packets); the
//!   host never reads it, so a bit set with no request costs nothing.
//! * The doorbell is a throttled hint (a wave may not ring at all when another
//!   rang less than ~10 µs before), so the listener keeps polling until the
//!   doorbell has been still for twice that (amdgpu-dropin's
//!   `listener::pacing`), and its rescan on timeout, not the ring, guarantees
//!   progress.

use super::buffer::{PhaseBuffer, PhaseIndex};
use crate::protocol::pending::Pending;
use crate::sync::{AtomicU32, Ordering};

/// A narrowed scan is widened to the whole buffer at least this often, so a
/// request in a high packet waits at most this many visits behind busy low
/// packets.
pub const FULL_SCAN_EVERY: u32 = 64;

/// Per-buffer scan state, private to the host. Only the thread that holds the
/// buffer's gate uses it (the gate orders successive holders).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanLimit {
    /// Packets `[0, limit)` are looked at by a narrowed visit.
    pub limit: u32,
    /// Narrowed visits since the last full one.
    pub narrowed_visits: u32,
}

impl ScanLimit {
    pub fn full(packets: u32) -> ScanLimit {
        ScanLimit { limit: packets, narrowed_visits: 0 }
    }
}

/// A phase-bit buffer's `ScanLimit`, used only by the thread inside the
/// buffer's gate: relaxed accesses suffice, the gate's release/acquire orders
/// one holder's store before the next holder's load.
pub struct ScanCell {
    limit: AtomicU32,
    narrowed_visits: AtomicU32,
}

impl ScanCell {
    pub fn new(packets: u32) -> ScanCell {
        let full = ScanLimit::full(packets);
        ScanCell { limit: AtomicU32::new(full.limit), narrowed_visits: AtomicU32::new(full.narrowed_visits) }
    }

    #[inline]
    pub fn get(&self) -> ScanLimit {
        // Relaxed: see the type's docs.
        ScanLimit {
            limit: self.limit.load(Ordering::Relaxed),
            narrowed_visits: self.narrowed_visits.load(Ordering::Relaxed),
        }
    }

    #[inline]
    pub fn set(&self, scan: ScanLimit) {
        // Relaxed: see the type's docs.
        self.limit.store(scan.limit, Ordering::Relaxed);
        self.narrowed_visits.store(scan.narrowed_visits, Ordering::Relaxed);
    }
}

/// What one `serve_phases` call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseStats {
    /// Packets served and handed back.
    pub served: u32,
    /// Packets seen whose device phase was neither 0 nor 1 (corruption);
    /// served and settled like the others.
    pub odd_phases: u32,
    /// The visit stopped early because `keep_going` said so.
    pub stopped: bool,
}

/// Serves every pending packet of `buffer` that this visit looks at (see the
/// module docs for which), updating `scan`. `serve` gets a host copy of the
/// packet and leaves the answers in it; `keep_going()` is asked between
/// served packets.
pub fn serve_phases<S, K>(
    buffer: &PhaseBuffer,
    scan: &mut ScanLimit,
    mut serve: S,
    mut keep_going: K,
) -> PhaseStats
where
    S: FnMut(&mut PendingPhasePacket<'_>),
    K: FnMut() -> bool,
{
    let packets = buffer.packets();
    let mut stats = PhaseStats::default();
    let narrowed = scan.limit < packets && scan.narrowed_visits < FULL_SCAN_EVERY;
    let first_end = if narrowed { scan.limit } else { packets };
    let mut highest = serve_range(buffer, 0, first_end, &mut serve, &mut keep_going, &mut stats);
    if narrowed && stats.served == 0 && !stats.stopped {
        highest = serve_range(buffer, first_end, packets, &mut serve, &mut keep_going, &mut stats);
    }
    *scan = match highest {
        Some(top) if narrowed && stats.served > 0 && top < first_end => {
            ScanLimit { limit: top + 1, narrowed_visits: scan.narrowed_visits + 1 }
        }
        Some(top) => ScanLimit { limit: top + 1, narrowed_visits: 0 },
        None => ScanLimit::full(packets),
    };
    stats
}

/// Packets looked at by one pass of the peek loop in `serve_range`: the
/// phases of a chunk are peeked in a tight loop first (loads and compares
/// only), then its pending packets are served.
const PEEK_CHUNK: u32 = 64;

/// Serves the pending packets in `[start, end)`; returns the highest one served.
fn serve_range<S, K>(
    buffer: &PhaseBuffer,
    start: u32,
    end: u32,
    serve: &mut S,
    keep_going: &mut K,
    stats: &mut PhaseStats,
) -> Option<u32>
where
    S: FnMut(&mut PendingPhasePacket<'_>),
    K: FnMut() -> bool,
{
    let end = end.min(buffer.packets());
    let mut highest = None;
    let mut chunk_start = start;
    while chunk_start < end {
        let chunk_end = end.min(chunk_start.saturating_add(PEEK_CHUNK));
        let mut pending = 0u64;
        for i in chunk_start..chunk_end {
            let Some(index) = buffer.index(i) else { break };
            if phases_differ(buffer, index) {
                pending |= 1 << (i - chunk_start);
            }
        }
        while pending != 0 {
            let i = chunk_start + pending.trailing_zeros();
            pending &= pending - 1;
            let Some(index) = buffer.index(i) else { break };
            if stats.served > 0 && !keep_going() {
                stats.stopped = true;
                return highest;
            }
            // Acquire: pairs with the wave's release store of its device phase
            // (see "Memory ordering"). A second load rather than a fence after the
            // relaxed peek: the same ordering, paid only for a busy packet, and
            // one ThreadSanitizer can see (it does not model fences).
            let device = buffer.device_phase(index).load(Ordering::Acquire);
            serve_packet(buffer, index, device, serve);
            stats.served += 1;
            if device > 1 {
                stats.odd_phases += 1;
            }
            highest = Some(i);
        }
        chunk_start = chunk_end;
    }
    highest
}

/// A pending phase-bit packet, as the services see it (`Packet`): its header,
/// and its lanes in device memory one by one or as a whole-packet host copy.
pub type PendingPhasePacket<'a> = Pending<'a, PhaseBuffer>;

/// Serves one pending packet and hands it back (host phase := `device`).
fn serve_packet<S>(buffer: &PhaseBuffer, index: PhaseIndex, device: u32, serve: &mut S)
where
    S: FnMut(&mut PendingPhasePacket<'_>),
{
    let (activemask, service) = buffer.read_header(index);
    serve(&mut Pending::new(buffer, index, service, activemask));
    // Release: publishes the answers to the wave's acquire load of the host
    // phase, and orders every access above before the wave reuses the packet.
    buffer.host_phase(index).store(device, Ordering::Release);
}

/// Whether packet `index` holds a request not yet served (its phases
/// differ). Relaxed: a peek; serving loads the device phase again with acquire.
#[inline]
fn phases_differ(buffer: &PhaseBuffer, index: PhaseIndex) -> bool {
    buffer.device_phase(index).load(Ordering::Relaxed) != buffer.host_phase(index).load(Ordering::Relaxed)
}

/// Whether any packet holds a request not yet served.
#[inline]
pub fn has_pending(buffer: &PhaseBuffer) -> bool {
    (0..buffer.packets()).filter_map(|i| buffer.index(i)).any(|i| phases_differ(buffer, i))
}

/// Packets holding a request not yet served.
#[cfg(all(test, not(loom)))]
fn pending(buffer: &PhaseBuffer) -> u32 {
    (0..buffer.packets()).filter_map(|i| buffer.index(i)).filter(|&i| phases_differ(buffer, i)).count() as u32
}

/// The device side of the phase-bit protocol, for the unit tests and the loom
/// model (the C device simulator has its own, independent copy).
#[cfg(any(test, loom, feature = "device-model"))]
pub mod device {
    use super::*;
    use crate::sync::AtomicU32;

    /// Claims a free packet: sets its occupancy bit (acquire fetch_or; the
    /// device library's relaxed one is a hazard, see
    /// docs/phase-bit-device-ordering.md) and keeps it if the phases are
    /// equal, else gives the bit back and tries the next packet. One pass
    /// over the packets; None if every packet was taken.
    pub fn claim(buffer: &PhaseBuffer, occupied: &[AtomicU32]) -> Option<PhaseIndex> {
        for i in 0..buffer.packets() {
            let (word, bit) = ((i / 32) as usize, 1u32 << (i % 32));
            // Acquire: pairs with the previous owner's release in `release`,
            // so its accesses to the packet (its answer loads) happen before
            // our request stores. The device library uses relaxed here and in
            // its clear, which loses answers on a GPU
            // (tests/loom_phase_device.rs). The host never touches the bitmap.
            if occupied[word].fetch_or(bit, Ordering::Acquire) & bit != 0 {
                continue;
            }
            let index = buffer.index(i)?;
            // Relaxed: only waves write the device phase, and the bit makes
            // this wave its only writer now. The host phase is loaded with
            // acquire (the device library loads it relaxed and relies on the
            // hardware): our writes to the packet then follow the host's
            // last accesses, which its release store published.
            let device = buffer.device_phase(index).load(Ordering::Relaxed);
            let host = buffer.host_phase(index).load(Ordering::Acquire);
            if device != host {
                // Relaxed: giving the bit back, nothing written.
                occupied[word].fetch_and(!bit, Ordering::Relaxed);
                continue;
            }
            return Some(index);
        }
        None
    }

    /// Writes the request (plain stores on the device).
    pub fn fill(buffer: &PhaseBuffer, index: PhaseIndex, service: u32, activemask: u64, lanes: &[[u64; 8]]) {
        buffer.write_header(index, activemask, service);
        for (lane, words) in lanes.iter().enumerate() {
            if activemask & (1 << lane) != 0 {
                buffer.write_slot(index, lane as u32, words);
            }
        }
    }

    /// Flips the device phase (release: publishes the request).
    pub fn publish(buffer: &PhaseBuffer, index: PhaseIndex) {
        // Relaxed: only this wave writes its claimed packet's device phase.
        let device = buffer.device_phase(index).load(Ordering::Relaxed);
        buffer.device_phase(index).store(device ^ 1, Ordering::Release);
    }

    /// True once the host handed the packet back (acquire).
    pub fn is_answered(buffer: &PhaseBuffer, index: PhaseIndex) -> bool {
        // Relaxed: our own store.
        let device = buffer.device_phase(index).load(Ordering::Relaxed);
        buffer.host_phase(index).load(Ordering::Acquire) == device
    }

    /// Lane `lane`'s words after the answer.
    pub fn read_answer(buffer: &PhaseBuffer, index: PhaseIndex, lane: u32) -> [u64; 8] {
        buffer.read_slot(index, lane)
    }

    /// Clears the occupancy bit (release; see `claim`).
    pub fn release(occupied: &[AtomicU32], index: PhaseIndex) {
        let i = index.get();
        occupied[(i / 32) as usize].fetch_and(!(1u32 << (i % 32)), Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::protocol::packet::Packet;
    use crate::protocol::phase_bit::layout;
    use core::ptr::NonNull;
    use core::sync::atomic::AtomicU32;

    struct Fixture {
        _mem: Vec<u64>,
        buffer: PhaseBuffer,
        occupied: Vec<AtomicU32>,
    }

    fn fixture(n: u32) -> Fixture {
        let mut mem = vec![0u64; layout::buffer_size(n) / 8];
        let base = NonNull::new(mem.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `mem` is 8-aligned, buffer_size(n) bytes and lives in the fixture with the view.
        let buffer = unsafe { PhaseBuffer::new(base, n) };
        let occupied: Vec<AtomicU32> = (0..layout::occupancy_words(n)).map(|_| AtomicU32::new(0)).collect();
        buffer.initialize(1, occupied.as_ptr() as usize);
        Fixture { _mem: mem, buffer, occupied }
    }

    fn add_100(packet: &mut PendingPhasePacket<'_>) {
        packet.serve_lanes(|service, _, slot| {
            slot[0] += 100;
            slot[1] = u64::from(service);
        });
    }

    /// Posts one request with lane 0's slot[0] = `value`; returns its packet.
    fn post(f: &Fixture, value: u64) -> PhaseIndex {
        let index = device::claim(&f.buffer, &f.occupied).expect("a free packet");
        device::fill(&f.buffer, index, 7, 1, &[[value, 0, 0, 0, 0, 0, 0, 0]]);
        device::publish(&f.buffer, index);
        index
    }

    #[test]
    fn a_request_is_served_once_and_handed_back() {
        let f = fixture(4);
        let mut scan = ScanLimit::full(4);
        let index = post(&f, 5);
        assert!(!device::is_answered(&f.buffer, index));
        let stats = serve_phases(&f.buffer, &mut scan, add_100, || true);
        assert_eq!(stats.served, 1);
        assert!(device::is_answered(&f.buffer, index));
        assert_eq!(device::read_answer(&f.buffer, index, 0)[..2], [105, 7]);
        device::release(&f.occupied, index);
        // Nothing pending: a second visit serves nothing.
        assert_eq!(serve_phases(&f.buffer, &mut scan, add_100, || true).served, 0);
        // The same packet again (phases now both 1).
        let again = post(&f, 6);
        assert_eq!(again, index);
        assert_eq!(serve_phases(&f.buffer, &mut scan, add_100, || true).served, 1);
        assert_eq!(device::read_answer(&f.buffer, again, 0)[0], 106);
    }

    #[test]
    fn the_limit_narrows_to_the_highest_busy_packet_and_widens_when_idle() {
        let n = 40;
        let f = fixture(n);
        let mut scan = ScanLimit::full(n);
        let a = post(&f, 1);
        let b = post(&f, 2);
        assert_eq!((a.get(), b.get()), (0, 1));
        serve_phases(&f.buffer, &mut scan, add_100, || true);
        assert_eq!(scan, ScanLimit { limit: 2, narrowed_visits: 0 });
        // A request in packet 0 again: the narrowed visit finds it.
        device::release(&f.occupied, a);
        let a = post(&f, 3);
        serve_phases(&f.buffer, &mut scan, add_100, || true);
        assert_eq!(scan, ScanLimit { limit: 1, narrowed_visits: 1 });
        // A request above the limit while the low packets are idle: the
        // narrowed visit finds nothing and scans the rest at once.
        let high = f.buffer.index(30).unwrap();
        f.occupied[0].fetch_or(1 << 30, core::sync::atomic::Ordering::Relaxed);
        device::fill(&f.buffer, high, 7, 1, &[[9, 0, 0, 0, 0, 0, 0, 0]]);
        device::publish(&f.buffer, high);
        assert_eq!(serve_phases(&f.buffer, &mut scan, add_100, || true).served, 1);
        assert_eq!(device::read_answer(&f.buffer, high, 0)[0], 109);
        assert_eq!(scan, ScanLimit { limit: 31, narrowed_visits: 0 });
        // Idle: full width again.
        serve_phases(&f.buffer, &mut scan, add_100, || true);
        assert_eq!(scan, ScanLimit::full(n));
        let _ = a;
    }

    #[test]
    fn a_high_packet_behind_busy_low_packets_waits_at_most_full_scan_every_visits() {
        let n = 8;
        let f = fixture(n);
        let mut scan = ScanLimit { limit: 1, narrowed_visits: 0 };
        let high = f.buffer.index(7).unwrap();
        device::fill(&f.buffer, high, 7, 1, &[[1, 0, 0, 0, 0, 0, 0, 0]]);
        device::publish(&f.buffer, high);
        let low = f.buffer.index(0).unwrap();
        let mut visits = 0;
        while !device::is_answered(&f.buffer, high) {
            // Packet 0 has a fresh request on every visit.
            device::fill(&f.buffer, low, 7, 1, &[[1, 0, 0, 0, 0, 0, 0, 0]]);
            device::publish(&f.buffer, low);
            serve_phases(&f.buffer, &mut scan, add_100, || true);
            visits += 1;
            assert!(visits <= FULL_SCAN_EVERY + 1, "starved for {visits} visits");
        }
        assert_eq!(visits, FULL_SCAN_EVERY + 1);
    }

    #[test]
    fn one_visit_serves_every_peek_chunk() {
        let n = 2 * PEEK_CHUNK + 2;
        let f = fixture(n);
        let mut scan = ScanLimit::full(n);
        let wanted = [0, PEEK_CHUNK - 1, PEEK_CHUNK, 2 * PEEK_CHUNK + 1];
        for &i in &wanted {
            let index = f.buffer.index(i).unwrap();
            device::fill(&f.buffer, index, 7, 1, &[[u64::from(i), 0, 0, 0, 0, 0, 0, 0]]);
            device::publish(&f.buffer, index);
        }
        assert_eq!(serve_phases(&f.buffer, &mut scan, add_100, || true).served, wanted.len() as u32);
        for &i in &wanted {
            assert_eq!(device::read_answer(&f.buffer, f.buffer.index(i).unwrap(), 0)[0], u64::from(i) + 100);
        }
        assert_eq!(scan, ScanLimit { limit: 2 * PEEK_CHUNK + 2, narrowed_visits: 0 });
    }

    #[test]
    fn a_request_posted_into_a_peeked_chunk_waits_for_the_next_visit() {
        let f = fixture(4);
        let mut scan = ScanLimit::full(4);
        post(&f, 1);
        let late = f.buffer.index(3).unwrap();
        let mut served = Vec::new();
        let stats = serve_phases(
            &f.buffer,
            &mut scan,
            |packet| {
                served.push(packet.service());
                add_100(packet);
                // Posted while the chunk's pending packets are served: its
                // phases were peeked already.
                if served.len() == 1 {
                    device::fill(&f.buffer, late, 9, 1, &[[2, 0, 0, 0, 0, 0, 0, 0]]);
                    device::publish(&f.buffer, late);
                }
            },
            || true,
        );
        assert_eq!(stats.served, 1);
        assert_eq!(pending(&f.buffer), 1);
        assert_eq!(serve_phases(&f.buffer, &mut scan, add_100, || true).served, 1);
        assert_eq!(device::read_answer(&f.buffer, late, 0)[..2], [102, 9]);
    }

    #[test]
    fn a_corrupted_device_phase_is_served_once_and_settled() {
        let f = fixture(2);
        let mut scan = ScanLimit::full(2);
        let index = f.buffer.index(1).unwrap();
        f.buffer.device_phase(index).store(6, core::sync::atomic::Ordering::Relaxed);
        let stats = serve_phases(&f.buffer, &mut scan, add_100, || true);
        assert_eq!((stats.served, stats.odd_phases), (1, 1));
        assert_eq!(serve_phases(&f.buffer, &mut scan, add_100, || true).served, 0);
        assert_eq!(pending(&f.buffer), 0);
    }

    #[test]
    fn a_device_phase_flipped_twice_is_not_a_request() {
        let f = fixture(2);
        let mut scan = ScanLimit::full(2);
        let index = device::claim(&f.buffer, &f.occupied).unwrap();
        device::fill(&f.buffer, index, 7, 1, &[[1, 0, 0, 0, 0, 0, 0, 0]]);
        device::publish(&f.buffer, index);
        device::publish(&f.buffer, index);
        assert_eq!(serve_phases(&f.buffer, &mut scan, add_100, || true).served, 0);
        assert_eq!(device::read_answer(&f.buffer, index, 0)[0], 1, "payload untouched");
    }

    #[test]
    fn claim_skips_taken_bits_and_packets_the_host_still_owns() {
        let f = fixture(3);
        // Packet 0's bit set with no request (a bit without a packet).
        f.occupied[0].fetch_or(1, core::sync::atomic::Ordering::Relaxed);
        // Packet 1 still pending with the host (phases differ, bit clear).
        let one = f.buffer.index(1).unwrap();
        device::publish(&f.buffer, one);
        let got = device::claim(&f.buffer, &f.occupied).unwrap();
        assert_eq!(got.get(), 2);
        assert_eq!(f.occupied[0].load(core::sync::atomic::Ordering::Relaxed), 0b101);
        assert!(device::claim(&f.buffer, &f.occupied).is_none());
    }

    #[test]
    fn keep_going_stops_between_packets() {
        let f = fixture(4);
        let mut scan = ScanLimit::full(4);
        for v in 0..3 {
            post(&f, v);
        }
        let stats = serve_phases(&f.buffer, &mut scan, add_100, || false);
        assert_eq!(stats.served, 1);
        assert!(stats.stopped);
        assert_eq!(pending(&f.buffer), 2);
    }
}
