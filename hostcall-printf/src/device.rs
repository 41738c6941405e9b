//! The device side of PRINTF, for tests that play the device (this crate's,
//! amdgpu-dropin's and the fuzz harness's): a lane's packets as the device
//! libraries send them. Built with the feature `device-model` only.

use crate::format::pack_string;
use crate::message::{DESC_BEGIN, DESC_END, DESC_LEN_SHIFT};
use crate::service::{Output, PrintfService};

/// One lane's slot as the device sends it: descriptor `desc` with LEN set to
/// `data.len()` (at most 7), the data words, and a filler in the words after.
pub fn packet(desc: u64, data: &[u64]) -> [u64; 8] {
    assert!(data.len() <= 7);
    let mut slot = [0xAAAA_AAAA_AAAA_AAAAu64; 8];
    slot[0] = (desc & !(7 << DESC_LEN_SHIFT)) | ((data.len() as u64) << DESC_LEN_SHIFT);
    slot[1..1 + data.len()].copy_from_slice(data);
    slot
}

/// One lane's printf as the device library sends
/// it (BEGIN with the control word, strings in ≤7-word chunks, one
/// argument per packet). `args` holds one entry per argument, each the
/// words of that argument (a string's packed words, or one word).
/// Returns the final reply (the printf return value).
pub fn printf<O: Output>(
    svc: &PrintfService<O>,
    key: usize,
    lane: u32,
    control: u64,
    fmt: &[u8],
    args: &[Vec<u64>],
) -> u64 {
    let mut desc = DESC_BEGIN;
    let send = |desc: &mut u64, data: &[u64], last: bool| {
        let mut slot = packet(*desc | if last { DESC_END } else { 0 }, data);
        svc.serve_lane(key, lane, &mut slot);
        *desc = slot[0];
        slot[0]
    };
    let mut reply = send(&mut desc, &[control], false);
    let fmt_words = pack_string(fmt);
    let chunks: Vec<&[u64]> = fmt_words.chunks(7).collect();
    for (i, chunk) in chunks.iter().enumerate() {
        reply = send(&mut desc, chunk, args.is_empty() && i + 1 == chunks.len());
    }
    for (a, arg) in args.iter().enumerate() {
        let chunks: Vec<&[u64]> = arg.chunks(7).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            reply = send(&mut desc, chunk, a + 1 == args.len() && i + 1 == chunks.len());
        }
    }
    reply
}
