//! The panic boundary: no panic ever unwinds into C.
//!
//! Every export runs its body inside `ffi_boundary!`, which catches a panic,
//! logs it, and returns the type's failure value from `PanicFallback`
//! (INTERNAL status, `false`, 0, nothing). The process that loaded us is never
//! aborted by our bugs.

use crate::status::{iree_status_t, StatusCode};

/// The value an export returns when its body panicked.
pub trait PanicFallback {
    fn panic_fallback() -> Self;
}

impl PanicFallback for iree_status_t {
    fn panic_fallback() -> Self {
        StatusCode::Internal as usize as iree_status_t
    }
}

impl PanicFallback for bool {
    fn panic_fallback() -> Self {
        false
    }
}

impl PanicFallback for () {
    fn panic_fallback() -> Self {}
}

impl PanicFallback for usize {
    fn panic_fallback() -> Self {
        0
    }
}

impl PanicFallback for u32 {
    fn panic_fallback() -> Self {
        0
    }
}

/// `ffi_boundary!("name", { body })`: runs `body`, turning a panic into the
/// return type's `PanicFallback` value and an error log line. Crate-private.
macro_rules! ffi_boundary {
    ($name:expr, $body:block) => {{
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(value) => value,
            Err(payload) => {
                $crate::log!(
                    $crate::log::Level::Error,
                    "{}: internal panic caught at the C boundary: {}",
                    $name,
                    $crate::log::panic_message(&*payload)
                );
                $crate::ffi::panic::PanicFallback::panic_fallback()
            }
        }
    }};
}
pub(crate) use ffi_boundary;
