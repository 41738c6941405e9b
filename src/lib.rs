//! amdgpu-dropin: Rust replacements, with the same C ABI, for
//!
//! * IREE's AMDGPU virtual-memory utilities (`iree/hal/drivers/amdgpu/util/vmem.h`):
//!   memory-pool lookup and the triple-mapped "magic" ringbuffer;
//! * ROCclr's hostcall host side (`rochostcall.hpp`): the listener that serves
//!   requests GPU waves post into lock-free packet stacks.
//!
//! Layering: `ffi/` holds only the `extern "C"` exports (argument checks, the
//! panic boundary, status conversion); `vmem/` and `hostcall/` hold the safe
//! logic; `hsa` is the one place HSA symbols are resolved and `status` the one
//! place HSA statuses become IREE statuses. `unsafe` lives in small modules and
//! every block carries a `// SAFETY:` comment.
//!
//! # Panic policy
//!
//! No panic ever crosses the C ABI and no bug of ours aborts the process that
//! loaded us: every export runs inside `ffi_boundary!` (a panic becomes the
//! export's failure value and a log line), every hostcall service lane and
//! every listener loop catches its own panics (the lane is answered with -1,
//! the listener keeps serving). All of that needs unwinding, so building with
//! `panic = "abort"` is refused at compile time (below): with abort, a panic
//! would kill the host process instead of failing one call.
#![deny(unsafe_op_in_unsafe_fn)]
// C-facing names mirror the originals (iree_status_t, hsa_agent_t, ...).
#![allow(non_camel_case_types)]

#[cfg(not(panic = "unwind"))]
compile_error!(
    "amdgpu-dropin needs panic = \"unwind\": it catches every panic at the C boundary and in \
     the listener (see the panic policy in src/lib.rs); with panic = \"abort\" a bug would abort \
     the host process"
);

pub mod ffi;
pub mod hsa;
pub mod log;
// Crate-private macros, reachable as `crate::log!` / `crate::ffi_boundary!`.
#[allow(unused_imports)] // unused in a build without the hostcall half
pub(crate) use ffi::panic::ffi_boundary;
pub(crate) use log::log;
pub mod status;
mod sys;

#[cfg(feature = "iree-vmem")]
pub mod vmem;

#[cfg(feature = "rocclr-hostcall")]
pub mod hostcall;
