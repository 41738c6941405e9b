//! The one place HSA statuses become IREE statuses (`iree_status_t`).
//!
//! `iree_status_t` is pointer-sized; NULL is OK and the low 5 bits hold the
//! code. A code-only value (`code as uintptr_t`) is valid in every IREE build.
//! When the process provides IREE's formatting status allocator
//! (`iree_status_allocate_f`) we use it, so statuses carry messages like
//! upstream's and the file and line of the Rust code that raised the error;
//! otherwise we return code-only statuses.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::panic::Location;
use std::ffi::CString;

use crate::race_once::{GrowOnlyList, RaceOnce};

use hsa_sys::*;

/// `iree_status_t`
pub type iree_status_t = *mut c_void;

/// `iree_status_code_t` values (all of IREE's, some unused here).
#[allow(dead_code)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum StatusCode {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
    Deferred = 17,
    Incompatible = 18,
}

/// IREE's `IREE_STATUS_CODE_MASK`.
pub const STATUS_CODE_MASK: usize = 0x1F;

/// HSA status → IREE status code, as IREE's libhsa maps them.
pub fn code_from_hsa(status: hsa_status_t) -> StatusCode {
    match status {
        HSA_STATUS_SUCCESS => StatusCode::Ok,
        HSA_STATUS_INFO_BREAK => StatusCode::Cancelled,
        HSA_STATUS_ERROR => StatusCode::Unknown,
        HSA_STATUS_ERROR_INVALID_ARGUMENT
        | HSA_STATUS_ERROR_INVALID_QUEUE_CREATION
        | HSA_STATUS_ERROR_INVALID_ALLOCATION
        | HSA_STATUS_ERROR_INVALID_AGENT
        | HSA_STATUS_ERROR_INVALID_REGION
        | HSA_STATUS_ERROR_INVALID_SIGNAL
        | HSA_STATUS_ERROR_INVALID_QUEUE
        | HSA_STATUS_ERROR_INVALID_PACKET_FORMAT
        | HSA_STATUS_ERROR_INVALID_ISA_NAME
        | HSA_STATUS_ERROR_INVALID_CODE_OBJECT
        | HSA_STATUS_ERROR_INVALID_EXECUTABLE
        | HSA_STATUS_ERROR_INVALID_CODE_SYMBOL
        | HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL
        | HSA_STATUS_ERROR_INVALID_FILE
        | HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER
        | HSA_STATUS_ERROR_INVALID_CACHE
        | HSA_STATUS_ERROR_INVALID_WAVEFRONT
        | HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP
        | HSA_STATUS_ERROR_INVALID_RUNTIME_STATE => StatusCode::InvalidArgument,
        HSA_STATUS_ERROR_RESOURCE_FREE => StatusCode::Internal,
        HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS | HSA_STATUS_ERROR_INVALID_ISA => StatusCode::Incompatible,
        HSA_STATUS_ERROR_OUT_OF_RESOURCES | HSA_STATUS_ERROR_REFCOUNT_OVERFLOW => {
            StatusCode::ResourceExhausted
        }
        HSA_STATUS_ERROR_NOT_INITIALIZED
        | HSA_STATUS_ERROR_FROZEN_EXECUTABLE
        | HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED
        | HSA_STATUS_ERROR_VARIABLE_UNDEFINED => StatusCode::FailedPrecondition,
        HSA_STATUS_ERROR_INVALID_INDEX => StatusCode::OutOfRange,
        HSA_STATUS_ERROR_INVALID_SYMBOL_NAME => StatusCode::NotFound,
        HSA_STATUS_ERROR_EXCEPTION | HSA_STATUS_ERROR_FATAL => StatusCode::DataLoss,
        _ => StatusCode::Unknown,
    }
}

/// A failure inside the library: an IREE code, a human message and the
/// source location that raised it (the status's file and line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub code: StatusCode,
    pub message: String,
    pub location: &'static Location<'static>,
}

impl Error {
    #[track_caller]
    pub fn new(code: StatusCode, message: impl Into<String>) -> Error {
        Error { code, message: message.into(), location: Location::caller() }
    }

    /// An HSA call `symbol` failed with `status`: message shaped like IREE's
    /// wrappers, `[symbol] HSA_STATUS_...`, then `: details`.
    #[track_caller]
    pub fn from_hsa(symbol: &str, status: hsa_status_t, details: &str) -> Error {
        let name =
            hsa_status_name(status).map(str::to_owned).unwrap_or_else(|| format!("HSA status {status:#x}"));
        let message = if details.is_empty() {
            format!("[{symbol}] {name}")
        } else {
            format!("[{symbol}] {name}: {details}")
        };
        Error::new(code_from_hsa(status), message)
    }

    #[track_caller]
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(StatusCode::InvalidArgument, message)
    }
}

