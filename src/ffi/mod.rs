//! The `extern "C"` surface: only exports, argument checks, the panic boundary
//! and status conversion. Logic lives in `crate::vmem` and `crate::hostcall`.
//!
//! Pointer vocabulary used in every `# Safety` section: a *valid* pointer is
//! either NULL (always rejected with a clear error, never dereferenced) or
//! meets the requirements of `core::ptr::read`/`write` for its type.

// `ffi_boundary!` by its bare name in the export modules below.
#[macro_use]
pub mod panic;

#[cfg(feature = "iree-vmem")]
pub mod vmem;

#[cfg(feature = "rocclr-hostcall")]
pub mod hostcall;
