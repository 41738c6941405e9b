//! The subset of the HSA runtime API (core `hsa.h` and the AMD extension
//! `hsa_ext_amd.h`) that amdgpu-dropin uses: handle types, status and enum
//! values, shared structs and the C signatures of the functions we call.
//!
//! Nothing here links against HSA: functions are described as `pfn_*`
//! function-pointer types (plain `unsafe extern "C" fn`; a table slot that
//! may be empty is an `Option` of one) so callers resolve them at run time
//! (from the caller's IREE table, from the process, or by loading
//! `libhsa-runtime64.so.1`, all in the crate's `hsa.rs`). Values are
//! plain integer constants because HSA enums cross the ABI as 32-bit integers
//! and a Rust enum must never hold a value C made up.
#![no_std]
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_void};
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

//===----------------------------------------------------------------------===//
// Status
//===----------------------------------------------------------------------===//

/// `hsa_status_t`: a 32-bit status code.
pub type hsa_status_t = u32;

pub const HSA_STATUS_SUCCESS: hsa_status_t = 0x0;
pub const HSA_STATUS_INFO_BREAK: hsa_status_t = 0x1;
pub const HSA_STATUS_ERROR: hsa_status_t = 0x1000;
pub const HSA_STATUS_ERROR_INVALID_ARGUMENT: hsa_status_t = 0x1001;
pub const HSA_STATUS_ERROR_INVALID_QUEUE_CREATION: hsa_status_t = 0x1002;
pub const HSA_STATUS_ERROR_INVALID_ALLOCATION: hsa_status_t = 0x1003;
pub const HSA_STATUS_ERROR_INVALID_AGENT: hsa_status_t = 0x1004;
pub const HSA_STATUS_ERROR_INVALID_REGION: hsa_status_t = 0x1005;
pub const HSA_STATUS_ERROR_INVALID_SIGNAL: hsa_status_t = 0x1006;
pub const HSA_STATUS_ERROR_INVALID_QUEUE: hsa_status_t = 0x1007;
pub const HSA_STATUS_ERROR_OUT_OF_RESOURCES: hsa_status_t = 0x1008;
pub const HSA_STATUS_ERROR_INVALID_PACKET_FORMAT: hsa_status_t = 0x1009;
pub const HSA_STATUS_ERROR_RESOURCE_FREE: hsa_status_t = 0x100A;
pub const HSA_STATUS_ERROR_NOT_INITIALIZED: hsa_status_t = 0x100B;
pub const HSA_STATUS_ERROR_REFCOUNT_OVERFLOW: hsa_status_t = 0x100C;
pub const HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS: hsa_status_t = 0x100D;
pub const HSA_STATUS_ERROR_INVALID_INDEX: hsa_status_t = 0x100E;
pub const HSA_STATUS_ERROR_INVALID_ISA: hsa_status_t = 0x100F;
pub const HSA_STATUS_ERROR_INVALID_ISA_NAME: hsa_status_t = 0x1017;
pub const HSA_STATUS_ERROR_INVALID_CODE_OBJECT: hsa_status_t = 0x1010;
pub const HSA_STATUS_ERROR_INVALID_EXECUTABLE: hsa_status_t = 0x1011;
pub const HSA_STATUS_ERROR_FROZEN_EXECUTABLE: hsa_status_t = 0x1012;
pub const HSA_STATUS_ERROR_INVALID_SYMBOL_NAME: hsa_status_t = 0x1013;
pub const HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED: hsa_status_t = 0x1014;
pub const HSA_STATUS_ERROR_VARIABLE_UNDEFINED: hsa_status_t = 0x1015;
pub const HSA_STATUS_ERROR_EXCEPTION: hsa_status_t = 0x1016;
pub const HSA_STATUS_ERROR_INVALID_CODE_SYMBOL: hsa_status_t = 0x1018;
pub const HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL: hsa_status_t = 0x1019;
pub const HSA_STATUS_ERROR_INVALID_FILE: hsa_status_t = 0x1020;
pub const HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER: hsa_status_t = 0x1021;
pub const HSA_STATUS_ERROR_INVALID_CACHE: hsa_status_t = 0x1022;
pub const HSA_STATUS_ERROR_INVALID_WAVEFRONT: hsa_status_t = 0x1023;
pub const HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP: hsa_status_t = 0x1024;
pub const HSA_STATUS_ERROR_INVALID_RUNTIME_STATE: hsa_status_t = 0x1025;
pub const HSA_STATUS_ERROR_FATAL: hsa_status_t = 0x1026;

