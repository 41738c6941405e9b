//! Hostcall service 2, PRINTF: device printf as modern ROCm device libraries
//! speak it.
//!
//! # Protocol (per lane)
//! slot[0] is a descriptor: bit 0 BEGIN, bit 1 END, bits 5..7 LEN (data
//! words in slot[1..8]), bits 8..63 the message id. A printf call is one
//! message spread over several packets:
//!
//! * BEGIN: the host opens a message, appends the LEN data words and answers
//!   with the descriptor, BEGIN cleared and the new id in the id field. The
//!   device reuses that descriptor for its next packets.
//! * neither flag: a continuation; the words are appended to message `id`;
//!   the descriptor is echoed back.
//! * END: the last words are appended, the message is formatted
//!   (`format::format_message`) and handed whole to the printf sink
//!   registered for the buffer (or for every buffer), else written with one
//!   `write(2)` to fd 1, or fd 2 when control bit 0 is set; slot[0] = bytes
//!   written (as u64), or -1 (`u64::MAX`) on any error.
//!
//! # Errors never crash and never read outside the message
//! A refused non-END packet (unknown id, another lane's id, message cap
//! passed) is answered with `message::POISON_DESCRIPTOR`: BEGIN/END clear
//! and an id the host never hands out. The device carries on with it, every
//! further packet is refused the same way, and the END packet gets -1.
//! A message whose content is bad (see `format::FormatError`) prints nothing
//! and returns -1. Each kind of error is logged once (AMD_LOG_LEVEL ≥ 2).
//!
//! # Memory
//! Bounded per buffer by `Limits` (see `message`): 64 KiB of words per
//! message, 65536 open messages and 32 MiB of words per buffer by default,
//! evicting the least recently used message when full (e.g. BEGINs whose
//! waves never came back). `forget_buffer` drops a buffer's state.
//!
//! # Thread safety
//! `PrintfService` is `Send + Sync`. One mutex guards the message tables;
//! it is held only to look up and append at most 7 words, never while
//! formatting or writing, so a slow stdout never blocks other lanes'
//! assembly.

mod cfmt;
pub mod format;
pub mod message;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

pub use format::{format_message, pack_string, FormatError, Formatted};
pub use message::{AssemblyError, Descriptor, Limits, MessageTable, Step, POISON_DESCRIPTOR};

use super::handlers::{self, Handler};
use super::ids::SERVICE_PRINTF;
use crate::log::Level;

/// The value returned to the device for a failed message (-1).
pub const PRINTF_ERROR: u64 = u64::MAX;

/// The stream a message is for, as a registered sink is told: standard output.
pub const STREAM_STDOUT: u32 = 1;
/// The stream of a message with control bit 0 set: standard error.
pub const STREAM_STDERR: u32 = 2;

/// Where formatted messages go: `(to_stderr, bytes) -> bytes written`.
pub type Sink = Box<dyn Fn(bool, &[u8]) -> usize + Send + Sync>;

/// The PRINTF service. One per listener; serves every buffer.
pub struct PrintfService {
    limits: Limits,
    /// buffer key → its open messages.
    tables: Mutex<HashMap<usize, MessageTable>>,
    sink: Option<Sink>,
    /// Bit per error kind already logged.
    logged: AtomicU32,
}

impl Default for PrintfService {
    fn default() -> Self {
        PrintfService::new()
    }
}

impl core::fmt::Debug for PrintfService {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PrintfService").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl PrintfService {
    /// Default limits, output to file descriptors 1 and 2.
    pub fn new() -> PrintfService {
        PrintfService::with_output(Limits::DEFAULT, None)
    }

    /// Custom limits, and a custom sink instead of fds 1/2 (tests, fuzzing).
    pub fn with_output(limits: Limits, sink: Option<Sink>) -> PrintfService {
        PrintfService { limits, tables: Mutex::new(HashMap::new()), sink, logged: AtomicU32::new(0) }
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
        let written = match &self.sink {
            Some(sink) => sink(formatted.stderr, &formatted.bytes),
            None => write_out(buffer_key, formatted.stderr, &formatted.bytes),
        };
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
            crate::log!(Level::Warning, "{args}");
        }
    }
}

/// Hands one whole message to the sink registered for `buffer_key` (or for
/// every buffer), else writes it to fd 1 or 2 in one write (`log::write_out`,
/// which notes a reader gone). Returns the bytes written.
fn write_out(buffer_key: usize, stderr: bool, bytes: &[u8]) -> usize {
    if let Some(call) = handlers::table().enter(SERVICE_PRINTF, buffer_key) {
        if let Handler::PrintfSink { function, user_data } = call.registration().handler {
            let stream = if stderr { STREAM_STDERR } else { STREAM_STDOUT };
            // SAFETY: the registration contract: `function` has the sink
            // signature and may be called with `user_data` until it is
            // unregistered (this call is counted, so unregister waits for
            // it); `bytes` is live for `bytes.len()` reads during the call.
            return unsafe {
                function(
                    user_data as *mut _,
                    buffer_key as *mut _,
                    stream,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                )
            };
        }
    }
    let fd = if stderr { libc::STDERR_FILENO } else { libc::STDOUT_FILENO };
    crate::log::write_out(fd, bytes)
}

