//! The service ids of the hostcall protocol and the error answer: the one
//! place the crate takes them from. The C header's
//! `AMDGPU_DROPIN_HOSTCALL_SERVICE_*` and `_ERROR_VALUE`
//! (`src/ffi/hostcall_ext.rs`) are pinned to these at compile time.

/// Reserved by the device libraries (never a request).
pub const SERVICE_RESERVED: u32 = 0;
/// Call a host function named by the device.
pub const SERVICE_FUNCTION_CALL: u32 = 1;
/// printf, assembled over several packets (`printf`).
pub const SERVICE_PRINTF: u32 = 2;
/// Device-heap memory (`devmem`).
pub const SERVICE_DEVMEM: u32 = 3;
/// Address sanitizer reports (`sanitizer`).
pub const SERVICE_SANITIZER: u32 = 4;

/// slot[0] of a lane whose request failed (-1).
pub const ERROR_VALUE: u64 = u64::MAX;
