//! ROCclr hostcall exports: the 4 functions of `rochostcall.hpp`, under their
//! C names and under the Itanium-mangled names that C++ callers compiled
//! against the original header (plain C++ declarations) reference.
//!
//! Only argument checks, logging and the panic boundary live here; the logic
//! is in `crate::hostcall`. The mangled aliases are kept out of the generated
//! header (`cbindgen:ignore`).
#![allow(non_snake_case)]

use core::ffi::c_void;

use crate::ffi::panic::ffi_boundary;
use crate::hostcall;
use crate::log::Level;

/// Returns the number of bytes to allocate for a hostcall buffer of
/// `num_packets` packets (headers, packet headers and payloads, with padding).
/// Defined for every value; the sizes of the 2019–20 ROCclr's rochostcall.
/// Today's ROCclr (devhostcall.cpp) makes a classic buffer 8 bytes larger
/// (16 with ASan) for host-only fields that device code never reads.
#[no_mangle]
pub extern "C" fn getHostcallBufferSize(num_packets: u32) -> usize {
    ffi_boundary!("getHostcallBufferSize", { hostcall::Protocol::Classic.buffer_size(num_packets) })
}

/// Returns the required alignment of a hostcall buffer, in bytes (8).
#[no_mangle]
pub extern "C" fn getHostcallBufferAlignment() -> u32 {
    ffi_boundary!("getHostcallBufferAlignment", { hostcall::Protocol::Classic.alignment() as u32 })
}

/// Initializes `buffer` for `num_packets` packets and registers it with the
/// process-wide hostcall listener (started by the first enable).
///
/// Returns true on success. Returns false, logs the reason (AMD_LOG_LEVEL >= 1)
/// and leaves the buffer untouched when: `buffer` is NULL or not aligned to
/// `getHostcallBufferAlignment()`; `num_packets` < 2; the buffer is already
/// enabled (the first registration stays) or overlaps an enabled buffer; it
/// was disabled from inside one of its own services that this thread is
/// still running (amdgpu_dropin_hostcall.h: "Disabling from inside a
/// buffer's own service"); the
/// HSA runtime or its signal functions cannot be found, or the doorbell
/// signal cannot be created; the process is exiting. `queue` is recorded and
/// otherwise unused.
///
/// # Safety
/// * `buffer`: NULL (rejected) or valid for reads and writes of
///   `getHostcallBufferSize(num_packets)` bytes until `disableHostcalls`
///   returns for it; meanwhile only device code following the hostcall
///   protocol may access it.
/// * `queue`: any value; never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn enableHostcalls(
    buffer: *mut c_void,
    num_packets: u32,
    queue: *const c_void,
) -> bool {
    ffi_boundary!("enableHostcalls", {
        // SAFETY: forwarded caller contract (see `# Safety`).
        match unsafe { hostcall::enable(buffer, num_packets, queue) } {
            Ok(()) => true,
            Err(error) => {
                crate::log!(
                    Level::Error,
                    "enableHostcalls(buffer={:p}, numPackets={}, queue={:p}): {}",
                    buffer,
                    num_packets,
                    queue,
                    error
                );
                false
            }
        }
    })
}

/// Unregisters `buffer`. When it returns, the listener no longer accesses the
/// buffer and it may be freed; it waits for a request of that buffer being
/// served at that moment (called from a hostcall service of that same
/// buffer: amdgpu_dropin_hostcall.h, "Disabling from inside a buffer's own
/// service"). The last disable stops the
/// listener and destroys the doorbell signal. A NULL, unknown or already
/// disabled buffer is a logged no-op.
///
/// # Safety
/// * `buffer`, `queue`: any values; never dereferenced except a buffer that is
///   currently enabled (whose contract `enableHostcalls` states).
#[no_mangle]
pub unsafe extern "C" fn disableHostcalls(buffer: *mut c_void, queue: *const c_void) {
    ffi_boundary!("disableHostcalls", {
        if let Err(error) = hostcall::disable(buffer, queue) {
            crate::log!(
                Level::Warning,
                "disableHostcalls(buffer={:p}, queue={:p}): {}",
                buffer,
                queue,
                error
            );
        }
    })
}

//===----------------------------------------------------------------------===//
// Itanium-mangled aliases (C++ callers of the original header)
//===----------------------------------------------------------------------===//

/// `size_t getHostcallBufferSize(uint32_t)` as a C++ symbol.
/// cbindgen:ignore
#[export_name = "_Z21getHostcallBufferSizej"]
pub extern "C" fn getHostcallBufferSize_cxx(num_packets: u32) -> usize {
    getHostcallBufferSize(num_packets)
}

/// `uint32_t getHostcallBufferAlignment()` as a C++ symbol.
/// cbindgen:ignore
#[export_name = "_Z26getHostcallBufferAlignmentv"]
pub extern "C" fn getHostcallBufferAlignment_cxx() -> u32 {
    getHostcallBufferAlignment()
}

/// `bool enableHostcalls(void*, uint32_t, const void*)` as a C++ symbol.
///
/// # Safety
/// As `enableHostcalls`.
/// cbindgen:ignore
#[export_name = "_Z15enableHostcallsPvjPKv"]
pub unsafe extern "C" fn enableHostcalls_cxx(
    buffer: *mut c_void,
    num_packets: u32,
    queue: *const c_void,
) -> bool {
    // SAFETY: same contract, forwarded.
    unsafe { enableHostcalls(buffer, num_packets, queue) }
}

/// `void disableHostcalls(void*, const void*)` as a C++ symbol.
///
/// # Safety
/// As `disableHostcalls`.
/// cbindgen:ignore
#[export_name = "_Z16disableHostcallsPvPKv"]
pub unsafe extern "C" fn disableHostcalls_cxx(buffer: *mut c_void, queue: *const c_void) {
    // SAFETY: same contract, forwarded.
    unsafe { disableHostcalls(buffer, queue) }
}
