//! amdgpu-dropin: Rust replacements, with the same C ABI, for
//!
//! * IREE's AMDGPU virtual-memory utilities (`iree/hal/drivers/amdgpu/util/vmem.h`):
//!   memory-pool lookup and the triple-mapped "magic" ringbuffer;
//! * ROCclr's hostcall host side (`rochostcall.hpp`): the listener that serves
//!   requests GPU waves post into lock-free packet stacks.
//!
//! Layering: `ffi/` holds only the `extern "C"` exports (argument checks, the
//! panic boundary, status conversion); `vmem/` and `hostcall/` hold the logic;
//! `hsa` is the one place HSA symbols are resolved and `status` the one place
//! HSA statuses become IREE statuses. Imports name the same folder with
//! `super::` and everything else from `crate::`. Two crates of the workspace
//! hold what the tests drive directly: the hostcall's lock-free,
//! model-checked core (`hostcall_core`, `hostcall-core/`: both wire
//! protocols, the gates, the helper bell) and PRINTF's assembly and
//! formatting (`hostcall_printf`, `hostcall-printf/`); docs/architecture.md
//! says why. `unsafe` is used where C or device memory is met, in seventeen
//! files here: the exports (`ffi/`), libc (`sys`), HSA calls (`hsa`,
//! `vmem/libhsa_table.rs`, `hostcall/listener/doorbell.rs`, DEVMEM), IREE's
//! status allocator found at run time (`status`), a caller's buffer handed
//! to the core's view of device memory (`hostcall/registry.rs`), the
//! fork-local statics (`hostcall/process.rs`), the lock-free once-only values
//! (`race_once`), and calls of C handlers, printf sinks and host functions
//! (`hostcall/services/`); device-shared memory itself is read and written
//! in the core (through its `protocol/device_words.rs`), `snprintf` called in
//! `hostcall-printf/src/cfmt.rs`. Every block carries a `// SAFETY:` comment
//! (clippy enforces it, here and in both crates).
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
// A build with one half only (or the static libhsa) leaves helpers of the
// other unused; the full build is checked for dead code.
#![cfg_attr(
    any(not(all(feature = "iree-vmem", feature = "rocclr-hostcall")), feature = "libhsa-static"),
    allow(dead_code)
)]

#[cfg(not(panic = "unwind"))]
compile_error!(
    "amdgpu-dropin needs panic = \"unwind\": it catches every panic at the C boundary and in \
     the listener (see the panic policy in src/lib.rs); with panic = \"abort\" a bug would abort \
     the host process"
);

// The C ABI is the product; every Rust item is crate-private. The loom
// models, the fuzz harness and the benchmarks use the crates that hold what
// they test (`hostcall-core/`, `printf/`), not this one. (`#[no_mangle]`
// exports leave the library whatever the visibility of their module.)
mod ffi;
mod hsa;
mod log;
// Lock-free once-only values and lists: process-wide state that survives fork.
mod race_once;
// Crate-private macro, reachable as `crate::log!`.
use log::log;
mod status;
mod sys;

#[cfg(feature = "iree-vmem")]
mod vmem;

#[cfg(feature = "rocclr-hostcall")]
mod hostcall;
