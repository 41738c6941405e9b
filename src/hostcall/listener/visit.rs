//! One scan of a listener thread's buffers and the visit of one buffer:
//! which buffers are this thread's, entering the gate, the visit itself
//! (`protocol::Buffer::visit`), and what the visit tells the classifier.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::classifier::{HelperWatch, Role, Transition, SLOW_DEMOTE_AFTER, SLOW_STREAK};
use super::clock::Clock;
use super::shared::{Entry, Listener};
use crate::hostcall::counters::BufferCounters;
use crate::hostcall::process::{EXITING, SERVING};
use crate::hostcall::protocol::packet::Packet;
use crate::hostcall::protocol::PacketServer;
use crate::hostcall::services::Services;
use crate::hostcall::test_hooks::TestHooks;
use crate::log::Level;
use hostcall_core::gate::Gate;
use hostcall_core::helper_bell::HelperBell;

/// What a scan uses of its listener.
#[derive(Clone, Copy)]
pub(super) struct Crew<'a> {
    /// The helper's current visit (preemption fallback).
    pub watch: &'a HelperWatch,
    /// Where the helper sleeps; the main listener rings it.
    pub bell: &'a HelperBell,
    pub services: &'a Services,
    pub hooks: &'a TestHooks,
}

impl<'a> Crew<'a> {
    pub fn of(listener: &'a Listener) -> Crew<'a> {
        Crew {
            watch: &listener.helper_watch,
            bell: &listener.helper_bell,
            services: &listener.services,
            hooks: &listener.hooks,
        }
    }
}

/// Marks this thread as inside the gate (`serving_on_this_thread`) and
/// leaves the gate when dropped (also on unwind).
struct Inside<'a>(&'a Gate);

impl<'a> Inside<'a> {
    /// After a successful `gate.enter()`.
    fn new(gate: &'a Gate) -> Inside<'a> {
        let _ = SERVING.try_with(|c| c.set(gate as *const Gate as usize));
        Inside(gate)
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let _ = SERVING.try_with(|c| c.set(0));
        self.0.leave();
    }
}

/// What one scan found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ScanResult {
    /// When (clock ns) the last visit that found work ended; None: no work.
    pub worked_at: Option<u64>,
    /// Packets served (over all buffers).
    pub served: u32,
    /// The main listener just moved a buffer to the helper: the helper is needed.
    pub found_slow: bool,
}

/// What one scan is asked to do.
#[derive(Clone, Copy, Debug)]
pub(super) struct ScanAsk {
    /// Whose buffers the scan serves.
    pub role: Role,
    /// The main listener may move buffers to the helper (one runs or can be
    /// started).
    pub may_hand_off: bool,
    /// The doorbell moved since the last scan (then the only buffer of a
    /// snapshot of one is visited without a peek first).
    pub rung: bool,
    /// No ring announced what this scan finds (it follows a wait that timed
    /// out or that the lost-ring watch ended): counted as lost rings.
    pub unannounced: bool,
    /// The caller's latest clock reading, if it has a recent one: a visit
    /// that finds work starts at the latest reading (a clock read costs more
    /// than the gate and the peek between; the classifier's limits are
    /// hundreds of µs).
    pub last_now: Option<u64>,
}