pub type Result<T, E = Error> = core::result::Result<T, E>;

/// `iree_status_allocate_f(code, file, line, format, ...)`: IREE formats the
/// message into the status's own storage, so it outlives our call.
///
/// Contract (IREE `runtime/src/iree/base/status.c`): `file` is borrowed for
/// the life of the status (IREE passes `__FILE__`); the formatted message is
/// copied; an OK code gives OK; when IREE is built without status messages or
/// its allocation fails the result is code-only. Its sibling
/// `iree_status_allocate(code, file, line, message)` *borrows* the message
/// ("rodata strings ... not retained"), which is why we never use it for
/// messages we build at run time.
type StatusAllocateFormatFn = unsafe extern "C" fn(
    code: u32,
    file: *const c_char,
    line: u32,
    format: *const c_char,
    ...
) -> iree_status_t;

// A weak reference to IREE's allocator, bound by the linker: IREE is usually
// linked statically into an application that exports nothing, where dlsym
// cannot see the symbol but a link-time reference can. Unresolved, it is 0.
// (Stable Rust has no weak extern items, hence the assembly; the data word
// is hidden, so it never joins the library's exported API.)
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
core::arch::global_asm!(
    ".weak iree_status_allocate_f",
    ".pushsection .data.rel.ro.amdgpu_dropin_status_allocate_f_ref,\"aw\"",
    ".balign 8",
    ".globl amdgpu_dropin_status_allocate_f_ref",
    ".hidden amdgpu_dropin_status_allocate_f_ref",
    "amdgpu_dropin_status_allocate_f_ref:",
    ".quad iree_status_allocate_f",
    ".popsection",
);

#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
extern "C" {
    /// The address of `iree_status_allocate_f` if the link (static or dynamic) has it, else NULL.
    static amdgpu_dropin_status_allocate_f_ref: Option<StatusAllocateFormatFn>;
}

/// Looked up once per process; a `RaceOnce`, so a fork during another
/// thread's lookup (dlsym) cannot leave the child waiting for it.
fn status_allocator() -> Option<StatusAllocateFormatFn> {
    static ALLOCATOR: RaceOnce<Option<StatusAllocateFormatFn>> = RaceOnce::new();
    *ALLOCATOR.get_or_make(|| {
        #[cfg(feature = "test-hooks")]
        crate::hostcall::test_hooks::pause_at(crate::hostcall::test_hooks::TEST_PAUSE_STATUS_ALLOCATOR);
        #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
        {
            // SAFETY: the word is defined by the assembly above, 8-aligned and
            // written only by the dynamic loader before any code runs; NULL or
            // the address of IREE's `iree_status_allocate_f`, whose signature
            // is `StatusAllocateFormatFn`.
            if let Some(allocate) = unsafe { amdgpu_dropin_status_allocate_f_ref } {
                return Some(allocate);
            }
        }
        let ptr = crate::sys::dlsym_default(c"iree_status_allocate_f")?;
        // SAFETY: IREE exports `iree_status_allocate_f` with exactly this
        // signature (code, file, line, printf-style format and arguments).
        Some(unsafe { core::mem::transmute::<*mut c_void, StatusAllocateFormatFn>(ptr) })
    })
}

