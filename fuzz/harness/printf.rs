//! Fuzzing harness of the PRINTF service, shared (by `#[path]`) by the
//! cargo-fuzz target (`fuzz/fuzz_targets/printf.rs`) and the stable
//! randomized test (`hostcall-printf/tests/printf_fuzz.rs`). It uses only
//! the public API of the crate that holds the service (`hostcall-printf/`)
//! and is not part of any library.
//!
//! `run` turns arbitrary bytes into either a stream of packets from several
//! lanes and buffers (replayed against a `PrintfService` with small caps
//! and a discarding sink, the lanes behaving like devices that reuse the
//! reply descriptor, or not) or one raw message for `format_message`, and
//! checks the service's invariants. A violation panics (the fuzzer's crash).

use amdgpu_dropin_hostcall_printf::message::{DESC_BEGIN, DESC_END, DESC_ID_SHIFT, DESC_LEN_SHIFT};
use amdgpu_dropin_hostcall_printf::{
    format_message, Descriptor, Limits, Output, PrintfService, PRINTF_ERROR,
};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Small caps so the fuzzer reaches every limit quickly.
pub const FUZZ_LIMITS: Limits =
    Limits { max_message_words: 64, max_open_messages: 6, max_buffer_words: 160, max_output_bytes: 4096 };

const LANES: usize = 4;
const BUFFERS: usize = 2;

/// Byte reader that yields zeros when the input runs out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn byte(&mut self) -> u8 {
        let Some((&b, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        b
    }

    fn word(&mut self) -> u64 {
        let mut bytes = [0u8; 8];
        for b in &mut bytes {
            *b = self.byte();
        }
        u64::from_le_bytes(bytes)
    }
}

/// Runs one fuzz input. Panics on an invariant violation.
pub fn run(data: &[u8]) {
    let mut input = Bytes(data);
    if input.byte() & 1 == 1 {
        run_message(input.0);
    } else {
        run_packets(&mut input);
    }
}

fn run_message(data: &[u8]) {
    let words: Vec<u64> = data
        .chunks(8)
        .map(|chunk| {
            let mut bytes = [0u8; 8];
            bytes[..chunk.len()].copy_from_slice(chunk);
            u64::from_le_bytes(bytes)
        })
        .collect();
    if let Ok(formatted) = format_message(&words, FUZZ_LIMITS.max_output_bytes) {
        assert!(formatted.bytes.len() <= FUZZ_LIMITS.max_output_bytes);
    }
}

/// Counts what it is given and drops it.
struct Discard {
    written: Arc<AtomicUsize>,
}

impl Output for Discard {
    fn write(&self, _: usize, _: bool, bytes: &[u8]) -> usize {
        assert!(!bytes.is_empty() && bytes.len() <= FUZZ_LIMITS.max_output_bytes);
        // Relaxed: a counter read by the same thread after the call.
        self.written.fetch_add(bytes.len(), Ordering::Relaxed);
        bytes.len()
    }

    fn warn(&self, _: core::fmt::Arguments<'_>) {}
}

fn run_packets(input: &mut Bytes<'_>) {
    let written = Arc::new(AtomicUsize::new(0));
    let service = PrintfService::new(FUZZ_LIMITS, Discard { written: written.clone() });
    // The descriptor each (buffer, lane) would send next, as a device keeps it.
    let mut next_desc = [[DESC_BEGIN; LANES]; BUFFERS];
    let mut packets = 0;
    while !input.0.is_empty() && packets < 4096 {
        packets += 1;
        let op = input.byte();
        let buffer = usize::from(op >> 7);
        let lane = usize::from(op & 3);
        let flags = input.byte();
        let len = u64::from(flags & 7);
        let mut slot = [0u64; 8];
        slot[0] = match (flags >> 3) & 3 {
            // Like a device: the stored descriptor, END when asked.
            0 | 1 => next_desc[buffer][lane] | if flags & 0x20 != 0 { DESC_END } else { 0 },
            // A fresh BEGIN (the lane abandons its message).
            2 => DESC_BEGIN | if flags & 0x20 != 0 { DESC_END } else { 0 },
            // A raw descriptor with a small id (guessing, stealing ids).
            _ => u64::from(flags >> 5 & 3) | (u64::from(input.byte() & 15) << DESC_ID_SHIFT),
        };
        slot[0] = (slot[0] & !(7 << DESC_LEN_SHIFT)) | (len << DESC_LEN_SHIFT);
        for word in slot.iter_mut().skip(1).take(len as usize) {
            *word = if flags & 0x40 != 0 { input.word() } else { u64::from(input.byte()) };
        }
        let sent = Descriptor::decode(slot[0]);
        let before = written.load(Ordering::Relaxed);
        service.serve_lane(buffer, lane as u32, &mut slot);
        let reply = slot[0];
        if sent.end {
            let printed = written.load(Ordering::Relaxed) - before;
            assert!(
                reply == PRINTF_ERROR || reply == printed as u64,
                "END reply {reply:#x}, printed {printed}"
            );
            next_desc[buffer][lane] = DESC_BEGIN;
        } else {
            let decoded = Descriptor::decode(reply);
            assert!(!decoded.begin && !decoded.end, "continue reply {reply:#x}");
            next_desc[buffer][lane] = reply;
        }
        for key in 0..BUFFERS {
            assert!(service.open_messages(key) <= FUZZ_LIMITS.max_open_messages);
            assert!(service.held_words(key) <= FUZZ_LIMITS.max_buffer_words);
        }
        if op & 0x70 == 0x70 && packets % 64 == 0 {
            service.forget_buffer(buffer);
        }
    }
}