/// Serves the buffers of `ask.role` once.
pub(super) fn scan(crew: Crew<'_>, snapshot: &[Arc<Entry>], ask: ScanAsk, clock: &impl Clock) -> ScanResult {
    let ScanAsk { role, may_hand_off, rung, unannounced, mut last_now } = ask;
    let expect_work = rung && snapshot.len() == 1;
    // A hand-off protects the other buffers from a slow one: with no other
    // buffer there is nothing to protect, and the helper would only add a
    // thread beside the main listener (issue 27 item 6).
    let may_hand_off = may_hand_off && snapshot.len() > 1;
    if rung && snapshot.len() > 1 {
        // Some buffer has work: ask for every buffer's first line at once, so
        // the transfers overlap instead of one per visit in turn.
        for entry in snapshot {
            entry.buffer.prefetch();
        }
    }
    let mut result = ScanResult::default();
    // Main listener: is the helper stuck in a visit? Computed on first need.
    let mut helper_stuck: Option<bool> = None;
    for entry in snapshot {
        let mine = entry
            .class
            .visited_by(role, || *helper_stuck.get_or_insert_with(|| crew.watch.stuck(clock.now())));
        if !mine && role == Role::Main && snapshot.len() == 1 {
            // The only buffer left is on the helper: it protects nothing
            // there any more, so the main listener takes it back.
            entry.class.reset();
            crate::log!(
                Level::Info,
                "hostcall: buffer {:#x} is the only one left; back to the main listener",
                entry.key
            );
        } else if !mine {
            // A buffer on the helper, which sleeps on its own bell: ring it
            // when the buffer has work (the doorbell only wakes this thread).
            if role == Role::Main && has_work_for_helper(entry) {
                crew.bell.ring();
            }
            continue;
        }
        // The main listener serving a buffer of the helper's: only while the
        // helper is stuck in a visit, checked again inside the gate.
        let plan = VisitPlan {
            expect_work,
            start_hint: last_now,
            fallback: role == Role::Main && entry.class.on_helper(),
        };
        let Some(Visit { served, start, first_done }) = visit_entry(crew, entry, role, clock, plan) else {
            continue;
        };
        if unannounced {
            entry.counters.lost_ring();
        }
        // A visit of one packet ended when that packet was served.
        let now = match first_done {
            Some(done) if served == 1 => done,
            _ => clock.now(),
        };
        last_now = Some(now);
        result.worked_at = Some(now);
        result.served += served;
        let took = now.saturating_sub(start);
        match entry.class.record_visit(role, may_hand_off, served, took, now) {
            Transition::ToHelper => {
                result.found_slow = true;
                entry.counters.handed_off();
                crate::log!(
                    Level::Info,
                    "hostcall: buffer {:#x}: {} slow visits in a row (last: {} packet(s) in {} µs); \
                     the helper thread serves it from now on",
                    entry.key,
                    SLOW_STREAK,
                    served,
                    took / 1000
                );
            }
            Transition::BackToMain => crate::log!(
                Level::Info,
                "hostcall: buffer {:#x} has been fast for {:?}; back to the main listener",
                entry.key,
                SLOW_DEMOTE_AFTER
            ),
            Transition::None | Transition::StreakGrew(_) | Transition::StreakReset => {}
        }
    }
    result
}

/// The main listener's look at a buffer on the helper: does it hold work?
/// Inside the gate (the buffer may be being freed otherwise); false when the
/// gate is closed or the helper is inside (then it is awake anyway).
fn has_work_for_helper(entry: &Entry) -> bool {
    if !entry.gate.enter() {
        return false;
    }
    let work = entry.buffer.has_waiting_requests();
    entry.gate.leave();
    work
}

/// A visit of one buffer that found work.
struct Visit {
    /// Packets served (a dropped bad pointer counts as 1).
    served: u32,
    /// When the visit began (clock ns).
    start: u64,
    /// When its first packet had been served (clock ns); None if none was.
    first_done: Option<u64>,
}

/// The services, counting for the buffer visited: every packet (service,
/// active lanes), and the time of the first packet of the visit, as the
/// counters' longest service call (one clock read per visit, none more per
/// packet). That packet's time is read once its answer is out: when the
/// next packet is about to be served, or after the visit (`first_served`),
/// so the clock read never delays an answer the wave is waiting for.
struct Counting<'a, C: Clock> {
    services: &'a Services,
    counters: &'a BufferCounters,
    clock: &'a C,
    /// When the visit began (set by the visit's `begin`).
    start: &'a core::cell::Cell<u64>,
    /// Packets this visit has handed to the services so far.
    packets: &'a core::cell::Cell<u32>,
    first_done: &'a core::cell::Cell<Option<u64>>,
}

// Copies share every cell: `visit_entry` keeps one to finish the timing.
impl<C: Clock> Clone for Counting<'_, C> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<C: Clock> Copy for Counting<'_, C> {}

impl<C: Clock> Counting<'_, C> {
    /// The first packet's answer is out (at `done`): its service call is over.
    fn first_served(&self, done: u64) {
        self.first_done.set(Some(done));
        self.counters.service_took(done.saturating_sub(self.start.get()));
    }
}

impl<C: Clock> PacketServer for Counting<'_, C> {
    fn serve<P: Packet>(&mut self, packet: &mut P) {
        let packets = self.packets.get();
        if packets == 1 {
            self.first_served(self.clock.now());
        }
        self.packets.set(packets.saturating_add(1));
        self.counters.packet_served(packet.service(), packet.active_lane_count());
        let mut services = self.services;
        services.serve(packet);
    }
}

