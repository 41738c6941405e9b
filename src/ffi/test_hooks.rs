//! The hook build's exports (cargo feature `test-hooks`; see
//! `crate::hostcall::test_hooks`). Not part of the product library or its headers:
//! the C tests of the hook build declare them themselves.
#![cfg(feature = "test-hooks")]

use crate::ffi::panic::ffi_boundary;

/// Arms pause point `point` (`AMDGPU_DROPIN_HOSTCALL_TEST_PAUSE_*`).
#[no_mangle]
pub extern "C" fn amdgpu_dropin_test_pause_arm(point: u32) {
    ffi_boundary!("amdgpu_dropin_test_pause_arm", { crate::hostcall::test_hooks::arm(point) })
}

/// Whether a thread waits at pause point `point` now.
#[no_mangle]
pub extern "C" fn amdgpu_dropin_test_pause_reached(point: u32) -> bool {
    ffi_boundary!("amdgpu_dropin_test_pause_reached", { crate::hostcall::test_hooks::reached(point) })
}

/// Lets the thread waiting at `point` go on.
#[no_mangle]
pub extern "C" fn amdgpu_dropin_test_pause_release(point: u32) {
    ffi_boundary!("amdgpu_dropin_test_pause_release", { crate::hostcall::test_hooks::release(point) })
}

/// How many times this process's exit waited for a listener inside the HSA
/// doorbell wait.
#[no_mangle]
pub extern "C" fn amdgpu_dropin_test_exit_hsa_waits() -> u64 {
    ffi_boundary!("amdgpu_dropin_test_exit_hsa_waits", {
        crate::hostcall::test_hooks::exit_hsa_waits() as usize
    }) as u64
}