/// Every named status with its spelling, for messages (`HSA_STATUS_ERROR_OUT_OF_RESOURCES`).
pub const HSA_STATUS_NAMES: &[(hsa_status_t, &str)] = &[
    (HSA_STATUS_SUCCESS, "HSA_STATUS_SUCCESS"),
    (HSA_STATUS_INFO_BREAK, "HSA_STATUS_INFO_BREAK"),
    (HSA_STATUS_ERROR, "HSA_STATUS_ERROR"),
    (HSA_STATUS_ERROR_INVALID_ARGUMENT, "HSA_STATUS_ERROR_INVALID_ARGUMENT"),
    (HSA_STATUS_ERROR_INVALID_QUEUE_CREATION, "HSA_STATUS_ERROR_INVALID_QUEUE_CREATION"),
    (HSA_STATUS_ERROR_INVALID_ALLOCATION, "HSA_STATUS_ERROR_INVALID_ALLOCATION"),
    (HSA_STATUS_ERROR_INVALID_AGENT, "HSA_STATUS_ERROR_INVALID_AGENT"),
    (HSA_STATUS_ERROR_INVALID_REGION, "HSA_STATUS_ERROR_INVALID_REGION"),
    (HSA_STATUS_ERROR_INVALID_SIGNAL, "HSA_STATUS_ERROR_INVALID_SIGNAL"),
    (HSA_STATUS_ERROR_INVALID_QUEUE, "HSA_STATUS_ERROR_INVALID_QUEUE"),
    (HSA_STATUS_ERROR_OUT_OF_RESOURCES, "HSA_STATUS_ERROR_OUT_OF_RESOURCES"),
    (HSA_STATUS_ERROR_INVALID_PACKET_FORMAT, "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT"),
    (HSA_STATUS_ERROR_RESOURCE_FREE, "HSA_STATUS_ERROR_RESOURCE_FREE"),
    (HSA_STATUS_ERROR_NOT_INITIALIZED, "HSA_STATUS_ERROR_NOT_INITIALIZED"),
    (HSA_STATUS_ERROR_REFCOUNT_OVERFLOW, "HSA_STATUS_ERROR_REFCOUNT_OVERFLOW"),
    (HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS, "HSA_STATUS_ERROR_INCOMPATIBLE_ARGUMENTS"),
    (HSA_STATUS_ERROR_INVALID_INDEX, "HSA_STATUS_ERROR_INVALID_INDEX"),
    (HSA_STATUS_ERROR_INVALID_ISA, "HSA_STATUS_ERROR_INVALID_ISA"),
    (HSA_STATUS_ERROR_INVALID_ISA_NAME, "HSA_STATUS_ERROR_INVALID_ISA_NAME"),
    (HSA_STATUS_ERROR_INVALID_CODE_OBJECT, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT"),
    (HSA_STATUS_ERROR_INVALID_EXECUTABLE, "HSA_STATUS_ERROR_INVALID_EXECUTABLE"),
    (HSA_STATUS_ERROR_FROZEN_EXECUTABLE, "HSA_STATUS_ERROR_FROZEN_EXECUTABLE"),
    (HSA_STATUS_ERROR_INVALID_SYMBOL_NAME, "HSA_STATUS_ERROR_INVALID_SYMBOL_NAME"),
    (HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED, "HSA_STATUS_ERROR_VARIABLE_ALREADY_DEFINED"),
    (HSA_STATUS_ERROR_VARIABLE_UNDEFINED, "HSA_STATUS_ERROR_VARIABLE_UNDEFINED"),
    (HSA_STATUS_ERROR_EXCEPTION, "HSA_STATUS_ERROR_EXCEPTION"),
    (HSA_STATUS_ERROR_INVALID_CODE_SYMBOL, "HSA_STATUS_ERROR_INVALID_CODE_SYMBOL"),
    (HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL, "HSA_STATUS_ERROR_INVALID_EXECUTABLE_SYMBOL"),
    (HSA_STATUS_ERROR_INVALID_FILE, "HSA_STATUS_ERROR_INVALID_FILE"),
    (HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER, "HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER"),
    (HSA_STATUS_ERROR_INVALID_CACHE, "HSA_STATUS_ERROR_INVALID_CACHE"),
    (HSA_STATUS_ERROR_INVALID_WAVEFRONT, "HSA_STATUS_ERROR_INVALID_WAVEFRONT"),
    (HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP, "HSA_STATUS_ERROR_INVALID_SIGNAL_GROUP"),
    (HSA_STATUS_ERROR_INVALID_RUNTIME_STATE, "HSA_STATUS_ERROR_INVALID_RUNTIME_STATE"),
    (HSA_STATUS_ERROR_FATAL, "HSA_STATUS_ERROR_FATAL"),
];

/// The spelling of a status, or `None` for a value HSA does not define.
pub fn hsa_status_name(status: hsa_status_t) -> Option<&'static str> {
    HSA_STATUS_NAMES.iter().find(|(value, _)| *value == status).map(|(_, name)| *name)
}

