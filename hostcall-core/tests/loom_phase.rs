//! Model checking of the phase-bit hostcall handshake with loom: waves that
//! claim a packet through the occupancy bitmap, write it with plain stores,
//! flip the device phase (release), wait for the host phase (acquire), read
//! the answer and clear their bit, against the listener's scan / serve / hand
//! back (`Buffer::visit`, the listener's own entry).
//!
//! Run (separate target dir so the main build is not invalidated):
//!
//!     LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!         cargo test -p amdgpu-dropin-hostcall-core --release --test loom_phase
//!
//! Headers and payload words are loom `UnsafeCell`s, so a request or answer
//! read or written outside the handshake is reported as a data race; a lost
//! request shows up as a deadlock, a wrong or doubled answer as a failed
//! assertion.
#![cfg(loom)]

use amdgpu_dropin_hostcall_core::protocol::packet::Packet;
use amdgpu_dropin_hostcall_core::protocol::phase_bit::buffer::PhaseBuffer;
use amdgpu_dropin_hostcall_core::protocol::phase_bit::serve::device;
use amdgpu_dropin_hostcall_core::protocol::{Buffer, PacketServer};
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

const LANES: u32 = 2;

/// The modelled service: slot[0] += 100, slot[1] = service id.
struct Serve;

impl PacketServer for Serve {
    fn serve<P: Packet>(&mut self, packet: &mut P) {
        packet.serve_lanes(|service, _, slot| {
            slot[0] += 100;
            slot[1] = u64::from(service);
        });
    }
}

/// One wave doing `calls` checked requests.
fn wave(buffer: &PhaseBuffer, occupied: &[AtomicU32], first_call: u64, calls: u64, mask: u64) {
    for call in first_call..first_call + calls {
        let index = loop {
            match device::claim(buffer, occupied) {
                Some(index) => break index,
                None => thread::yield_now(),
            }
        };
        let lanes: Vec<[u64; 8]> =
            (0..u64::from(LANES)).map(|l| [call * 10 + l, 0, 0, 0, 0, 0, 0, 0]).collect();
        device::fill(buffer, index, 5, mask, &lanes);
        device::publish(buffer, index);
        while !device::is_answered(buffer, index) {
            thread::yield_now();
        }
        for lane in 0..LANES {
            if mask & (1 << lane) != 0 {
                let answer = device::read_answer(buffer, index, lane);
                assert_eq!(answer[0], call * 10 + u64::from(lane) + 100, "call {call} lane {lane}");
                assert_eq!(answer[1], 5);
            }
        }
        device::release(occupied, index);
    }
}

/// The listener: visits until `expected` requests were served.
fn listener(buffer: &PhaseBuffer, expected: u32) {
    let visited = Buffer::phase_bit(buffer.clone());
    let mut served = 0;
    while served < expected {
        let stats = visited.visit(false, || {}, Serve, || true).expect("a phase-bit visit has no peek");
        assert_eq!(stats.odd_phases(), 0);
        served += stats.served;
        if served < expected {
            thread::yield_now();
        }
    }
    assert_eq!(served, expected, "a request was served twice");
}

fn bitmap(packets: u32) -> Arc<Vec<AtomicU32>> {
    Arc::new((0..packets.div_ceil(32)).map(|_| AtomicU32::new(0)).collect())
}

/// One wave, one packet, two calls in a row: the packet is reused after the
/// first answer (phases 1/1, then 0/0).
#[test]
fn one_wave_reuses_its_packet() {
    loom::model(|| {
        let buffer = PhaseBuffer::new_model(1, LANES);
        let occupied = bitmap(1);
        let (b, o) = (buffer.clone(), Arc::clone(&occupied));
        let device = thread::spawn(move || wave(&b, &o, 1, 2, 0b11));
        listener(&buffer, 2);
        device.join().unwrap();
    });
}

