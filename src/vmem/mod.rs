//! IREE vmem: memory-pool lookup and the triple-mapped ringbuffer of
//! `iree/hal/drivers/amdgpu/util/vmem.h`, as safe Rust over the HSA functions
//! identified in the caller's table.
//!
//! * `abi` — the C-visible types (layouts pinned);
//! * `libhsa_table` — finding the HSA functions in the caller's table by
//!   identity (or by name with `libhsa-static`), and calling them;
//! * `pool` — pool lookup; `ringbuffer` — create/release with exact undo;
//! * `topology` — access descriptors per access mode.
//!
//! The `extern "C"` exports live in `crate::ffi::vmem`.

pub mod abi;
pub mod libhsa_table;
pub mod pool;
pub mod ringbuffer;
pub mod topology;

#[cfg(test)]
pub(crate) mod fake;