//===----------------------------------------------------------------------===//
// Handles
//===----------------------------------------------------------------------===//

macro_rules! hsa_handle {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name {
            pub handle: u64,
        }
        const_assert_eq!(size_of::<$name>(), 8);
        const_assert_eq!(offset_of!($name, handle), 0);
    };
}

hsa_handle!(
    /// `hsa_agent_t`
    hsa_agent_t
);
hsa_handle!(
    /// `hsa_signal_t`
    hsa_signal_t
);
hsa_handle!(
    /// `hsa_amd_memory_pool_t`
    hsa_amd_memory_pool_t
);
hsa_handle!(
    /// `hsa_amd_vmem_alloc_handle_t`
    hsa_amd_vmem_alloc_handle_t
);

/// `hsa_signal_value_t` on 64-bit hosts.
pub type hsa_signal_value_t = i64;

//===----------------------------------------------------------------------===//
// Enumerations (32-bit integers on the ABI)
//===----------------------------------------------------------------------===//

/// `hsa_agent_info_t`
pub type hsa_agent_info_t = u32;
pub const HSA_AGENT_INFO_NAME: hsa_agent_info_t = 0;
pub const HSA_AGENT_INFO_DEVICE: hsa_agent_info_t = 17;

/// `hsa_device_type_t`
pub type hsa_device_type_t = u32;
pub const HSA_DEVICE_TYPE_CPU: hsa_device_type_t = 0;
pub const HSA_DEVICE_TYPE_GPU: hsa_device_type_t = 1;

/// `hsa_region_segment_t` (also used by memory pools)
pub type hsa_region_segment_t = u32;
pub const HSA_REGION_SEGMENT_GLOBAL: hsa_region_segment_t = 0;
pub const HSA_REGION_SEGMENT_READONLY: hsa_region_segment_t = 1;
pub const HSA_REGION_SEGMENT_PRIVATE: hsa_region_segment_t = 2;
pub const HSA_REGION_SEGMENT_GROUP: hsa_region_segment_t = 3;
pub const HSA_REGION_SEGMENT_KERNARG: hsa_region_segment_t = 4;

