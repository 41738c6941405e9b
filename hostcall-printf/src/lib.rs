//! The hostcall PRINTF service (id 2) without its output: device printf as
//! modern ROCm device libraries speak it, assembled per lane and buffer,
//! parsed and formatted. A crate of its own so that the fuzz target
//! (`fuzz/`) and the randomized tests drive the same code the listener runs;
//! where messages and diagnostics go is the caller's (`Output`):
//! amdgpu-dropin hands them to a registered printf sink or fd 1/2, and to
//! its log.
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
//!   (`format::format_message`) and handed whole to the `Output`, for
//!   stdout, or stderr when control bit 0 is set; slot[0] = bytes written
//!   (as u64), or -1 (`u64::MAX`) on any error.
//!
//! # Errors never crash and never read outside the message
//! A refused non-END packet (unknown id, another lane's id, message cap
//! passed) is answered with `message::POISON_DESCRIPTOR`: BEGIN/END clear
//! and an id the host never hands out. The device carries on with it, every
//! further packet is refused the same way, and the END packet gets -1.
//! A message whose content is bad (see `format::FormatError`) prints nothing
//! and returns -1. Each kind of error is told to `Output::warn` once.
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
//!
//! `unsafe` is used in one file, `cfmt.rs` (the C library's `snprintf`),
//! each block with a `// SAFETY:` comment (clippy enforces it). Not a
//! stable API: use amdgpu-dropin's C headers.
#![deny(unsafe_op_in_unsafe_fn)]

mod cfmt;
#[cfg(any(test, feature = "device-model"))]
pub mod device;
pub mod format;
pub mod message;
mod service;

pub use format::{format_message, pack_string, FormatError, Formatted};
pub use message::{AssemblyError, Descriptor, Limits, MessageTable, Step, POISON_DESCRIPTOR};
pub use service::{Output, PrintfService, PRINTF_ERROR};
