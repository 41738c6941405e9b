//! The services behind the packets: FUNCTION_CALL (`function_call`) and
//! PRINTF (`printf`), built in,
//! the handlers embedders register for other ids (`handlers`, the default
//! DEVMEM service in `devmem`), the SANITIZER default (`sanitizer`), and the
//! defined answer to everything else.
//!
//! Dispatch per packet: FUNCTION_CALL and PRINTF lane by lane in device
//! memory behind one panic boundary per packet (they cannot be overridden);
//! any other id goes to the handler registered for the packet's buffer,
//! else to the one registered for every buffer; with none,
//! SANITIZER reports are printed, DEVMEM lanes get 0 (the device heap's "no
//! memory") and every other id is unknown.
//!
//! Error value: a lane whose request cannot be served (unknown service id,
//! FUNCTION_CALL with a NULL function, a panic inside a service) gets
//! `ERROR_VALUE` (u64::MAX, i.e. -1) in slot[0]; its other words are left as
//! the device wrote them. A panic in a built-in service fails the lane it
//! happened on and the packet's lanes not yet answered; lanes answered
//! before keep their answers. READY is cleared as for any other packet, so the
//! wave always continues. Upstream aborts the process instead.

pub mod devmem;
pub mod function_call;
pub mod handlers;
pub mod ids;
pub mod printf;
pub mod sanitizer;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use self::function_call::function_call;
use self::handlers::{Handler, Registration};
use self::ids::{ERROR_VALUE, SERVICE_DEVMEM, SERVICE_FUNCTION_CALL, SERVICE_PRINTF, SERVICE_SANITIZER};
use self::printf::PrintfService;
use crate::hostcall::protocol::host_packet::HostPacket;
use crate::hostcall::protocol::packet::Packet;
use crate::hostcall::protocol::PacketServer;
use crate::hostcall::test_hooks::TestHooks;
use crate::log::Level;

/// Unknown ids are logged once each, up to this many distinct ids.
const MAX_LOGGED_UNKNOWN_IDS: usize = 64;

pub struct Services {
    printf: PrintfService,
    unknown_logged: spin::Mutex<Vec<u32>>,
    devmem_unserved_logged: AtomicBool,
    /// Services that panic on request (tests and the hook build only).
    pub hooks: TestHooks,
}

/// The listener's visits hand every packet to `serve_packet`.
impl PacketServer for &Services {
    fn serve<P: Packet>(&mut self, packet: &mut P) {
        self.serve_packet(packet);
    }
}

impl Services {
    pub fn new() -> Services {
        Services {
            printf: printf::service(),
            unknown_logged: spin::Mutex::new(Vec::new()),
            devmem_unserved_logged: AtomicBool::new(false),
            hooks: TestHooks::new(),
        }
    }

    /// Answers every active lane of one packet. Never unwinds.
    /// The service is looked at once per packet. The built-in services go
    /// lane by lane in device memory behind one panic boundary for the
    /// packet (`serve_builtin`); the others get a host copy of the whole
    /// packet.
    pub fn serve_packet<P: Packet>(&self, packet: &mut P) {
        match packet.service() {
            SERVICE_FUNCTION_CALL => self.serve_builtin(packet, |packet, unanswered| {
                packet.answer_lanes(|lane, request| {
                    self.hooks.panic_if_asked(SERVICE_FUNCTION_CALL, Some(lane));
                    let answer = function_call(request);
                    *unanswered &= !(1u64 << lane);
                    answer
                })
            }),
            SERVICE_PRINTF => {
                let buffer_key = packet.buffer_key();
                self.serve_builtin(packet, |packet, unanswered| {
                    packet.serve_lanes(|_, lane, slot| {
                        self.hooks.panic_if_asked(SERVICE_PRINTF, Some(lane));
                        self.printf.serve_lane(buffer_key, lane, slot);
                        *unanswered &= !(1u64 << lane);
                    })
                })
            }
            _ => packet.serve_whole(|copy| self.serve_extension(copy)),
        }
    }

