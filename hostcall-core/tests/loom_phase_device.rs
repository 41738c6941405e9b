//! Model checking, with loom, of the *device* side of the phase-bit protocol
//! when two waves take turns on one packet: the first wave reads its answer
//! and clears the packet's occupancy bit; the second claims the packet and
//! writes its request into the same slots (see
//! docs/phase-bit-device-ordering.md).
//!
//! The ROCm device library clears the bit with a relaxed `fetch_and` and
//! claims it with a relaxed `fetch_or`. Then nothing orders the first wave's
//! answer loads before the second wave's request stores: on a GPU the loads
//! can still be in flight over PCIe when the stores land, and the first wave
//! reads the next owner's request as its answer. The host cannot prevent it
//! (it never sees the bitmap). A release clear paired with an acquire claim
//! orders them.
//!
//! The packet's words are loom `UnsafeCell`s, so the relaxed pair shows up
//! as a data race between the answer read and the next request's write; the
//! test for that variant asserts that loom finds it (so it fails if the
//! model stops catching the hazard). The release/acquire variant passes.
//!
//! Run (separate target dir so the main build is not invalidated):
//!
//!     LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!         cargo test -p amdgpu-dropin-hostcall-core --release --test loom_phase_device
#![cfg(loom)]

use amdgpu_dropin_hostcall_core::protocol::packet::Packet;
use amdgpu_dropin_hostcall_core::protocol::phase_bit::buffer::{PhaseBuffer, PhaseIndex};
use amdgpu_dropin_hostcall_core::protocol::phase_bit::serve::device;
use amdgpu_dropin_hostcall_core::protocol::{Buffer, PacketServer};
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The orderings of the occupancy bit's claim (`fetch_or`) and clear
/// (`fetch_and`).
#[derive(Clone, Copy)]
struct BitOrdering {
    claim: Ordering,
    unclaim: Ordering,
}

/// ROCm's device library (hostcall_impl.cl): both relaxed.
const UPSTREAM: BitOrdering = BitOrdering { claim: Ordering::Relaxed, unclaim: Ordering::Relaxed };
/// The fix: the clear publishes the answer loads, the claim acquires them.
const RELEASE_ACQUIRE: BitOrdering = BitOrdering { claim: Ordering::Acquire, unclaim: Ordering::Release };

/// The modelled service: slot[0] += 100.
struct Serve;

impl PacketServer for Serve {
    fn serve<P: Packet>(&mut self, packet: &mut P) {
        packet.serve_lanes(|_, _, slot| slot[0] += 100);
    }
}

/// One claim attempt of packet 0 with `order.claim`, as the device library
/// does it (set the bit; keep it only if the host has handed the packet back).
fn claim(buffer: &PhaseBuffer, bit: &AtomicU32, order: BitOrdering) -> Option<PhaseIndex> {
    if bit.fetch_or(1, order.claim) & 1 != 0 {
        return None;
    }
    let index = buffer.index(0)?;
    // Relaxed: this wave is the only writer of the device phase now. Acquire
    // on the host phase (pairs with the host's release hand-back): the
    // request then follows the host's accesses; it does not order the
    // previous wave's answer loads.
    let device_phase = buffer.device_phase(index).load(Ordering::Relaxed);
    if buffer.host_phase(index).load(Ordering::Acquire) != device_phase {
        // Relaxed: nothing was written.
        bit.fetch_and(!1, Ordering::Relaxed);
        return None;
    }
    Some(index)
}

/// A wave making one call on lane 0 (one claim attempt); true if it got the
/// packet. Counts itself in `done` either way.
fn wave(buffer: &PhaseBuffer, bit: &AtomicU32, done: &AtomicU32, call: u64, order: BitOrdering) -> bool {
    let claimed = claim(buffer, bit, order);
    if let Some(index) = claimed {
        device::fill(buffer, index, 5, 1, &[[call, 0, 0, 0, 0, 0, 0, 0]]);
        device::publish(buffer, index);
        while !device::is_answered(buffer, index) {
            thread::yield_now();
        }
        let answer = device::read_answer(buffer, index, 0)[0];
        assert_eq!(answer, call + 100, "wave {call} read a wrong answer");
        bit.fetch_and(!1, order.unclaim);
    }
    // Release: the host's acquire load of `done` then sees the wave finished.
    done.fetch_add(1, Ordering::Release);
    claimed.is_some()
}

/// Two waves, one packet, the host serving until both are done.
fn two_waves_one_packet(order: BitOrdering) {
    loom::model(move || {
        let buffer = PhaseBuffer::new_model(1, 1);
        let bit = Arc::new(AtomicU32::new(0));
        let done = Arc::new(AtomicU32::new(0));
        let first = {
            let (b, o, d) = (buffer.clone(), Arc::clone(&bit), Arc::clone(&done));
            thread::spawn(move || wave(&b, &o, &d, 1, order))
        };
        let second = {
            let (b, o, d) = (buffer.clone(), Arc::clone(&bit), Arc::clone(&done));
            thread::spawn(move || wave(&b, &o, &d, 2, order))
        };
        let visited = Buffer::phase_bit(buffer.clone());
        let mut served = 0;
        // Acquire: pairs with the waves' release increments.
        while done.load(Ordering::Acquire) < 2 {
            served +=
                visited.visit(false, || {}, Serve, || true).expect("a phase-bit visit has no peek").served;
            thread::yield_now();
        }
        let claimed = u32::from(first.join().unwrap()) + u32::from(second.join().unwrap());
        assert_eq!(served, claimed, "each request served exactly once");
    });
}

/// Upstream's relaxed clear and claim: loom finds the next owner's request
/// write racing the previous owner's answer read.
#[test]
#[should_panic(expected = "Causality violation")]
fn upstream_relaxed_unclaim_loses_an_answer() {
    two_waves_one_packet(UPSTREAM);
}

/// A release clear and an acquire claim: every answer is read before the
/// next request is written.
#[test]
fn release_unclaim_and_acquire_claim_keep_the_answer() {
    two_waves_one_packet(RELEASE_ACQUIRE);
}
