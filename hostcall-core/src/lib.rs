//! The lock-free, model-checked core of amdgpu-dropin's hostcall listener:
//! the two wire protocols (`protocol`), the registration gate (`gate`), the
//! call gate of registered handlers (`call_gate`) and the helper thread's
//! bell (`helper_bell`), all written against the `sync` shim, which is
//! `std`'s atomics and locks, or loom's under `--cfg loom`. The loom models
//! (`tests/loom_*.rs`) check exactly the code the listener runs, through
//! this crate's public items; the product crate (amdgpu-dropin) depends on
//! it as any other crate would.
//!
//! No thread, global, HSA call or log line lives here: the listener owns
//! those. `unsafe` is used where device-shared memory is met (`protocol/`,
//! all of it through `protocol/device_words.rs`) and for the poll callback
//! (`protocol/poll.rs`); every block carries a `// SAFETY:` comment (clippy
//! enforces it).
//!
//! Not a stable API: anything here may change in any release; users call
//! the C headers of amdgpu-dropin.
#![deny(unsafe_op_in_unsafe_fn)]
// C-facing names mirror the originals (amdgpu_dropin_hostcall_packet_t).
#![allow(non_camel_case_types)]
// Under `--cfg loom` the device-memory halves of the buffer views are not
// built, and helpers only they use are left unused.
#![cfg_attr(loom, allow(dead_code))]

pub mod call_gate;
pub mod gate;
pub mod helper_bell;
pub mod protocol;
mod sync;