    /// Runs `serve(packet, unanswered)` inside one panic boundary. `serve`
    /// clears a lane's bit in `unanswered` once the lane's answer is settled
    /// (a lane's write-back cannot panic). After a panic the lanes already
    /// answered keep their answers and every other active lane gets
    /// `ERROR_VALUE` in slot[0] (its other words stay as the device wrote
    /// them); logged once per packet.
    fn serve_builtin<P: Packet>(&self, packet: &mut P, serve: impl FnOnce(&mut P, &mut u64)) {
        let mut unanswered = u64::MAX;
        let result = catch_unwind(AssertUnwindSafe(|| serve(&mut *packet, &mut unanswered)));
        let Err(payload) = result else {
            return;
        };
        let (mut first_lane, mut failed) = (None, 0u32);
        packet.serve_lanes(|_, lane, slot| {
            if unanswered & (1u64 << lane) != 0 {
                first_lane.get_or_insert(lane);
                failed += 1;
                slot[0] = ERROR_VALUE;
            }
        });
        crate::log!(
            Level::Error,
            "hostcall listener: service {} panicked on buffer {:#x} lane {}: {}; that lane and the {} \
             other active lanes not yet answered get the error value and the listener keeps serving",
            packet.service(),
            packet.buffer_key(),
            first_lane.unwrap_or(0),
            crate::log::panic_message(&*payload),
            failed.saturating_sub(1)
        );
    }

    /// Drops per-buffer state (on disable): printf messages, the buffer's own
    /// handlers, the default DEVMEM blocks it left.
    pub fn forget_buffer(&self, buffer_key: usize) {
        self.printf.forget_buffer(buffer_key);
        handlers::table().forget_buffer(buffer_key);
    }

    /// A packet of a service that is not built in. A panic (in a built-in
    /// service or the test hook) answers every active lane with `ERROR_VALUE`.
    fn serve_extension(&self, packet: &mut HostPacket) {
        let service = packet.service;
        let buffer_key = packet.buffer_key();
        let result = catch_unwind(AssertUnwindSafe(|| {
            self.hooks.panic_if_asked(service, None);
            match handlers::table().enter(service, buffer_key) {
                Some(call) => run_handler(call.registration(), packet),
                None if service == SERVICE_SANITIZER => sanitizer::print_report(packet),
                None if service == SERVICE_DEVMEM => self.devmem_unserved(packet),
                None => packet.for_each_active_lane(|_, _, slot| {
                    self.log_unknown(service, buffer_key);
                    slot[0] = ERROR_VALUE;
                }),
            }
        }));
        if let Err(payload) = result {
            crate::log!(
                Level::Error,
                "hostcall listener: service {} panicked on buffer {:#x}: {}; every active lane gets \
                 the error value and the listener keeps serving",
                service,
                buffer_key,
                crate::log::panic_message(&*payload)
            );
            packet.for_each_active_lane(|_, _, slot| slot[0] = ERROR_VALUE);
        }
    }

    /// DEVMEM with no service registered: every lane gets 0, the device
    /// library's "no memory" (an allocation answered -1 would hand the device
    /// heap an address it would write to). Logged once.
    fn devmem_unserved(&self, packet: &mut HostPacket) {
        // Relaxed: only decides whether to log.
        if !self.devmem_unserved_logged.swap(true, Ordering::Relaxed) {
            crate::log!(
                Level::Error,
                "hostcall: DEVMEM request (first on buffer {:#x}) but no DEVMEM service is registered \
                 (amdgpu_dropin_hostcall_devmem_enable or a handler for service 3); its lanes get 0 \
                 (logged once)",
                packet.buffer_key()
            );
        }
        packet.for_each_active_lane(|_, _, slot| slot[0] = 0);
    }

    fn log_unknown(&self, service: u32, buffer_key: usize) {
        if !crate::log::enabled(Level::Error) {
            return;
        }
        let first = {
            let mut seen = self.unknown_logged.lock();
            if seen.contains(&service) || seen.len() >= MAX_LOGGED_UNKNOWN_IDS {
                false
            } else {
                seen.push(service);
                true
            }
        };
        if first {
            crate::log!(
                Level::Error,
                "hostcall: unknown service id {} (first seen on buffer {:#x}); its lanes get -1 \
                 in slot[0] (logged once per id)",
                service,
                buffer_key
            );
        }
    }
}