/// `file` as a NUL-terminated string that lives as long as the process: IREE
/// keeps the pointer in the status (as it keeps `__FILE__`), and a status may
/// outlive even a `dlclose` of this library, so the copy is on the heap, made
/// once per source file (a handful) and never freed. The list takes no lock
/// (a fork while another thread adds to it leaves the child a usable list).
fn file_c_string(file: &'static str) -> &'static CStr {
    static FILES: GrowOnlyList<(&'static str, &'static CStr)> = GrowOnlyList::new();
    FILES
        .find_or_push(
            |(name, _)| *name == file,
            || match CString::new(file) {
                Ok(copy) => (file, Box::leak(copy.into_boxed_c_str())),
                Err(_) => (file, c"amdgpu-dropin"),
            },
        )
        .1
}

/// Converts a result to `iree_status_t`, with a message when IREE's allocator is present.
pub fn to_iree_status(result: Result<()>) -> iree_status_t {
    match result {
        Ok(()) => core::ptr::null_mut(),
        Err(error) => error_to_iree_status(&error),
    }
}

pub fn error_to_iree_status(error: &Error) -> iree_status_t {
    crate::log!(crate::log::Level::Info, "{}", error.message);
    let code = error.code as u32;
    if code == 0 {
        return core::ptr::null_mut();
    }
    if let Some(allocate) = status_allocator() {
        let file = file_c_string(error.location.file());
        // "%.*s" takes an int length; our messages are far shorter.
        let length = c_int::try_from(error.message.len()).unwrap_or(c_int::MAX);
        // SAFETY: `allocate` is IREE's iree_status_allocate_f. The format is a
        // static literal and the message goes in as data ("%.*s" with its
        // length, never as a format); IREE copies it before returning. `file`
        // is NUL-terminated and never freed (IREE borrows it).
        let status = unsafe {
            allocate(
                code,
                file.as_ptr(),
                error.location.line(),
                c"%.*s".as_ptr(),
                length,
                error.message.as_ptr().cast::<c_char>(),
            )
        };
        // An allocator that failed returns a code-only status itself; never
        // hand out a status whose code does not match.
        if (status as usize) & STATUS_CODE_MASK == code as usize {
            return status;
        }
    }
    code as usize as iree_status_t
}

/// The code of an `iree_status_t` (low 5 bits).
#[cfg(test)]
pub fn status_code(status: iree_status_t) -> u32 {
    (status as usize & STATUS_CODE_MASK) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hsa_status_maps_as_iree_does() {
        let expected: &[(hsa_status_t, StatusCode)] = &[
            (HSA_STATUS_SUCCESS, StatusCode::Ok),
            (HSA_STATUS_INFO_BREAK, StatusCode::Cancelled),
            (HSA_STATUS_ERROR, StatusCode::Unknown),
            (HSA_STATUS_ERROR_INVALID_ARGUMENT, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_QUEUE_CREATION, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_ALLOCATION, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_AGENT, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_REGION, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_SIGNAL, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_QUEUE, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_OUT_OF_RESOURCES, StatusCode::ResourceExhausted),
            (HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_RESOURCE_FREE, StatusCode::Internal),
            (HSA_STATUS_ERROR_NOT_INITIALIZED, StatusCode::FailedPrecondition),
            (HSA_STATUS_ERROR_REFCOUNT_OVERFLOW, StatusCode::ResourceExhausted),
            (HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS, StatusCode::Incompatible),
            (HSA_STATUS_ERROR_INVALID_INDEX, StatusCode::OutOfRange),
            (HSA_STATUS_ERROR_INVALID_ISA, StatusCode::Incompatible),
            (HSA_STATUS_ERROR_INVALID_ISA_NAME, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_CODE_OBJECT, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_EXECUTABLE, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_FROZEN_EXECUTABLE, StatusCode::FailedPrecondition),
            (HSA_STATUS_ERROR_INVALID_SYMBOL_NAME, StatusCode::NotFound),
            (HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED, StatusCode::FailedPrecondition),
            (HSA_STATUS_ERROR_VARIABLE_UNDEFINED, StatusCode::FailedPrecondition),
            (HSA_STATUS_ERROR_EXCEPTION, StatusCode::DataLoss),
            (HSA_STATUS_ERROR_INVALID_CODE_SYMBOL, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_FILE, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_CACHE, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_WAVEFRONT, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_INVALID_RUNTIME_STATE, StatusCode::InvalidArgument),
            (HSA_STATUS_ERROR_FATAL, StatusCode::DataLoss),
            (0x4242, StatusCode::Unknown),
        ];
        for (hsa, iree) in expected {
            assert_eq!(code_from_hsa(*hsa), *iree, "HSA status {hsa:#x}");
        }
        // Every named HSA status is covered by the table above.
        for (value, name) in HSA_STATUS_NAMES {
            assert!(expected.iter().any(|(v, _)| v == value), "{name} not tested");
        }
    }

    #[test]
    fn code_only_statuses_without_iree() {
        let status = to_iree_status(Err(Error::new(StatusCode::NotFound, "x")));
        assert_eq!(status as usize, 5);
        assert!(to_iree_status(Ok(())).is_null());
        let e = Error::from_hsa("hsa_amd_vmem_map", HSA_STATUS_ERROR_OUT_OF_RESOURCES, "mapping 3");
        assert_eq!(e.code, StatusCode::ResourceExhausted);
        assert_eq!(e.message, "[hsa_amd_vmem_map] HSA_STATUS_ERROR_OUT_OF_RESOURCES: mapping 3");
    }

    #[test]
    fn errors_carry_their_source_location() {
        let line = line!() + 1;
        let e = Error::invalid_argument("x");
        assert_eq!(e.location.file(), file!());
        assert_eq!(e.location.line(), line);
        let e = Error::from_hsa("hsa_init", HSA_STATUS_ERROR, "");
        assert_eq!(e.location.line(), line!() - 1);
        assert_eq!(e.message, "[hsa_init] HSA_STATUS_ERROR");
    }

    #[test]
    fn file_strings_are_interned_and_nul_terminated() {
        let a = file_c_string("src/vmem/pool.rs");
        let b = file_c_string(String::leak(String::from("src/vmem/pool.rs")));
        assert!(core::ptr::eq(a, b), "one copy per file");
        assert_eq!(a.to_str(), Ok("src/vmem/pool.rs"));
        assert_eq!(file_c_string("bad\0name"), c"amdgpu-dropin");
    }
}
