//! Model checking of the hostcall protocol with loom: the device side of
//! docs/protocols.md#classic-device-steps (pop free → fill → push ready → ring → wait READY → read →
//! push free with tag+1) against the listener's detach / serve / release
//! (`Buffer::visit`, the listener's own entry), and the registration gate between
//! `disableHostcalls` and the listener.
//!
//! Run (separate target dir so the main build is not invalidated):
//!
//!     LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!         cargo test -p amdgpu-dropin-hostcall-core --release --test loom_hostcall
//!
//! Payload words are loom `UnsafeCell`s, so an answer read or written outside
//! the READY handshake is reported as a data race; stack links are loom
//! atomics, so a lost packet or a premature reuse shows up as a wrong answer,
//! a failed assertion or a deadlock.
#![cfg(loom)]

use amdgpu_dropin_hostcall_core::gate::Gate;
use amdgpu_dropin_hostcall_core::protocol::classic::buffer::DeviceBuffer;
use amdgpu_dropin_hostcall_core::protocol::classic::layout;
use amdgpu_dropin_hostcall_core::protocol::classic::serve::device;
use amdgpu_dropin_hostcall_core::protocol::{Buffer, ByLane};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

const LANES: u32 = 2;

fn lanes_for(call: u64) -> Vec<[u64; 8]> {
    (0..LANES as u64).map(|lane| [call * 10 + lane, lane, 0, 0, 0, 0, 0, 0]).collect()
}

/// The modelled service: slot[0] += 100, slot[1] = service id.
fn serve(service: u32, _lane: u32, slot: &mut [u64; 8]) {
    slot[0] += 100;
    slot[1] = u64::from(service);
}

/// One wave: `calls` requests, each checked. `doorbell` stands in for the HSA
/// signal (release add, as hsa_signal_add_screlease).
fn wave(buffer: &DeviceBuffer, doorbell: &AtomicU64, first_call: u64, calls: u64, mask: u64) {
    for call in first_call..first_call + calls {
        let ptr = loop {
            match device::pop_free(buffer) {
                Some(ptr) => break ptr,
                None => thread::yield_now(),
            }
        };
        let lanes = lanes_for(call);
        device::fill(buffer, ptr, 5, mask, &lanes);
        device::push_ready(buffer, ptr);
        // Release: as the device's doorbell add (a wake-up hint only).
        doorbell.fetch_add(1, Ordering::Release);
        while !device::is_served(buffer, ptr) {
            thread::yield_now();
        }
        for lane in 0..LANES {
            let answer = device::read_answer(buffer, ptr, lane);
            if mask & (1 << lane) != 0 {
                assert_eq!(answer[0], call * 10 + u64::from(lane) + 100, "call {call} lane {lane}");
                assert_eq!(answer[1], 5);
            }
        }
        device::push_free(buffer, ptr);
    }
}

/// The listener: visits until `expected` packets were served.
fn listener(buffer: &DeviceBuffer, expected: u32) {
    let buffer = Buffer::Classic(buffer.clone());
    let mut served = 0;
    while served < expected {
        let Some(stats) = buffer.visit(false, || {}, ByLane(serve), || true) else {
            thread::yield_now();
            continue;
        };
        assert_eq!(stats.bad_pointer(), None);
        assert!(!stats.cycle());
        served += stats.served;
        if served < expected {
            thread::yield_now();
        }
    }
    assert_eq!(served, expected);
}

#[test]
fn one_wave_one_call() {
    loom::model(|| {
        let buffer = DeviceBuffer::new_model(2, LANES);
        let doorbell = Arc::new(AtomicU64::new(1));
        let device_buffer = buffer.clone();
        let device_doorbell = Arc::clone(&doorbell);
        let device = thread::spawn(move || wave(&device_buffer, &device_doorbell, 0, 1, 0b11));
        listener(&buffer, 1);
        device.join().unwrap();
    });
}