/// Runs a registered handler on `packet`. A C handler that returns non-zero
/// failed: its lane (per-lane handler) or every active lane (per-packet
/// handler) gets `ERROR_VALUE` in slot[0]; the other words stay as the
/// handler left them. A per-lane handler unregistered during the packet (by
/// itself from one of its lanes, or by another thread) is not called for the
/// lanes after that: they get `ERROR_VALUE` in slot[0].
fn run_handler(registration: &Registration, packet: &mut HostPacket) {
    let service = packet.service;
    let buffer = packet.buffer;
    match &registration.handler {
        Handler::Lane { function, user_data } => packet.for_each_active_lane(|_, lane, slot| {
            // Unregistered meanwhile (from inside a lane call, or by another
            // thread that now waits for this call): no more calls; the lanes
            // left get the error value.
            if registration.is_retired() {
                slot[0] = ERROR_VALUE;
                return;
            }
            // SAFETY: the registration contract: `function` has the lane
            // handler signature and may be called with `user_data` until it is
            // unregistered (this call is counted, so unregister waits for it);
            // `slot` is a live, writable array of 8 words.
            let status = unsafe { function(*user_data as *mut _, buffer, service, lane, slot.as_mut_ptr()) };
            if status != 0 {
                log_handler_failure(service, packet_key(buffer), status, Some(lane));
                slot[0] = ERROR_VALUE;
            }
        }),
        Handler::Packet { function, user_data } => {
            let header = (packet.buffer, packet.service, packet.activemask);
            // SAFETY: as above, with the packet handler signature; `packet` is
            // a live, writable host copy.
            let status = unsafe { function(*user_data as *mut _, packet) };
            // The handler may not redirect the write-back: the header stays.
            (packet.buffer, packet.service, packet.activemask, packet.reserved) =
                (header.0, header.1, header.2, 0);
            if status != 0 {
                log_handler_failure(service, packet_key(buffer), status, None);
                packet.for_each_active_lane(|_, _, slot| slot[0] = ERROR_VALUE);
            }
        }
        Handler::Builtin(builtin) => builtin.serve(packet),
        // Registered only under PRINTF, which is built in and never comes here.
        Handler::PrintfSink { .. } => packet.for_each_active_lane(|_, _, slot| slot[0] = ERROR_VALUE),
    }
}

fn packet_key(buffer: *mut core::ffi::c_void) -> usize {
    buffer as usize
}