fn assembly_bit(error: AssemblyError) -> u32 {
    1 << (error as u32)
}

fn format_bit(error: FormatError) -> u32 {
    1 << (8 + error as u32)
}

#[cfg(test)]
mod tests {
    use super::message::{DESC_BEGIN, DESC_END, DESC_ID_SHIFT, DESC_LEN_SHIFT};
    use super::*;
    use crate::hostcall::services::handlers::HandlerError;
    use std::sync::{Arc, Mutex as StdMutex};

    type Captured = Arc<StdMutex<Vec<(bool, Vec<u8>)>>>;

    fn service(limits: Limits) -> (PrintfService, Captured) {
        let captured: Captured = Arc::default();
        let sink_captured = captured.clone();
        let sink: Sink = Box::new(move |stderr, bytes| {
            sink_captured.lock().unwrap().push((stderr, bytes.to_vec()));
            bytes.len()
        });
        (PrintfService::with_output(limits, Some(sink)), captured)
    }

    fn packet(desc: u64, data: &[u64]) -> [u64; 8] {
        assert!(data.len() <= 7);
        let mut slot = [0xAAAA_AAAA_AAAA_AAAAu64; 8];
        slot[0] = (desc & !(7 << DESC_LEN_SHIFT)) | ((data.len() as u64) << DESC_LEN_SHIFT);
        slot[1..1 + data.len()].copy_from_slice(data);
        slot
    }

    /// A device-side encoder: one lane's printf as the device library sends
    /// it (BEGIN with the control word, strings in ≤7-word chunks, one
    /// argument per packet). `args` holds one entry per argument, each the
    /// words of that argument (a string's packed words, or one word).
    /// Returns the final reply (the printf return value).
    fn device_printf(
        svc: &PrintfService,
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

    #[test]
    fn service_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<PrintfService>();
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

    /// One call the registered test sink saw: (user, buffer, stream, bytes).
    type SinkCall = (usize, usize, u32, Vec<u8>);
    static SEEN: StdMutex<Vec<SinkCall>> = StdMutex::new(Vec::new());

    unsafe extern "C-unwind" fn record(
        user: *mut core::ffi::c_void,
        buffer: *mut core::ffi::c_void,
        stream: u32,
        bytes: *const core::ffi::c_char,
        length: usize,
    ) -> usize {
        // SAFETY: the service passes `length` readable bytes.
        let bytes = unsafe { core::slice::from_raw_parts(bytes.cast::<u8>(), length) };
        SEEN.lock().unwrap().push((user as usize, buffer as usize, stream, bytes.to_vec()));
        // user 2 is a sink that fails after one byte.
        if user as usize == 2 {
            1
        } else {
            length
        }
    }

    #[test]
    fn a_registered_sink_gets_each_whole_message_with_its_stream() {
        let table = handlers::table();
        let (own, global_only) = (0x5150_1000usize, 0x5150_2000usize);
        let svc = PrintfService::new();
        table.register_printf_sink(Some(own), record, 1).unwrap();
        assert_eq!(
            table.register_printf_sink(Some(own), record, 9),
            Err(HandlerError::AlreadyRegistered),
            "one sink per scope"
        );
        assert_eq!(device_printf(&svc, own, 0, 0, b"out %d\n", &[vec![7]]), 6);
        assert_eq!(device_printf(&svc, own, 3, 1, b"err", &[]), 3);
        table.register_printf_sink(Some(global_only), record, 2).unwrap();
        assert_eq!(device_printf(&svc, global_only, 0, 0, b"short", &[]), PRINTF_ERROR, "sink wrote 1 byte");
        let seen: Vec<_> = SEEN.lock().unwrap().drain(..).collect();
        assert_eq!(
            seen,
            vec![
                (1, own, STREAM_STDOUT, b"out 7\n".to_vec()),
                (1, own, STREAM_STDERR, b"err".to_vec()),
                (2, global_only, STREAM_STDOUT, b"short".to_vec()),
            ]
        );
        table.unregister_printf_sink(Some(own)).unwrap();
        table.unregister_printf_sink(Some(global_only)).unwrap();
        assert_eq!(table.unregister_printf_sink(Some(own)), Err(HandlerError::NotRegistered));
        assert!(table.enter(SERVICE_PRINTF, own).is_none(), "no sink left for the buffer");
        assert_eq!(
            table.unregister(SERVICE_PRINTF, Some(own)),
            Err(HandlerError::ReservedService(SERVICE_PRINTF)),
            "a sink is not a handler"
        );
    }

    #[test]
    fn write_failure_is_an_error() {
        let sink: Sink = Box::new(|_, bytes| bytes.len() / 2);
        let svc = PrintfService::with_output(Limits::DEFAULT, Some(sink));
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