/// `hsa_amd_memory_pool_info_t`
pub type hsa_amd_memory_pool_info_t = u32;
pub const HSA_AMD_MEMORY_POOL_INFO_SEGMENT: hsa_amd_memory_pool_info_t = 0;
pub const HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: hsa_amd_memory_pool_info_t = 1;
pub const HSA_AMD_MEMORY_POOL_INFO_SIZE: hsa_amd_memory_pool_info_t = 2;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: hsa_amd_memory_pool_info_t = 5;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE: hsa_amd_memory_pool_info_t = 6;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALIGNMENT: hsa_amd_memory_pool_info_t = 7;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE: hsa_amd_memory_pool_info_t = 18;

/// `hsa_amd_memory_pool_global_flag_t` (a bit set)
pub type hsa_amd_memory_pool_global_flag_t = u32;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT: hsa_amd_memory_pool_global_flag_t = 1;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED: hsa_amd_memory_pool_global_flag_t = 2;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED: hsa_amd_memory_pool_global_flag_t = 4;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED: hsa_amd_memory_pool_global_flag_t = 8;

/// `hsa_access_permission_t`
pub type hsa_access_permission_t = u32;
pub const HSA_ACCESS_PERMISSION_NONE: hsa_access_permission_t = 0;
pub const HSA_ACCESS_PERMISSION_RO: hsa_access_permission_t = 1;
pub const HSA_ACCESS_PERMISSION_WO: hsa_access_permission_t = 2;
pub const HSA_ACCESS_PERMISSION_RW: hsa_access_permission_t = 3;

/// `hsa_amd_memory_type_t` (vmem handle creation)
pub type hsa_amd_memory_type_t = u32;
pub const MEMORY_TYPE_NONE: hsa_amd_memory_type_t = 0;
pub const MEMORY_TYPE_PINNED: hsa_amd_memory_type_t = 1;

/// `hsa_signal_condition_t`
pub type hsa_signal_condition_t = u32;
pub const HSA_SIGNAL_CONDITION_EQ: hsa_signal_condition_t = 0;
pub const HSA_SIGNAL_CONDITION_NE: hsa_signal_condition_t = 1;
pub const HSA_SIGNAL_CONDITION_LT: hsa_signal_condition_t = 2;
pub const HSA_SIGNAL_CONDITION_GTE: hsa_signal_condition_t = 3;

/// `hsa_wait_state_t`
pub type hsa_wait_state_t = u32;
pub const HSA_WAIT_STATE_BLOCKED: hsa_wait_state_t = 0;
pub const HSA_WAIT_STATE_ACTIVE: hsa_wait_state_t = 1;

//===----------------------------------------------------------------------===//
// Shared structs
//===----------------------------------------------------------------------===//

/// `hsa_amd_memory_access_desc_t`: one agent's permission on a vmem range.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct hsa_amd_memory_access_desc_t {
    pub permissions: hsa_access_permission_t,
    pub agent_handle: hsa_agent_t,
}
const_assert_eq!(size_of::<hsa_amd_memory_access_desc_t>(), 16);
const_assert_eq!(offset_of!(hsa_amd_memory_access_desc_t, permissions), 0);
const_assert_eq!(offset_of!(hsa_amd_memory_access_desc_t, agent_handle), 8);

//===----------------------------------------------------------------------===//
// Function signatures
//===----------------------------------------------------------------------===//

/// Callback of `hsa_amd_agent_iterate_memory_pools`.
pub type hsa_amd_memory_pool_callback_t =
    Option<unsafe extern "C" fn(pool: hsa_amd_memory_pool_t, user_data: *mut c_void) -> hsa_status_t>;

pub type pfn_hsa_init = unsafe extern "C" fn() -> hsa_status_t;
pub type pfn_hsa_shut_down = unsafe extern "C" fn() -> hsa_status_t;
pub type pfn_hsa_status_string =
    unsafe extern "C" fn(status: hsa_status_t, status_string: *mut *const c_char) -> hsa_status_t;