fn log_handler_failure(service: u32, buffer_key: usize, status: i32, lane: Option<u32>) {
    if let Some(lane) = lane {
        crate::log!(
            Level::Error,
            "hostcall: the handler of service {service} returned {status} for buffer {buffer_key:#x} \
             lane {lane}; the lane gets -1 in slot[0]"
        );
    } else {
        crate::log!(
            Level::Error,
            "hostcall: the packet handler of service {service} returned {status} for buffer \
             {buffer_key:#x}; every active lane gets -1 in slot[0]"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C-unwind" fn sum_and_xor(out: *mut u64, input: *const u64) {
        // SAFETY: called by `function_call` with 2 and 7 valid words.
        let input = unsafe { core::slice::from_raw_parts(input, 7) };
        // SAFETY: as above.
        let out = unsafe { core::slice::from_raw_parts_mut(out, 2) };
        out[0] = input.iter().copied().fold(0u64, u64::wrapping_add);
        out[1] = input.iter().fold(0, |a, b| a ^ b);
    }

    fn sum_and_xor_address() -> u64 {
        sum_and_xor as unsafe extern "C-unwind" fn(*mut u64, *const u64) as usize as u64
    }

    /// One FUNCTION_CALL lane (lane 0) through `serve_packet`.
    fn call_one(services: &Services, slot: [u64; 8]) -> [u64; 8] {
        let mut packet = HostPacket::new(0x1000, SERVICE_FUNCTION_CALL, 1);
        packet.slots[0] = slot;
        services.serve_packet(&mut packet);
        packet.slots[0]
    }

    #[test]
    fn function_call_passes_seven_inputs_and_returns_two_words() {
        let services = Services::new();
        let slot = call_one(&services, [sum_and_xor_address(), 3, 5, 7, 11, 13, 17, 19]);
        assert_eq!(slot[0], 75, "sum of the 7 inputs");
        assert_eq!(slot[1], 5, "xor of the 7 inputs");
        assert_eq!(slot[2..], [5, 7, 11, 13, 17, 19]);
    }

    #[test]
    fn null_function_and_unknown_service_answer_minus_one() {
        let services = Services::new();
        let slot = call_one(&services, [0, 9, 9, 9, 9, 9, 9, 9]);
        assert_eq!(slot, [ERROR_VALUE, 9, 9, 9, 9, 9, 9, 9]);
        for id in [0u32, 77, 0x5000_0000, u32::MAX] {
            let mut packet = HostPacket::new(0x1000, id, 1 << 3);
            packet.slots[3] = [5; 8];
            services.serve_packet(&mut packet);
            assert_eq!(packet.slots[3][0], ERROR_VALUE, "id {id}");
            assert_eq!(packet.slots[3][1..], [5; 7]);
        }
        // DEVMEM with no service: 0 (no memory), never an address.
        let mut packet = HostPacket::new(0x1000, SERVICE_DEVMEM, 0b11);
        packet.slots[0] = [0, 4096, 0, 0, 0, 0, 0, 0];
        packet.slots[1] = [0x7000, 0, 0, 0, 0, 0, 0, 0];
        services.serve_packet(&mut packet);
        assert_eq!([packet.slots[0][0], packet.slots[1][0]], [0, 0]);
    }

    #[test]
    fn a_panicking_service_is_answered_with_minus_one() {
        let mut services = Services::new();
        services.hooks.panic_service = Some(SERVICE_PRINTF);
        let mut packet = HostPacket::new(0x1000, SERVICE_PRINTF, 0b1);
        packet.slots[0] = [5; 8];
        services.serve_packet(&mut packet);
        assert_eq!(packet.slots[0], [ERROR_VALUE, 5, 5, 5, 5, 5, 5, 5]);
        // The service object is still usable.
        let slot = call_one(&services, [sum_and_xor_address(), 1, 1, 1, 1, 1, 1, 1]);
        assert_eq!(slot[0], 7);
    }

    #[test]
    fn a_panic_in_the_middle_of_a_packet_keeps_earlier_answers() {
        let mut services = Services::new();
        services.hooks.panic_service = Some(SERVICE_FUNCTION_CALL);
        services.hooks.panic_lane = Some(5);
        let mask = 0b1011_0110_u64 | 1 << 63;
        let mut packet = HostPacket::new(0x1000, SERVICE_FUNCTION_CALL, mask);
        for lane in packet.active_lanes().collect::<Vec<_>>() {
            packet.slots[lane as usize] = [sum_and_xor_address(), u64::from(lane), 0, 0, 0, 0, 0, 40];
        }
        services.serve_packet(&mut packet);
        for lane in 0..64u32 {
            let slot = packet.slots[lane as usize];
            match lane {
                1 | 2 | 4 => {
                    assert_eq!(slot[..2], [u64::from(lane) + 40, u64::from(lane) ^ 40], "lane {lane}")
                }
                5 | 7 | 63 => {
                    assert_eq!(slot[0], ERROR_VALUE, "lane {lane}");
                    assert_eq!(slot[1..], [u64::from(lane), 0, 0, 0, 0, 0, 40], "lane {lane}: request kept");
                }
                _ => assert_eq!(slot, [0; 8], "inactive lane {lane}"),
            }
        }
    }

    /// The same through device memory (the listener's drain): the answered
    /// lanes' answers and the unanswered lanes' error value reach the
    /// buffer, the other request words stay, READY is cleared.
    #[test]
    fn a_panic_in_the_middle_of_a_device_packet_answers_the_rest_and_releases_it() {
        use crate::hostcall::protocol::classic::buffer::DeviceBuffer;
        use crate::hostcall::protocol::classic::layout;
        use crate::hostcall::protocol::classic::serve::{device, take_ready_packets};
        use core::ptr::NonNull;

        let mut services = Services::new();
        services.hooks.panic_service = Some(SERVICE_FUNCTION_CALL);
        services.hooks.panic_lane = Some(3);
        let mut memory = vec![0u64; layout::buffer_size(2) / 8];
        // SAFETY: `memory` is 8-aligned, large enough and outlives the view.
        let buffer = unsafe { DeviceBuffer::new(NonNull::new(memory.as_mut_ptr().cast()).unwrap(), 2) };
        buffer.initialize(0);
        let lanes: Vec<[u64; 8]> =
            (0..64u64).map(|lane| [sum_and_xor_address(), lane, 0, 0, 0, 0, 0, 1000]).collect();
        let ptr = device::pop_free(&buffer).unwrap();
        device::fill(&buffer, ptr, SERVICE_FUNCTION_CALL, 0b1_1011, &lanes);
        device::push_ready(&buffer, ptr);
        let stats = take_ready_packets(&buffer, |packet| services.serve_packet(packet), || true);
        assert_eq!(stats.served, 1);
        assert!(device::is_served(&buffer, ptr), "READY cleared after the panic");
        for lane in [0u32, 1] {
            let answer = device::read_answer(&buffer, ptr, lane);
            assert_eq!(answer[..2], [u64::from(lane) + 1000, u64::from(lane) ^ 1000], "lane {lane}");
        }
        for lane in [3u32, 4] {
            let answer = device::read_answer(&buffer, ptr, lane);
            assert_eq!(answer, [ERROR_VALUE, u64::from(lane), 0, 0, 0, 0, 0, 1000], "lane {lane}");
        }
        assert_eq!(device::read_answer(&buffer, ptr, 2), [0; 8], "inactive lane untouched");
    }

    unsafe extern "C-unwind" fn lane_plus_lane(
        _user: *mut core::ffi::c_void,
        _buffer: *mut core::ffi::c_void,
        _service: u32,
        lane: u32,
        slot: *mut u64,
    ) -> i32 {
        // SAFETY: called with a live 8-word slot.
        let slot = unsafe { core::slice::from_raw_parts_mut(slot, 8) };
        slot[0] += u64::from(lane);
        slot[1] = 99;
        if lane == 5 {
            -1
        } else {
            0
        }
    }

    unsafe extern "C-unwind" fn packet_widening(
        _user: *mut core::ffi::c_void,
        packet: *mut HostPacket,
    ) -> i32 {
        // SAFETY: called with a live packet.
        let packet = unsafe { &mut *packet };
        packet.activemask = u64::MAX;
        packet.buffer = core::ptr::null_mut();
        packet.slots[0][0] = 1;
        packet.slots[1][0] = 1;
        2
    }

    #[test]
    fn registered_handlers_answer_failures_and_keep_the_header() {
        let table = handlers::table();
        let services = Services::new();
        table.register(5001, None, Handler::Lane { function: lane_plus_lane, user_data: 0 }).unwrap();
        let mut packet = HostPacket::new(0x1000, 5001, 0b10_0011);
        packet.slots[0][0] = 10;
        packet.slots[1][0] = 20;
        packet.slots[5][0] = 30;
        services.serve_packet(&mut packet);
        assert_eq!(packet.slots[0][..2], [10, 99]);
        assert_eq!(packet.slots[1][..2], [21, 99]);
        assert_eq!(packet.slots[5][..2], [ERROR_VALUE, 99], "a failed lane gets -1, other words kept");
        table.unregister(5001, None).unwrap();

        table
            .register(5002, Some(0x1000), Handler::Packet { function: packet_widening, user_data: 0 })
            .unwrap();
        let mut packet = HostPacket::new(0x1000, 5002, 0b01);
        services.serve_packet(&mut packet);
        assert_eq!(packet.activemask, 0b01, "the header is restored");
        assert_eq!(packet.buffer_key(), 0x1000);
        assert_eq!(packet.slots[0][0], ERROR_VALUE, "failed packet");
        let mut other = HostPacket::new(0x2000, 5002, 0b01);
        other.slots[0] = [4; 8];
        services.serve_packet(&mut other);
        assert_eq!(other.slots[0][0], ERROR_VALUE, "another buffer: unknown id");
        assert_eq!(other.slots[0][1..], [4; 7]);
        table.forget_buffer(0x1000);
    }

    #[test]
    fn builtins_cannot_be_registered_and_sanitizer_packets_are_left_alone() {
        let services = Services::new();
        let mut packet = HostPacket::new(0x1000, SERVICE_SANITIZER, 0b1);
        packet.slots[0] = [1, 2, 3, 4, 5, 6, 7, 8];
        services.serve_packet(&mut packet);
        assert_eq!(packet.slots[0], [1, 2, 3, 4, 5, 6, 7, 8], "the default only prints");
        assert!(handlers::table()
            .register(SERVICE_PRINTF, None, Handler::Lane { function: lane_plus_lane, user_data: 0 })
            .is_err());
    }

    #[test]
    fn a_panic_while_serving_an_extension_packet_answers_every_lane() {
        let mut services = Services::new();
        services.hooks.panic_service = Some(5003);
        let mut packet = HostPacket::new(0x1000, 5003, 0b101);
        services.serve_packet(&mut packet);
        assert_eq!(
            [packet.slots[0][0], packet.slots[1][0], packet.slots[2][0]],
            [ERROR_VALUE, 0, ERROR_VALUE]
        );
    }
}
