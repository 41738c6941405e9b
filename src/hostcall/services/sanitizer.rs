//! SANITIZER (service 4): GPU AddressSanitizer reports, and the default
//! report printer.
//!
//! # Encoding (ROCm device libraries: ockl `__ockl_sanitizer_report`, called
//! by the asan runtime's report functions)
//!
//! Every lane that hit a bad access posts, in one packet per wave:
//! slot[0] = the bad address, [1] = the reporting code's pc, [2..5] =
//! workgroup id x, y, z, [5] = the lane's local linear id ("wave id"),
//! [6] = access info: bit 0 set for a write; the upper 32 bits all set when
//! the report is recoverable (the `_noabort` variants), [7] = access size in
//! bytes. The device ignores the answer.
//!
//! ROCclr (built with ASan only) takes the whole packet: pc, workgroup id,
//! access info and size from the first active lane, an address and a lane id
//! from every active lane, and passes them to the host ASan runtime's
//! `__asan_report_nonself_error`, which aborts unless the report is
//! recoverable. Without ASan, ROCclr aborts on service 4 as on any unknown id.
//!
//! # The default here
//!
//! With no handler registered for service 4, each packet is printed to stderr
//! as one report (one `write`), decoded and with every active lane's raw
//! words, whatever `AMD_LOG_LEVEL` says, and the host never aborts. Any words
//! are accepted (a malformed report prints what it holds). The slots are left
//! as the device wrote them. A runtime that wants ASan's own reporting
//! registers a per-packet handler for service 4.

use std::fmt::Write as _;

use crate::hostcall::protocol::host_packet::HostPacket;

/// Access-info bits set by the `_noabort` report variants.
const RECOVERABLE_BITS: u64 = 0xFFFF_FFFF_0000_0000;

/// Formats one report packet (empty when no lane is active).
pub fn format_report(packet: &HostPacket) -> String {
    let mut lanes = packet.active_lanes();
    let Some(first) = lanes.next() else {
        return String::new();
    };
    let head = &packet.slots[first as usize];
    let access = if head[6] & 1 != 0 { "write" } else { "read" };
    let kind = if head[6] & RECOVERABLE_BITS != 0 { "recoverable" } else { "fatal on the device side" };
    let mut text = String::with_capacity(256 + 160 * packet.activemask.count_ones() as usize);
    let _ = writeln!(
        text,
        "amdgpu-dropin: sanitizer: GPU address sanitizer report from buffer {:#x} (active lanes {:#018x}): \
         {} of {} bytes, pc {:#x}, workgroup ({}, {}, {}), {}; the host process goes on",
        packet.buffer_key(),
        packet.activemask,
        access,
        head[7],
        head[1],
        head[2],
        head[3],
        head[4],
        kind
    );
    for lane in packet.active_lanes() {
        let slot = &packet.slots[lane as usize];
        let _ = writeln!(
            text,
            "amdgpu-dropin: sanitizer:   lane {:2}: address {:#018x} id {} | raw {:#x} {:#x} {:#x} {:#x} {:#x} {:#x} \
             {:#x} {:#x}",
            lane, slot[0], slot[5], slot[0], slot[1], slot[2], slot[3], slot[4], slot[5], slot[6], slot[7]
        );
    }
    text
}

/// The default: prints the report with one write to stderr.
pub fn print_report(packet: &HostPacket) {
    let text = format_report(packet);
    if !text.is_empty() {
        crate::log::write_out(libc::STDERR_FILENO, text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostcall::services::ids::SERVICE_SANITIZER;

    #[test]
    fn decodes_the_first_lane_and_lists_every_lane_with_raw_words() {
        let mut packet = HostPacket::new(0xb000, SERVICE_SANITIZER, 0b101);
        packet.slots[0] = [0x7000_0010, 0x4242, 1, 2, 3, 0, 1, 4];
        packet.slots[2] = [0x7000_0018, 0x4242, 1, 2, 3, 2, 1, 4];
        let text = format_report(&packet);
        assert_eq!(text.lines().count(), 3);
        assert!(text.contains("write of 4 bytes, pc 0x4242, workgroup (1, 2, 3), fatal on the device side"));
        assert!(text.contains("lane  0: address 0x0000000070000010 id 0"));
        assert!(text.contains("lane  2: address 0x0000000070000018 id 2"));
        assert!(text.contains("raw 0x70000018 0x4242 0x1 0x2 0x3 0x2 0x1 0x4"));
    }

    #[test]
    fn recoverable_reads_and_garbage_are_printed_not_refused() {
        let mut packet = HostPacket::new(0xb000, SERVICE_SANITIZER, 1 << 63);
        packet.slots[63] = [u64::MAX; 8];
        let text = format_report(&packet);
        assert!(text.contains("write of 18446744073709551615 bytes"));
        assert!(text.contains("recoverable"));
        packet.slots[63][6] = 0;
        assert!(format_report(&packet).contains("read of"));
        assert_eq!(format_report(&HostPacket::new(0xb000, SERVICE_SANITIZER, 0)), "");
    }

    #[test]
    fn random_packets_format_one_header_and_one_line_per_active_lane() {
        let mut state = 3u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..2_000 {
            let mut packet = HostPacket::new(next() as usize, SERVICE_SANITIZER, next());
            for lane in 0..64 {
                packet.slots[lane] = core::array::from_fn(|_| next());
            }
            let text = format_report(&packet);
            let expected =
                if packet.activemask == 0 { 0 } else { 1 + packet.activemask.count_ones() as usize };
            assert_eq!(text.lines().count(), expected);
        }
    }
}