/// How `scan` asks `visit_entry` to visit a buffer.
#[derive(Clone, Copy)]
struct VisitPlan {
    /// Serve without peeking first.
    expect_work: bool,
    /// When the visit starts, if the caller read the clock just before.
    start_hint: Option<u64>,
    /// The main listener visits a buffer of the helper's because the helper
    /// seemed stuck; inside the gate that is checked again, since the helper
    /// may have finished its visit meanwhile (the main listener may have lost
    /// its CPU in between), and the next request, maybe the slow one, is the
    /// helper's to serve.
    fallback: bool,
}

/// Serves one buffer (if its gate lets us in and it holds work), as `plan` says.
fn visit_entry(
    crew: Crew<'_>,
    entry: &Entry,
    role: Role,
    clock: &impl Clock,
    plan: VisitPlan,
) -> Option<Visit> {
    if plan.fallback {
        crew.hooks.before_fallback_gate();
    }
    // No peek at the buffer before entering the gate: once disable has
    // closed the gate and seen it idle, the buffer may already be freed
    // although this snapshot still lists it.
    if !entry.gate.enter() {
        return None;
    }
    let _inside = Inside::new(&entry.gate);
    // The helper leaves its visit before it leaves the gate, so while this
    // thread holds the gate the helper is not inside this buffer: if it is
    // stuck, it is stuck in another one.
    if plan.fallback && !crew.watch.stuck(clock.now()) {
        return None;
    }
    let start = core::cell::Cell::new(0);
    let begin = || {
        start.set(plan.start_hint.unwrap_or_else(|| clock.now()));
        if role == Role::Helper {
            crew.watch.visit_begins(start.get());
        }
    };
    // Relaxed: a hint; the exit hook waits for the thread to leave.
    let keep_going = || !entry.gate.is_closed() && !EXITING.load(Ordering::Relaxed);
    let (packets, first_done) = (core::cell::Cell::new(0), core::cell::Cell::new(None));
    let server = Counting {
        services: crew.services,
        counters: &entry.counters,
        clock,
        start: &start,
        packets: &packets,
        first_done: &first_done,
    };
    let stats = entry.buffer.visit(plan.expect_work, begin, server, keep_going)?;
    if packets.get() == 1 {
        server.first_served(clock.now());
    }
    let first_done = first_done.get();
    let start = start.get();
    stats.report_findings(entry.key, |line| crate::log!(Level::Error, "{line}"));
    if stats.stopped {
        crate::log!(
            Level::Warning,
            "hostcall: buffer {:#x} is being disabled (or the process is exiting) while packets of \
             it were still waiting; they are abandoned and their waves get no answer",
            entry.key
        );
    }
    if role == Role::Helper {
        crew.watch.visit_ends();
    }
    (stats.served > 0).then_some(Visit { served: stats.served, start, first_done })
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;
    use core::ptr::NonNull;

    use super::*;
    use crate::hostcall::listener::clock::Nanos;
    use crate::hostcall::protocol::classic::serve::device;
    use crate::hostcall::protocol::{Buffer, Protocol};

    const MS: Nanos = 1_000_000;

    struct FakeClock(Cell<Nanos>);

    impl Clock for FakeClock {
        fn now(&self) -> Nanos {
            self.0.get()
        }
    }

    /// A classic buffer of `packets` packets in host memory, registered as an entry.
    struct TestEntry {
        _memory: Vec<u64>,
        entry: Arc<Entry>,
    }

    fn classic_entry(packets: u32) -> TestEntry {
        let mut memory = vec![0u64; Protocol::Classic.buffer_size(packets) / 8];
        let base = NonNull::new(memory.as_mut_ptr().cast::<u8>()).unwrap();
        // SAFETY: `memory` is 8-aligned, large enough and outlives the entry
        // (both in TestEntry; the Vec's heap block does not move).
        let buffer = unsafe { Buffer::initialize(Protocol::Classic, base, packets, 0, 0) };
        TestEntry {
            entry: Arc::new(Entry::new(base.as_ptr() as usize, buffer, 0, Default::default())),
            _memory: memory,
        }
    }

    fn classic(entry: &Entry) -> &crate::hostcall::protocol::classic::buffer::DeviceBuffer {
        match &entry.buffer {
            Buffer::Classic(buffer) => buffer,
            Buffer::PhaseBit { .. } | Buffer::Poll(_) => unreachable!("a classic entry"),
        }
    }

    /// Posts one one-lane request; returns its tagged pointer.
    fn post(entry: &Entry) -> u64 {
        let buffer = classic(entry);
        let ptr = device::pop_free(buffer).expect("a free packet");
        device::fill(buffer, ptr, 1, 1, &[[0u64; 8]; 64]);
        device::push_ready(buffer, ptr);
        ptr
    }

    /// Moves `entry` to the helper, as slow visits of the main listener do.
    fn put_on_helper(entry: &Entry, now: Nanos) {
        for _ in 0..SLOW_STREAK - 1 {
            entry.class.record_visit(Role::Main, true, 1, 10 * MS, now);
        }
        assert_eq!(entry.class.record_visit(Role::Main, true, 1, 10 * MS, now), Transition::ToHelper);
        assert!(entry.class.on_helper());
    }

    /// A scan without a clock reading in hand; the main listener may hand off.
    fn ask(role: Role, rung: bool, unannounced: bool) -> ScanAsk {
        ScanAsk { role, may_hand_off: role == Role::Main, rung, unannounced, last_now: None }
    }

    fn crew<'a>(
        watch: &'a HelperWatch,
        bell: &'a HelperBell,
        services: &'a Services,
        hooks: &'a TestHooks,
    ) -> Crew<'a> {
        Crew { watch, bell, services, hooks }
    }

    #[test]
    fn a_scan_serves_its_buffers_and_an_empty_one_finds_nothing() {
        let t = classic_entry(4);
        let (watch, bell, services, hooks) =
            (HelperWatch::new(), HelperBell::new(), Services::new(), TestHooks::new());
        let clock = FakeClock(Cell::new(5 * MS));
        let snapshot = [Arc::clone(&t.entry)];
        let found =
            scan(crew(&watch, &bell, &services, &hooks), &snapshot, ask(Role::Main, false, false), &clock);
        assert_eq!(found, ScanResult::default(), "nothing posted: no work");
        let ptr = post(&t.entry);
        let found =
            scan(crew(&watch, &bell, &services, &hooks), &snapshot, ask(Role::Main, false, false), &clock);
        assert_eq!(found, ScanResult { worked_at: Some(5 * MS), served: 1, found_slow: false });
        assert!(device::is_served(classic(&t.entry), ptr));
    }

    #[test]
    fn a_closed_gate_keeps_the_scan_out() {
        let t = classic_entry(4);
        let (watch, bell, services, hooks) =
            (HelperWatch::new(), HelperBell::new(), Services::new(), TestHooks::new());
        let clock = FakeClock(Cell::new(MS));
        let ptr = post(&t.entry);
        t.entry.gate.close();
        let snapshot = [Arc::clone(&t.entry)];
        let found =
            scan(crew(&watch, &bell, &services, &hooks), &snapshot, ask(Role::Main, true, false), &clock);
        assert_eq!(found.served, 0);
        assert!(!device::is_served(classic(&t.entry), ptr), "a disabled buffer is never touched");
    }

    /// The main listener visits a buffer of the helper's only while the
    /// helper is stuck, and checks that again inside the gate: a helper that
    /// finished its visit between the main listener's decision and the gate
    /// (the main listener lost its CPU there) keeps the request, which may be
    /// the slow one the main listener must not block in.
    #[test]
    fn a_fallback_visit_checks_inside_the_gate_that_the_helper_is_still_stuck() {
        let t = classic_entry(4);
        let clock = FakeClock(Cell::new(100 * MS));
        put_on_helper(&t.entry, clock.now());
        let watch = Arc::new(HelperWatch::new());
        let (bell, services) = (HelperBell::new(), Services::new());
        let snapshot = [Arc::clone(&t.entry)];

        // The helper is stuck in a visit (of another buffer) ...
        watch.visit_begins(clock.now());
        clock.0.set(clock.now() + 10 * MS);
        assert!(watch.stuck(clock.now()));
        // ... and finishes it while the main listener is between its
        // decision and the gate.
        let finishing = Arc::clone(&watch);
        let hooks = TestHooks {
            before_fallback_gate: Some(Box::new(move || finishing.visit_ends())),
            ..TestHooks::new()
        };
        let ptr = post(&t.entry);
        let found =
            scan(crew(&watch, &bell, &services, &hooks), &snapshot, ask(Role::Main, false, false), &clock);
        assert_eq!(found.served, 0, "the request is left to the helper");
        assert!(!device::is_served(classic(&t.entry), ptr));

        // A helper that stays stuck: the main listener serves the buffer.
        watch.visit_begins(clock.now());
        clock.0.set(clock.now() + 10 * MS);
        let hooks = TestHooks::new();
        let found =
            scan(crew(&watch, &bell, &services, &hooks), &snapshot, ask(Role::Main, false, false), &clock);
        assert_eq!(found.served, 1);
        assert!(device::is_served(classic(&t.entry), ptr));
    }

    #[test]
    fn the_helpers_visit_is_watched_from_begin_to_end() {
        let t = classic_entry(4);
        let (watch, bell, services, hooks) =
            (HelperWatch::new(), HelperBell::new(), Services::new(), TestHooks::new());
        let clock = FakeClock(Cell::new(100 * MS));
        put_on_helper(&t.entry, clock.now());
        post(&t.entry);
        let snapshot = [Arc::clone(&t.entry)];
        let found =
            scan(crew(&watch, &bell, &services, &hooks), &snapshot, ask(Role::Helper, false, false), &clock);
        assert_eq!(found.served, 1);
        clock.0.set(clock.now() + 10 * MS);
        assert!(!watch.stuck(clock.now()), "the visit ended");
    }

    /// One scan by the main listener that may hand off, unrung.
    fn main_scan(snapshot: &[Arc<Entry>], unannounced: bool, clock: &impl Clock) -> ScanResult {
        let (watch, bell, services, hooks) =
            (HelperWatch::new(), HelperBell::new(), Services::new(), TestHooks::new());
        scan(crew(&watch, &bell, &services, &hooks), snapshot, ask(Role::Main, false, unannounced), clock)
    }

    #[test]
    fn the_only_buffer_left_on_the_helper_comes_back_to_the_main_listener() {
        let t = classic_entry(4);
        let clock = FakeClock(Cell::new(100 * MS));
        put_on_helper(&t.entry, clock.now());
        post(&t.entry);
        let found = main_scan(&[Arc::clone(&t.entry)], false, &clock);
        assert_eq!(found.served, 1, "the main listener serves it");
        assert!(!t.entry.class.on_helper(), "and keeps it");
    }

    /// A clock that notes, at every read, which of `watched` packets have
    /// been answered, and moves 1 ms per read.
    struct AnswerWatchingClock<'a> {
        now: Cell<Nanos>,
        entry: &'a Entry,
        watched: Vec<u64>,
        reads: core::cell::RefCell<Vec<Vec<bool>>>,
    }

    impl Clock for AnswerWatchingClock<'_> {
        fn now(&self) -> Nanos {
            let answered =
                self.watched.iter().map(|&ptr| device::is_served(classic(self.entry), ptr)).collect();
            self.reads.borrow_mut().push(answered);
            self.now.set(self.now.get() + MS);
            self.now.get()
        }
    }

    #[test]
    fn the_first_packet_is_timed_once_its_answer_is_out() {
        // One packet: the visit's begin, then one read after its answer.
        let t = classic_entry(4);
        let one = post(&t.entry);
        let clock = AnswerWatchingClock {
            now: Cell::new(0),
            entry: &t.entry,
            watched: vec![one],
            reads: Default::default(),
        };
        let found = main_scan(&[Arc::clone(&t.entry)], false, &clock);
        assert_eq!(found.served, 1);
        assert_eq!(*clock.reads.borrow(), vec![vec![false], vec![true]], "begin, then after the answer");
        assert_eq!(found.worked_at, Some(2 * MS), "the visit ended with its one packet");
        assert_eq!(t.entry.counters.read(Default::default()).longest_service_ns, MS);

        // Two packets (served oldest first): the first one's time is read
        // when the second is about to be served, the visit's end after both.
        let (older, newer) = (post(&t.entry), post(&t.entry));
        let clock = AnswerWatchingClock {
            now: Cell::new(0),
            entry: &t.entry,
            watched: vec![older, newer],
            reads: Default::default(),
        };
        assert_eq!(main_scan(&[Arc::clone(&t.entry)], false, &clock).served, 2);
        assert_eq!(*clock.reads.borrow(), vec![vec![false, false], vec![true, false], vec![true, true]]);
    }

    #[test]
    fn unannounced_work_counts_lost_rings_and_packets_are_counted() {
        let t = classic_entry(4);
        let clock = FakeClock(Cell::new(5 * MS));
        for unannounced in [false, true] {
            post(&t.entry);
            assert_eq!(main_scan(&[Arc::clone(&t.entry)], unannounced, &clock).served, 1);
        }
        let counts = t.entry.counters.read(Default::default());
        assert_eq!(counts.lost_rings, 1, "only the unannounced one");
        assert_eq!((counts.packets[1], counts.lanes[1]), (2, 2));
    }
}
