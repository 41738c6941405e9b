//! Host CPU time per full (64-lane) classic packet through the listener's
//! serving steps (`Buffer::visit`): lane by lane in device memory (the
//! built-in services) against the whole-packet host copy (registered
//! services). Prints the figures; checks nothing.
//!
//!     cargo bench --bench packet_copy_cost

use core::ptr::NonNull;

use hostcall_core::protocol::classic::buffer::DeviceBuffer;
use hostcall_core::protocol::classic::layout;
use hostcall_core::protocol::packet::Packet;
use hostcall_core::protocol::{Buffer, PacketServer};
use std::sync::atomic::Ordering;

const ROUNDS: u32 = 200_000;

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The device's steps for one packet, on the buffer's own atomic views:
/// pop the free stack, write the header and READY, push the ready stack.
fn post(buffer: &DeviceBuffer) -> u64 {
    let ptr = buffer.free_stack().load(Ordering::Acquire);
    let index = buffer.packet_index(ptr).expect("a free packet");
    let next = buffer.next(index).load(Ordering::Relaxed);
    buffer.free_stack().store(next, Ordering::Relaxed);
    buffer.service(index).store(9, Ordering::Relaxed);
    buffer.activemask(index).store(u64::MAX, Ordering::Relaxed);
    buffer.control(index).store(layout::CONTROL_READY, Ordering::Relaxed);
    buffer.next(index).store(0, Ordering::Relaxed);
    buffer.ready_stack().store(ptr, Ordering::Release);
    ptr
}

/// Hands the served packet back to the free stack, its tag bumped.
fn recycle(buffer: &DeviceBuffer, ptr: u64) {
    let index = buffer.packet_index(ptr).unwrap();
    buffer.next(index).store(buffer.free_stack().load(Ordering::Relaxed), Ordering::Relaxed);
    buffer.free_stack().store(layout::bump_tag(ptr, buffer.index_mask()), Ordering::Release);
}

struct Serve {
    whole: bool,
}

impl PacketServer for Serve {
    fn serve<P: Packet>(&mut self, packet: &mut P) {
        if self.whole {
            packet.serve_whole(|copy| copy.for_each_active_lane(|_, _, slot| slot[0] += 1));
        } else {
            packet.serve_lanes(|_, _, slot| slot[0] += 1);
        }
    }
}

fn main() {
    let mut memory = vec![0u64; layout::buffer_size(2) / 8];
    let base = NonNull::new(memory.as_mut_ptr().cast()).unwrap();
    // SAFETY: `memory` is 8-aligned, large enough, outlives the views and is
    // used only through them.
    let buffer = unsafe { DeviceBuffer::new(base, 2) };
    buffer.initialize(0);
    let visited = Buffer::Classic(buffer);
    // The device's view of the same memory (every access atomic).
    // SAFETY: as above.
    let view = unsafe { DeviceBuffer::new(base, 2) };
    let measure = |whole: bool| {
        let mut total = 0;
        for _ in 0..ROUNDS {
            let ptr = post(&view);
            let start = thread_cpu_ns();
            visited.visit(false, || {}, Serve { whole }, || true);
            total += thread_cpu_ns() - start;
            recycle(&view, ptr);
        }
        total / u64::from(ROUNDS)
    };
    let lanes_ns = measure(false);
    let whole_ns = measure(true);
    println!(
        "per 64-lane packet: lane by lane {lanes_ns} ns, whole-packet copy {whole_ns} ns (thread CPU time \
         incl. two clock reads, {ROUNDS} rounds)"
    );
    drop(memory);
}
