//! The one place HSA symbols are resolved.
//!
//! * By name, for the hostcall half and IREE's static-HSA mode: first among the
//!   objects already in the process (a ROCclr or IREE process has ROCr loaded),
//!   else by loading `libhsa-runtime64.so.1` (or the library named by
//!   `AMDGPU_DROPIN_HSA_LIBRARY`).
//! * By identity, for IREE's caller-provided table: the exported symbol name of
//!   a function pointer (`identify`), so a slot is used only when we know what
//!   it is.

use core::ffi::{c_void, CStr};

use crate::race_once::RaceOnce;
use crate::sys;

/// An HSA status as log lines and error texts show it: its name and its
/// value, `HSA_STATUS_ERROR_OUT_OF_RESOURCES (0x1008)`.
pub fn status_text(status: hsa_sys::hsa_status_t) -> String {
    format!("{} ({status:#x})", hsa_sys::hsa_status_name(status).unwrap_or("unknown status"))
}

/// The HSA runtime's soname, as ROCr installs it.
pub const HSA_LIBRARY_SONAME: &CStr = c"libhsa-runtime64.so.1";

/// Environment variable naming another HSA library to load when none is in the process.
pub const HSA_LIBRARY_ENV: &str = "AMDGPU_DROPIN_HSA_LIBRARY";

static LOADED: RaceOnce<Result<sys::Library, String>> = RaceOnce::new();

fn loaded_library() -> Result<sys::Library, String> {
    // A `RaceOnce`, made without a lock: a fork while another thread loads
    // cannot leave the child waiting for it. Two threads may both dlopen:
    // the loader returns the same object (one extra reference, never
    // closed); the first result is kept.
    LOADED.get_or_make(load_library).clone()
}

fn load_library() -> Result<sys::Library, String> {
    let name = std::env::var(HSA_LIBRARY_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .and_then(|v| std::ffi::CString::new(v).ok());
    match name {
        Some(name) => sys::Library::open(&name),
        None => sys::Library::open(HSA_LIBRARY_SONAME),
    }
}

/// Resolves HSA function `name`: from the process first, else from the loaded library.
/// The error says why nothing was found (for logs and statuses).
pub fn resolve(name: &CStr) -> Result<*mut c_void, String> {
    if let Some(ptr) = sys::dlsym_default(name) {
        return Ok(ptr);
    }
    let library = loaded_library().map_err(|e| {
        format!(
            "HSA runtime not found in the process and {} could not be loaded: {e}",
            std::env::var(HSA_LIBRARY_ENV)
                .unwrap_or_else(|_| HSA_LIBRARY_SONAME.to_string_lossy().into_owned())
        )
    })?;
    library.symbol(name).ok_or_else(|| format!("HSA runtime has no symbol {}", name.to_string_lossy()))
}

/// Resolves `name` and casts it to the function pointer type `F`.
///
/// # Safety
/// `F` must be the function pointer type matching the C signature of `name`.
pub unsafe fn resolve_fn<F: Copy>(name: &CStr) -> Result<F, String> {
    const { assert!(core::mem::size_of::<F>() == core::mem::size_of::<*mut c_void>()) };
    let ptr = resolve(name)?;
    // SAFETY: `ptr` is a non-NULL code address of symbol `name`; the caller
    // guarantees `F` is its signature, and fn pointers are pointer-sized.
    Ok(unsafe { core::mem::transmute_copy::<*mut c_void, F>(&ptr) })
}

/// The exported symbol name of function pointer `ptr`, if `ptr` is exactly the
/// address of an exported symbol of some loaded object.
pub fn identify(ptr: *const c_void) -> Option<&'static CStr> {
    sys::exact_symbol_name(ptr)
}