pub type pfn_hsa_amd_memory_pool_get_info = unsafe extern "C" fn(
    memory_pool: hsa_amd_memory_pool_t,
    attribute: hsa_amd_memory_pool_info_t,
    value: *mut c_void,
) -> hsa_status_t;
pub type pfn_hsa_amd_agent_iterate_memory_pools = unsafe extern "C" fn(
    agent: hsa_agent_t,
    callback: hsa_amd_memory_pool_callback_t,
    data: *mut c_void,
) -> hsa_status_t;
pub type pfn_hsa_amd_vmem_address_reserve_align = unsafe extern "C" fn(
    va: *mut *mut c_void,
    size: usize,
    address: u64,
    alignment: u64,
    flags: u64,
) -> hsa_status_t;
pub type pfn_hsa_amd_vmem_address_free = unsafe extern "C" fn(va: *mut c_void, size: usize) -> hsa_status_t;
pub type pfn_hsa_amd_vmem_handle_create = unsafe extern "C" fn(
    pool: hsa_amd_memory_pool_t,
    size: usize,
    type_: hsa_amd_memory_type_t,
    flags: u64,
    memory_handle: *mut hsa_amd_vmem_alloc_handle_t,
) -> hsa_status_t;
pub type pfn_hsa_amd_vmem_handle_release =
    unsafe extern "C" fn(memory_handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t;
pub type pfn_hsa_amd_vmem_map = unsafe extern "C" fn(
    va: *mut c_void,
    size: usize,
    in_offset: usize,
    memory_handle: hsa_amd_vmem_alloc_handle_t,
    flags: u64,
) -> hsa_status_t;
pub type pfn_hsa_amd_vmem_unmap = unsafe extern "C" fn(va: *mut c_void, size: usize) -> hsa_status_t;
pub type pfn_hsa_amd_vmem_set_access = unsafe extern "C" fn(
    va: *mut c_void,
    size: usize,
    desc: *const hsa_amd_memory_access_desc_t,
    desc_cnt: usize,
) -> hsa_status_t;

pub type pfn_hsa_signal_create = unsafe extern "C" fn(
    initial_value: hsa_signal_value_t,
    num_consumers: u32,
    consumers: *const hsa_agent_t,
    signal: *mut hsa_signal_t,
) -> hsa_status_t;
pub type pfn_hsa_signal_destroy = unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_status_t;
pub type pfn_hsa_signal_load = unsafe extern "C" fn(signal: hsa_signal_t) -> hsa_signal_value_t;
pub type pfn_hsa_signal_store = unsafe extern "C" fn(signal: hsa_signal_t, value: hsa_signal_value_t);
pub type pfn_hsa_signal_add = unsafe extern "C" fn(signal: hsa_signal_t, value: hsa_signal_value_t);
pub type pfn_hsa_signal_wait = unsafe extern "C" fn(
    signal: hsa_signal_t,
    condition: hsa_signal_condition_t,
    compare_value: hsa_signal_value_t,
    timeout_hint: u64,
    wait_state_hint: hsa_wait_state_t,
) -> hsa_signal_value_t;
pub type pfn_hsa_system_get_info = unsafe extern "C" fn(attribute: u32, value: *mut c_void) -> hsa_status_t;

/// `HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY`: ticks per second of wait timeouts.
pub const HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY: u32 = 3;

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn status_names_are_unique_and_complete() {
        for (i, (a, _)) in HSA_STATUS_NAMES.iter().enumerate() {
            for (b, _) in &HSA_STATUS_NAMES[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(hsa_status_name(0x1008), Some("HSA_STATUS_ERROR_OUT_OF_RESOURCES"));
        assert_eq!(hsa_status_name(0x9999), None);
    }
}
