//! The `extern "C"` surface: only exports, argument checks, the panic boundary
//! and status conversion. Logic lives in `crate::vmem` and `crate::hostcall`.
//!
//! Pointer vocabulary used in every `# Safety` section: a *valid* pointer is
//! either NULL (always rejected with a clear error, never dereferenced) or
//! meets the requirements of `core::ptr::read`/`write` for its type.

pub(crate) mod panic;

#[cfg(feature = "iree-vmem")]
pub mod vmem;

#[cfg(feature = "rocclr-hostcall")]
pub mod hostcall;

#[cfg(feature = "rocclr-hostcall")]
pub mod hostcall_ext;

#[cfg(feature = "rocclr-hostcall")]
pub mod hostcall_protocol;

#[cfg(feature = "test-hooks")]
mod test_hooks;

#[cfg(feature = "rocclr-hostcall")]
pub mod hostcall_counters;
