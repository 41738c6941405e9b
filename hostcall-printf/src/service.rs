//! `PrintfService`: the per-buffer message tables behind one lock, the
//! formatting, and the reply words; output and diagnostics through `Output`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::format::{format_message, FormatError};
use crate::message::{AssemblyError, Descriptor, Limits, MessageTable, Step, POISON_DESCRIPTOR};

/// The value returned to the device for a failed message (-1).
pub const PRINTF_ERROR: u64 = u64::MAX;

/// Where a service's messages and diagnostics go.
pub trait Output: Send + Sync {
    /// Writes one whole formatted message of buffer `buffer_key`, to stderr
    /// when `stderr` (control bit 0), else to stdout; returns the bytes
    /// written (fewer than `bytes.len()` fails the message).
    fn write(&self, buffer_key: usize, stderr: bool, bytes: &[u8]) -> usize;
    /// A diagnostic (a refused packet, a bad message, a failed write): each
    /// kind of error is told once per service.
    fn warn(&self, args: core::fmt::Arguments<'_>);
}

/// The PRINTF service. One per listener; serves every buffer.
pub struct PrintfService<O> {
    limits: Limits,
    /// buffer key → its open messages.
    tables: Mutex<HashMap<usize, MessageTable>>,
    output: O,
    /// Bit per error kind already told.
    logged: AtomicU32,
}

impl<O> core::fmt::Debug for PrintfService<O> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PrintfService").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl<O: Output> PrintfService<O> {
    /// A service with these limits (`Limits::DEFAULT` for the listener)
    /// writing to `output`.
    pub fn new(limits: Limits, output: O) -> PrintfService<O> {
        PrintfService { limits, tables: Mutex::new(HashMap::new()), output, logged: AtomicU32::new(0) }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Serves one lane's packet: `slot` is that lane's 8 payload words,
    /// read from device memory by the caller, who writes them back after.
    pub fn serve_lane(&self, buffer_key: usize, lane: u32, slot: &mut [u64; 8]) {
        let word = slot[0];
        let desc = Descriptor::decode(word);
        let data = &slot[1..1 + desc.len];
        let step = {
            let mut tables = self.lock();
            let table = tables.entry(buffer_key).or_insert_with(|| MessageTable::new(self.limits));
            table.packet(lane, desc, data)
        };
        slot[0] = match step {
            Ok(Step::Continue { id }) => Descriptor::reply(word, id),
            Ok(Step::Complete(words)) => self.print(buffer_key, &words),
            Err(error) => {
                self.log_once(
                    assembly_bit(error),
                    format_args!("printf: refused packet (lane {lane}): {error:?}"),
                );
                if desc.end {
                    PRINTF_ERROR
                } else {
                    POISON_DESCRIPTOR
                }
            }
        };
    }

    /// Drops every open message of a buffer (called when it is disabled).
    pub fn forget_buffer(&self, buffer_key: usize) {
        self.lock().remove(&buffer_key);
    }

    /// Open messages of a buffer (diagnostics and tests).
    pub fn open_messages(&self, buffer_key: usize) -> usize {
        self.lock().get(&buffer_key).map_or(0, MessageTable::open_messages)
    }

    /// Data words held by a buffer's open messages (diagnostics and tests).
    pub fn held_words(&self, buffer_key: usize) -> usize {
        self.lock().get(&buffer_key).map_or(0, MessageTable::held_words)
    }

    /// Formats and writes a complete message; returns the reply word.
    fn print(&self, buffer_key: usize, words: &[u64]) -> u64 {
        let formatted = match format_message(words, self.limits.max_output_bytes) {
            Ok(formatted) => formatted,
            Err(error) => {
                self.log_once(format_bit(error), format_args!("printf: bad message: {error:?}"));
                return PRINTF_ERROR;
            }
        };
        if formatted.bytes.is_empty() {
            return 0;
        }
        let written = self.output.write(buffer_key, formatted.stderr, &formatted.bytes);
        if written != formatted.bytes.len() {
            self.log_once(1 << 31, format_args!("printf: output write failed after {written} bytes"));
            return PRINTF_ERROR;
        }
        written as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, MessageTable>> {
        // A panic while holding the lock cannot leave a table half-updated in
        // a way that breaks memory safety; keep serving.
        self.tables.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn log_once(&self, bit: u32, args: core::fmt::Arguments<'_>) {
        // Relaxed: the bit only dedups diagnostics; no data is published.
        if self.logged.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
            self.output.warn(args);
        }
    }
}

fn assembly_bit(error: AssemblyError) -> u32 {
    1 << (error as u32)
}

fn format_bit(error: FormatError) -> u32 {
    1 << (8 + error as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{packet, printf as device_printf};
    use crate::format::pack_string;
    use crate::message::{DESC_BEGIN, DESC_END, DESC_ID_SHIFT};
    use std::sync::{Arc, Mutex as StdMutex};

    type Captured = Arc<StdMutex<Vec<(bool, Vec<u8>)>>>;

    /// Keeps every message; writes `written(len)` bytes of each.
    struct Capture {
        captured: Captured,
        written: fn(usize) -> usize,
    }

    impl Output for Capture {
        fn write(&self, _: usize, stderr: bool, bytes: &[u8]) -> usize {
            self.captured.lock().unwrap().push((stderr, bytes.to_vec()));
            (self.written)(bytes.len())
        }
        fn warn(&self, _: core::fmt::Arguments<'_>) {}
    }

    fn service(limits: Limits) -> (PrintfService<Capture>, Captured) {
        let captured: Captured = Arc::default();
        (PrintfService::new(limits, Capture { captured: captured.clone(), written: |len| len }), captured)
    }

    #[test]
    fn service_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<PrintfService<Capture>>();
    }

    #[test]
    fn begin_reply_carries_id_and_clears_begin() {
        let (svc, _) = service(Limits::DEFAULT);
        let mut slot = packet(DESC_BEGIN, &[0]);
        svc.serve_lane(1, 0, &mut slot);
        let reply = Descriptor::decode(slot[0]);
        assert!(!reply.begin && !reply.end);
        assert_eq!(reply.id, 1);
        assert_eq!(reply.len, 1);
        // Other words of the slot are left alone.
        assert_eq!(slot[2], 0xAAAA_AAAA_AAAA_AAAA);
        assert_eq!(svc.open_messages(1), 1);
    }

    #[test]
    fn full_printf_one_argument_per_packet() {
        let (svc, out) = service(Limits::DEFAULT);
        let args = vec![
            vec![42],
            pack_string(b"a string longer than fifty-six bytes, to need two chunks!"),
            vec![2.5f64.to_bits()],
        ];
        let ret = device_printf(
            &svc,
            7,
            3,
            0,
            b"value %d, %s, %.1f -- and a format string that also spans more than seven words\n",
            &args,
        );
        let expected = b"value 42, a string longer than fifty-six bytes, to need two chunks!, 2.5 -- and a format string that also spans more than seven words\n";
        assert_eq!(ret, expected.len() as u64);
        assert_eq!(*out.lock().unwrap(), vec![(false, expected.to_vec())]);
        assert_eq!(svc.open_messages(7), 0);
    }

    #[test]
    fn packed_seven_words_per_packet_and_stderr() {
        let (svc, out) = service(Limits::DEFAULT);
        let mut words = vec![1u64];
        words.extend(pack_string(b"%d-%d-%d-%s|"));
        words.extend([1, 2, 3]);
        words.extend(pack_string(b"xyz"));
        let mut desc = DESC_BEGIN;
        let chunks: Vec<&[u64]> = words.chunks(7).collect();
        let mut ret = 0;
        for (i, chunk) in chunks.iter().enumerate() {
            let mut slot = packet(desc | if i + 1 == chunks.len() { DESC_END } else { 0 }, chunk);
            svc.serve_lane(0, 0, &mut slot);
            desc = slot[0];
            ret = slot[0];
        }
        assert_eq!(ret, 10);
        assert_eq!(*out.lock().unwrap(), vec![(true, b"1-2-3-xyz|".to_vec())]);
    }

    #[test]
    fn single_packet_message_and_empty_output() {
        let (svc, out) = service(Limits::DEFAULT);
        let mut data = vec![0u64];
        data.extend(pack_string(b"hi\n"));
        let mut slot = packet(DESC_BEGIN | DESC_END, &data);
        svc.serve_lane(0, 0, &mut slot);
        assert_eq!(slot[0], 3);
        let mut slot = packet(DESC_BEGIN | DESC_END, &[0, 0]);
        svc.serve_lane(0, 0, &mut slot);
        assert_eq!(slot[0], 0);
        assert_eq!(out.lock().unwrap().len(), 1, "an empty message writes nothing");
        assert_eq!(svc.open_messages(0), 0);
    }

    #[test]
    fn interleaved_lanes_keep_messages_apart() {
        let (svc, out) = service(Limits::DEFAULT);
        // 4 lanes of one wave send packets in lockstep, as a wave does.
        let lanes = 4u32;
        let messages: Vec<Vec<u64>> = (0..lanes)
            .map(|lane| {
                let mut w = vec![0u64];
                w.extend(pack_string(
                    format!("lane %d says %s{}\n", "!".repeat(lane as usize * 9)).as_bytes(),
                ));
                w.push(u64::from(lane));
                w.extend(pack_string(format!("hello from {lane}").as_bytes()));
                w
            })
            .collect();
        let mut descs = vec![DESC_BEGIN; lanes as usize];
        let mut offsets = vec![0usize; lanes as usize];
        let mut rets = vec![0u64; lanes as usize];
        // Each round: every unfinished lane sends its next chunk (1 word for the
        // first packet, then 3 words at a time).
        while offsets.iter().zip(&messages).any(|(o, m)| o < &m.len()) {
            for lane in (0..lanes as usize).rev() {
                let (o, m) = (offsets[lane], &messages[lane]);
                if o >= m.len() {
                    continue;
                }
                let take = if o == 0 { 1 } else { 3.min(m.len() - o) };
                let last = o + take == m.len();
                let mut slot = packet(descs[lane] | if last { DESC_END } else { 0 }, &m[o..o + take]);
                svc.serve_lane(9, lane as u32, &mut slot);
                descs[lane] = slot[0];
                rets[lane] = slot[0];
                offsets[lane] += take;
            }
        }
        let out = out.lock().unwrap();
        assert_eq!(out.len(), 4);
        for lane in 0..lanes {
            let line = format!("lane {lane} says hello from {lane}{}\n", "!".repeat(lane as usize * 9));
            assert!(out.iter().any(|(_, b)| b == line.as_bytes()), "missing {line:?}");
            assert_eq!(rets[lane as usize], line.len() as u64);
        }
    }

    #[test]
    fn ids_are_reused_after_end() {
        let (svc, _) = service(Limits::DEFAULT);
        for _ in 0..3 {
            let mut slot = packet(DESC_BEGIN, &[0]);
            svc.serve_lane(0, 0, &mut slot);
            assert_eq!(Descriptor::decode(slot[0]).id, 1);
            let mut slot = packet(slot[0] | DESC_END, &pack_string(b"x"));
            svc.serve_lane(0, 0, &mut slot);
            assert_eq!(slot[0], 1);
        }
    }

    #[test]
    fn buffers_are_separate_and_forgettable() {
        let (svc, _) = service(Limits::DEFAULT);
        let mut slot = packet(DESC_BEGIN, &[0]);
        svc.serve_lane(100, 0, &mut slot);
        let reply = slot[0];
        // The same id on another buffer is unknown there.
        let mut other = packet(reply | DESC_END, &pack_string(b"x"));
        svc.serve_lane(200, 0, &mut other);
        assert_eq!(other[0], PRINTF_ERROR);
        assert_eq!(svc.open_messages(100), 1);
        svc.forget_buffer(100);
        assert_eq!(svc.open_messages(100), 0);
        let mut slot = packet(reply | DESC_END, &pack_string(b"x"));
        svc.serve_lane(100, 0, &mut slot);
        assert_eq!(slot[0], PRINTF_ERROR);
    }

    #[test]
    fn refused_continuations_are_poisoned_until_end() {
        let (svc, out) = service(Limits::DEFAULT);
        // Unknown id, not last: poison descriptor.
        let mut slot = packet(5 << DESC_ID_SHIFT, &[1, 2]);
        svc.serve_lane(0, 0, &mut slot);
        assert_eq!(slot[0], POISON_DESCRIPTOR);
        // The device continues with the poison descriptor.
        let mut slot = packet(slot[0], &[3]);
        svc.serve_lane(0, 0, &mut slot);
        assert_eq!(slot[0], POISON_DESCRIPTOR);
        let mut slot = packet(slot[0] | DESC_END, &[3]);
        svc.serve_lane(0, 0, &mut slot);
        assert_eq!(slot[0], PRINTF_ERROR);
        // Another lane's id: refused, and the owner's message survives.
        let mut begin = packet(DESC_BEGIN, &[0]);
        svc.serve_lane(0, 1, &mut begin);
        let mut thief = packet(begin[0], &[0x41]);
        svc.serve_lane(0, 2, &mut thief);
        assert_eq!(thief[0], POISON_DESCRIPTOR);
        let mut thief = packet(begin[0] | DESC_END, &[0x41]);
        svc.serve_lane(0, 2, &mut thief);
        assert_eq!(thief[0], PRINTF_ERROR);
        let mut end = packet(begin[0] | DESC_END, &pack_string(b"mine"));
        svc.serve_lane(0, 1, &mut end);
        assert_eq!(end[0], 4);
        assert_eq!(*out.lock().unwrap(), vec![(false, b"mine".to_vec())]);
    }

    #[test]
    fn oversized_message_fails_and_memory_is_released() {
        let limits = Limits { max_message_words: 16, ..Limits::DEFAULT };
        let (svc, out) = service(limits);
        let long = vec![u64::from_le_bytes(*b"xxxxxxxx"); 20];
        let ret = device_printf(&svc, 0, 0, 0, b"%s", &[long]);
        assert_eq!(ret, PRINTF_ERROR);
        assert_eq!(svc.open_messages(0), 0);
        assert!(out.lock().unwrap().is_empty());
        // Exactly at the cap is fine: control + 1 format word + 14 string words.
        let mut s = vec![u64::from_le_bytes(*b"yyyyyyyy"); 13];
        s.push(0);
        assert_eq!(device_printf(&svc, 0, 0, 0, b"%s", &[s]), 104);
    }

    #[test]
    fn abandoned_begins_are_evicted() {
        let limits = Limits { max_open_messages: 8, ..Limits::DEFAULT };
        let (svc, _) = service(limits);
        for i in 0..1000 {
            let mut slot = packet(DESC_BEGIN, &[0]);
            svc.serve_lane(0, i % 64, &mut slot);
            assert!(!Descriptor::decode(slot[0]).begin);
        }
        assert_eq!(svc.open_messages(0), 8);
        // Printing still works.
        assert_eq!(device_printf(&svc, 0, 0, 0, b"ok", &[]), 2);
    }

    #[test]
    fn bad_content_returns_error_and_prints_nothing() {
        let (svc, out) = service(Limits::DEFAULT);
        assert_eq!(device_printf(&svc, 0, 0, 2, b"x", &[]), PRINTF_ERROR);
        assert_eq!(device_printf(&svc, 0, 0, 0, b"%d %d", &[vec![1]]), PRINTF_ERROR);
        assert_eq!(device_printf(&svc, 0, 0, 0, b"%ls", &[pack_string(b"w")]), PRINTF_ERROR);
        // BEGIN|END with no words at all.
        let mut slot = packet(DESC_BEGIN | DESC_END, &[]);
        svc.serve_lane(0, 0, &mut slot);
        assert_eq!(slot[0], PRINTF_ERROR);
        // A format without NUL.
        let mut slot = packet(DESC_BEGIN | DESC_END, &[0, u64::MAX]);
        svc.serve_lane(0, 0, &mut slot);
        assert_eq!(slot[0], PRINTF_ERROR);
        assert!(out.lock().unwrap().is_empty());
        assert_eq!(svc.open_messages(0), 0);
    }

    #[test]
    fn write_failure_is_an_error() {
        let svc =
            PrintfService::new(Limits::DEFAULT, Capture { captured: Arc::default(), written: |len| len / 2 });
        assert_eq!(device_printf(&svc, 0, 0, 0, b"abcd", &[]), PRINTF_ERROR);
    }

    #[test]
    fn concurrent_lanes_from_many_threads() {
        let (svc, out) = service(Limits::DEFAULT);
        let svc = Arc::new(svc);
        let threads: Vec<_> = (0..8u32)
            .map(|t| {
                let svc = svc.clone();
                std::thread::spawn(move || {
                    for i in 0..200u64 {
                        let ret = device_printf(
                            &svc,
                            (t % 2) as usize,
                            t,
                            0,
                            b"thread %d line %lu %s\n",
                            &[vec![u64::from(t)], vec![i], pack_string(b"payload")],
                        );
                        assert_eq!(ret, format!("thread {t} line {i} payload\n").len() as u64);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let out = out.lock().unwrap();
        assert_eq!(out.len(), 1600);
        for t in 0..8 {
            let lines: Vec<_> =
                out.iter().filter(|(_, b)| b.starts_with(format!("thread {t} ").as_bytes())).collect();
            assert_eq!(lines.len(), 200);
            for (i, (_, b)) in lines.iter().enumerate() {
                assert_eq!(*b, format!("thread {t} line {i} payload\n").into_bytes());
            }
        }
        assert_eq!(svc.open_messages(0) + svc.open_messages(1), 0);
    }
}