#[test]
fn one_wave_reuses_packets_with_bumped_tags() {
    // Two packets, three calls: the third reuses a packet the host released,
    // exercising "read next before release" and the tag bump.
    loom::model(|| {
        let buffer = DeviceBuffer::new_model(2, LANES);
        let doorbell = Arc::new(AtomicU64::new(1));
        let device_buffer = buffer.clone();
        let device_doorbell = Arc::clone(&doorbell);
        let device = thread::spawn(move || wave(&device_buffer, &device_doorbell, 0, 3, 0b01));
        listener(&buffer, 3);
        device.join().unwrap();
        // Every packet is back on the free stack, each popped once more fine.
        let mut free = 0;
        while let Some(ptr) = device::pop_free(&buffer) {
            assert!(buffer.packet_index(ptr).is_some());
            free += 1;
        }
        assert_eq!(free, 2);
    });
}

#[test]
fn two_waves_share_the_stacks() {
    // Two waves pop and push concurrently while the host detaches: the
    // interesting races are on free_stack / ready_stack. To keep the state
    // space small the waves do not spin on READY here (the single-wave models
    // cover that): each posts one request and hands its packet back; the
    // host serves both, then the answers are checked and the packets freed.
    loom::model(|| {
        let buffer = DeviceBuffer::new_model(2, LANES);
        let doorbell = Arc::new(AtomicU64::new(1));
        let waves: Vec<_> = (0..2u64)
            .map(|w| {
                let b = buffer.clone();
                let d = Arc::clone(&doorbell);
                thread::spawn(move || {
                    let ptr = device::pop_free(&b).expect("one packet per wave");
                    device::fill(&b, ptr, 5, 1 << w, &lanes_for(w));
                    device::push_ready(&b, ptr);
                    d.fetch_add(1, Ordering::Release);
                    ptr
                })
            })
            .collect();
        listener(&buffer, 2);
        let ptrs: Vec<u64> = waves.into_iter().map(|w| w.join().unwrap()).collect();
        assert_ne!(buffer.packet_index(ptrs[0]), buffer.packet_index(ptrs[1]));
        for (w, ptr) in ptrs.iter().enumerate() {
            assert!(device::is_served(&buffer, *ptr));
            let answer = device::read_answer(&buffer, *ptr, w as u32);
            assert_eq!(answer[0], w as u64 * 10 + w as u64 + 100);
            device::push_free(&buffer, *ptr);
        }
    });
}

#[test]
fn empty_activemask_only_releases() {
    loom::model(|| {
        let buffer = DeviceBuffer::new_model(2, LANES);
        let doorbell = Arc::new(AtomicU64::new(1));
        let device_buffer = buffer.clone();
        let device_doorbell = Arc::clone(&doorbell);
        let device = thread::spawn(move || wave(&device_buffer, &device_doorbell, 0, 1, 0));
        listener(&buffer, 1);
        device.join().unwrap();
    });
}

#[test]
fn tagged_pointer_arithmetic_matches_the_model() {
    // Not a concurrency property, but keeps the model's assumptions pinned.
    assert_eq!(layout::index_mask(2), 1);
    assert_eq!(layout::bump_tag(layout::initial_free_top(2), 1), 3);
}

#[test]
fn disable_gate_orders_the_last_access_before_free() {
    // The listener enters the gate and touches the buffer; the disabler closes
    // the gate, waits until idle, then "frees" the buffer (a write). A gate
    // that let the listener in after the close, or reported idle too early,
    // is a data race on `memory`.
    loom::model(|| {
        let gate = Arc::new(Gate::new());
        let memory = Arc::new(UnsafeCell::new(0u64));
        let listener = {
            let gate = Arc::clone(&gate);
            let memory = Arc::clone(&memory);
            thread::spawn(move || {
                for _ in 0..2 {
                    if gate.enter() {
                        // SAFETY: inside the gate the disabler does not touch `memory`.
                        memory.with(|p| unsafe { assert_eq!(*p, 0) });
                        gate.leave();
                    }
                }
            })
        };
        if !gate.close() {
            while !gate.is_idle() {
                thread::yield_now();
            }
        }
        // SAFETY: the gate is closed and idle: the listener never enters again.
        memory.with_mut(|p| unsafe { *p = 1 });
        listener.join().unwrap();
    });
}
