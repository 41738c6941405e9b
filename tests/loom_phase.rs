//! Model checking of the phase-bit hostcall handshake with loom: waves that
//! claim a packet through the occupancy bitmap, write it with plain stores,
//! flip the device phase (release), wait for the host phase (acquire), read
//! the answer and clear their bit, against the listener's scan / serve / hand
//! back (`phase_protocol::serve_phases`).
//!
//! Run (separate target dir so the main build is not invalidated):
//!
//!     LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!         cargo test --release --test loom_phase
//!
//! Headers and payload words are loom `UnsafeCell`s, so a request or answer
//! read or written outside the handshake is reported as a data race; a lost
//! request shows up as a deadlock, a wrong or doubled answer as a failed
//! assertion.
#![cfg(loom)]

use amdgpu_dropin::hostcall::buffer::phase::PhaseBuffer;
use amdgpu_dropin::hostcall::phase_protocol::{device, serve_phases, ScanLimit};
use loom::sync::atomic::AtomicU32;
use loom::sync::Arc;
use loom::thread;

const LANES: u32 = 2;

/// The modelled service: slot[0] += 100, slot[1] = service id.
fn serve(packet: &mut amdgpu_dropin::hostcall::packet::HostPacket) {
    packet.for_each_active_lane(|service, _, slot| {
        slot[0] += 100;
        slot[1] = u64::from(service);
    });
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
    let mut scan = ScanLimit::full(buffer.packets());
    let mut served = 0;
    while served < expected {
        let stats = serve_phases(buffer, &mut scan, serve, || true);
        assert_eq!(stats.odd_phases, 0);
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

/// Two waves competing for one packet through the bitmap: the second claims
/// it only after the first cleared its bit, and must not see the first's
/// answer or write over the host's reads.
#[test]
fn two_waves_share_one_packet() {
    loom::model(|| {
        let buffer = PhaseBuffer::new_model(1, LANES);
        let occupied = bitmap(1);
        let (b1, o1) = (buffer.clone(), Arc::clone(&occupied));
        let (b2, o2) = (buffer.clone(), Arc::clone(&occupied));
        let first = thread::spawn(move || wave(&b1, &o1, 1, 1, 0b01));
        let second = thread::spawn(move || wave(&b2, &o2, 2, 1, 0b10));
        listener(&buffer, 2);
        first.join().unwrap();
        second.join().unwrap();
    });
}

/// Two waves on two packets served in one scan or two, with the narrowed
/// scan limit in play.
#[test]
fn two_waves_two_packets() {
    // Three spinning threads need more branches than loom's default allows.
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.check(|| {
        let buffer = PhaseBuffer::new_model(2, 1);
        let occupied = bitmap(2);
        let (b1, o1) = (buffer.clone(), Arc::clone(&occupied));
        let (b2, o2) = (buffer.clone(), Arc::clone(&occupied));
        let first = thread::spawn(move || wave_one_lane(&b1, &o1, 1));
        let second = thread::spawn(move || wave_one_lane(&b2, &o2, 2));
        listener(&buffer, 2);
        first.join().unwrap();
        second.join().unwrap();
    });
}

fn wave_one_lane(buffer: &PhaseBuffer, occupied: &[AtomicU32], call: u64) {
    let index = loop {
        match device::claim(buffer, occupied) {
            Some(index) => break index,
            None => thread::yield_now(),
        }
    };
    device::fill(buffer, index, 5, 1, &[[call, 0, 0, 0, 0, 0, 0, 0]]);
    device::publish(buffer, index);
    while !device::is_answered(buffer, index) {
        thread::yield_now();
    }
    assert_eq!(device::read_answer(buffer, index, 0)[0], call + 100);
    device::release(occupied, index);
}