/// A wave that tries to claim once (no spinning on a taken packet, to keep
/// the state space small) and, if it got a packet, completes a checked call.
/// Counts itself in `done` when finished either way.
fn try_wave(buffer: &PhaseBuffer, occupied: &[AtomicU32], done: &AtomicU32, call: u64, lane: u32) -> bool {
    let claimed = device::claim(buffer, occupied);
    if let Some(index) = claimed {
        let mut lanes = vec![[0u64; 8]; LANES as usize];
        lanes[lane as usize][0] = call;
        device::fill(buffer, index, 5, 1 << lane, &lanes);
        device::publish(buffer, index);
        while !device::is_answered(buffer, index) {
            thread::yield_now();
        }
        assert_eq!(device::read_answer(buffer, index, lane)[0], call + 100, "call {call}");
        device::release(occupied, index);
    }
    // Release: the listener's acquire load of `done` then sees the wave finished.
    done.fetch_add(1, Ordering::Release);
    claimed.is_some()
}

/// Serves until every wave thread is done; returns the requests served.
fn serve_until_done(buffer: &PhaseBuffer, done: &AtomicU32, waves: u32) -> u32 {
    let visited = Buffer::phase_bit(buffer.clone());
    let mut served = 0;
    // Acquire: pairs with try_wave's release increment.
    while done.load(Ordering::Acquire) < waves {
        served += visited.visit(false, || {}, Serve, || true).expect("a phase-bit visit has no peek").served;
        thread::yield_now();
    }
    served
}

/// Two waves competing for one packet through the bitmap: the one that
/// comes second either finds the bit taken, or claims the packet after the
/// first cleared its bit; its writes must then follow the host's and the
/// first wave's accesses (loom reports a race on the header or payload
/// cells otherwise), and each request is served exactly once.
#[test]
fn two_waves_share_one_packet() {
    loom::model(|| {
        let buffer = PhaseBuffer::new_model(1, LANES);
        let occupied = bitmap(1);
        let done = Arc::new(AtomicU32::new(0));
        let spawn_wave = |call: u64, lane: u32| {
            let (b, o, d) = (buffer.clone(), Arc::clone(&occupied), Arc::clone(&done));
            thread::spawn(move || try_wave(&b, &o, &d, call, lane))
        };
        let first = spawn_wave(1, 0);
        let second = spawn_wave(2, 1);
        let served = serve_until_done(&buffer, &done, 2);
        let claimed = u32::from(first.join().unwrap()) + u32::from(second.join().unwrap());
        assert!(claimed >= 1, "one wave always gets the free packet");
        assert_eq!(served, claimed, "each request served exactly once");
    });
}

/// Two waves on two packets, each served once, in one scan or two (with
/// the narrowed scan limit in play). As in the classic model, the waves do
/// not spin on the answer here (two spinning waves and a spinning listener
/// exceed loom's budget): each posts its request and returns; the answers are
/// checked after the listener served both.
#[test]
fn two_waves_two_packets() {
    loom::model(|| {
        let buffer = PhaseBuffer::new_model(2, 1);
        let occupied = bitmap(2);
        let waves: Vec<_> = (1..=2u64)
            .map(|call| {
                let (b, o) = (buffer.clone(), Arc::clone(&occupied));
                thread::spawn(move || {
                    let index = device::claim(&b, &o).expect("two packets for two waves");
                    device::fill(&b, index, 5, 1, &[[call, 0, 0, 0, 0, 0, 0, 0]]);
                    device::publish(&b, index);
                    (index, call)
                })
            })
            .collect();
        listener(&buffer, 2);
        let posted: Vec<_> = waves.into_iter().map(|w| w.join().unwrap()).collect();
        assert_ne!(posted[0].0, posted[1].0);
        for (index, call) in posted {
            assert!(device::is_answered(&buffer, index));
            assert_eq!(device::read_answer(&buffer, index, 0)[0], call + 100);
            device::release(&occupied, index);
        }
    });
}
