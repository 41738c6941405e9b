//! C-visible types of IREE's `util/vmem.h`, laid out exactly as IREE lays
//! them out (docs/iree.md#layouts-shared-with-iree). cbindgen reads this file (with `src/ffi/vmem.rs`) to
//! generate `include/iree-vmem/iree/hal/drivers/amdgpu/util/vmem.h`.
//!
//! Enumerations cross the C ABI as 32-bit integers. A C caller may pass any
//! value in an enum parameter, and a Rust enum holding a value outside its
//! variants is undefined behaviour, so the exports receive the raw `u32`
//! (`iree_hal_amdgpu_vmem_*_t` below are `u32` for rustc) and convert with
//! `AccessMode::from_raw` / `MemoryType::from_raw`. cbindgen instead sees the
//! `#[cfg(cbindgen)]` aliases, so the header shows the enum type names.
//!
//! Types owned by other headers (`iree_status_t`, `iree_device_size_t`,
//! `iree_host_size_t`, `iree_hal_amdgpu_libhsa_t`, `iree_hal_amdgpu_topology_t`
//! and every HSA type) are never defined in the generated header: they are
//! marked `cbindgen:ignore` here or live in `hsa-sys`, which cbindgen does not
//! read, so the header names them and the caller's own headers define them.

use core::ffi::c_void;
use core::mem::{align_of, offset_of, size_of};

use hsa_sys::{hsa_agent_t, hsa_amd_vmem_alloc_handle_t};
use static_assertions::const_assert_eq;

/// cbindgen:ignore
/// `iree_device_size_t` (`size_t` on every platform IREE's AMDGPU driver supports).
pub type iree_device_size_t = usize;

/// cbindgen:ignore
/// `iree_host_size_t` (`size_t`).
pub type iree_host_size_t = usize;

//===----------------------------------------------------------------------===//
// Virtual Memory Utilities
//===----------------------------------------------------------------------===//

/// How the agents of a topology may access a ringbuffer's memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum iree_hal_amdgpu_vmem_access_mode_e {
    /// Every agent of the topology reads and writes.
    IREE_HAL_AMDGPU_ACCESS_MODE_SHARED = 0,
    /// Only the local agent reads and writes; no other agent has access.
    IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE = 1,
    /// The local agent only reads; every other agent only writes (inboxes).
    IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER = 2,
    /// The local agent only writes; every other agent only reads (outboxes).
    IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER = 3,
}

/// The kind of physical memory backing a ringbuffer (mapped onto HSA's
/// `hsa_amd_memory_type_t` when the physical allocation is created).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum iree_hal_amdgpu_vmem_memory_type_e {
    /// Ordinary allocation; what device-local pools use.
    IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT = 0,
    /// Pinned host memory; what CPU (host) pools use.
    IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST = 1,
}

/// `iree_hal_amdgpu_vmem_access_mode_t` as the header declares it.
#[cfg(cbindgen)]
pub type iree_hal_amdgpu_vmem_access_mode_t = iree_hal_amdgpu_vmem_access_mode_e;

/// cbindgen:ignore
/// `iree_hal_amdgpu_vmem_access_mode_t` as received: the raw 32-bit value of
/// a C enum, validated with `AccessMode::from_raw` before use.
#[cfg(not(cbindgen))]
pub type iree_hal_amdgpu_vmem_access_mode_t = u32;

/// `iree_hal_amdgpu_vmem_memory_type_t` as the header declares it.
#[cfg(cbindgen)]
pub type iree_hal_amdgpu_vmem_memory_type_t = iree_hal_amdgpu_vmem_memory_type_e;

/// cbindgen:ignore
/// `iree_hal_amdgpu_vmem_memory_type_t` as received: the raw 32-bit value of a
/// C enum, validated with `MemoryType::from_raw` before use.
#[cfg(not(cbindgen))]
pub type iree_hal_amdgpu_vmem_memory_type_t = u32;

// A C enum whose values fit in `int` is `int`-sized on every ABI we target.
const_assert_eq!(size_of::<iree_hal_amdgpu_vmem_access_mode_e>(), 4);
const_assert_eq!(size_of::<iree_hal_amdgpu_vmem_memory_type_e>(), 4);

/// cbindgen:ignore
/// Validated access mode.
pub type AccessMode = iree_hal_amdgpu_vmem_access_mode_e;

/// cbindgen:ignore
/// Validated memory type.
pub type MemoryType = iree_hal_amdgpu_vmem_memory_type_e;

impl iree_hal_amdgpu_vmem_access_mode_e {
    /// The mode with C value `raw`, or `None` for a value the enum does not define.
    pub fn from_raw(raw: u32) -> Option<Self> {
        use iree_hal_amdgpu_vmem_access_mode_e::*;
        [
            IREE_HAL_AMDGPU_ACCESS_MODE_SHARED,
            IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE,
            IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_CONSUMER,
            IREE_HAL_AMDGPU_ACCESS_MODE_EXCLUSIVE_PRODUCER,
        ]
        .into_iter()
        .find(|mode| *mode as u32 == raw)
    }
}

impl iree_hal_amdgpu_vmem_memory_type_e {
    /// The memory type with C value `raw`, or `None` for a value the enum does not define.
    pub fn from_raw(raw: u32) -> Option<Self> {
        use iree_hal_amdgpu_vmem_memory_type_e::*;
        [IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT, IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST]
            .into_iter()
            .find(|ty| *ty as u32 == raw)
    }

    /// The HSA allocation type passed to `hsa_amd_vmem_handle_create`.
    pub fn to_hsa(self) -> hsa_sys::hsa_amd_memory_type_t {
        match self {
            Self::IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT => hsa_sys::MEMORY_TYPE_NONE,
            Self::IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST => hsa_sys::MEMORY_TYPE_PINNED,
        }
    }
}

//===----------------------------------------------------------------------===//
// iree_hal_amdgpu_vmem_ringbuffer_t
//===----------------------------------------------------------------------===//

/// A ringbuffer whose one physical allocation is mapped three times, back to
/// back, into one reserved virtual range, so that reads and writes may run up
/// to `capacity` bytes before or after `ring_base_ptr` without any wrap logic:
/// byte `ring_base_ptr[-k]` aliases `ring_base_ptr[capacity - k]` and
/// `ring_base_ptr[capacity + k]` aliases `ring_base_ptr[k]`.
///
/// ```text
///   physical allocation (capacity bytes)
///        |            |            |
///        v            v            v
///   [ view 0     ][ view 1     ][ view 2     ]   3 * capacity bytes reserved
///   ^             ^
///   va_base_ptr   ring_base_ptr
/// ```
///
/// A zeroed struct holds nothing; deinitializing it does nothing.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct iree_hal_amdgpu_vmem_ringbuffer_t {
    /// Size of the physical allocation in bytes: the requested minimum rounded
    /// up to the pool's recommended allocation granule.
    pub capacity: iree_device_size_t,
    /// The physical allocation, mapped into all three views.
    pub alloc_handle: hsa_amd_vmem_alloc_handle_t,
    /// Start of the reserved virtual range (view 0). Device memory: it may not
    /// be accessible from the host.
    pub va_base_ptr: *mut c_void,
    /// Start of the middle view (`va_base_ptr + capacity`), the ring's base.
    pub ring_base_ptr: *mut c_void,
}

const_assert_eq!(size_of::<iree_hal_amdgpu_vmem_ringbuffer_t>(), 32);
const_assert_eq!(offset_of!(iree_hal_amdgpu_vmem_ringbuffer_t, capacity), 0);
const_assert_eq!(offset_of!(iree_hal_amdgpu_vmem_ringbuffer_t, alloc_handle), 8);
const_assert_eq!(offset_of!(iree_hal_amdgpu_vmem_ringbuffer_t, va_base_ptr), 16);
const_assert_eq!(offset_of!(iree_hal_amdgpu_vmem_ringbuffer_t, ring_base_ptr), 24);

impl iree_hal_amdgpu_vmem_ringbuffer_t {
    /// The empty ringbuffer (all zero).
    pub const ZEROED: Self = Self {
        capacity: 0,
        alloc_handle: hsa_amd_vmem_alloc_handle_t { handle: 0 },
        va_base_ptr: core::ptr::null_mut(),
        ring_base_ptr: core::ptr::null_mut(),
    };

    #[cfg(test)]
    pub fn is_zeroed(&self) -> bool {
        *self == Self::ZEROED
    }
}

//===----------------------------------------------------------------------===//
// iree_hal_amdgpu_topology_t (defined by IREE's util/topology.h)
//===----------------------------------------------------------------------===//

/// cbindgen:ignore
/// Capacity of `all_agents`.
pub const TOPOLOGY_MAX_AGENT_COUNT: usize = 128;
/// cbindgen:ignore
/// Capacity of `cpu_agents`.
pub const TOPOLOGY_MAX_CPU_AGENT_COUNT: usize = 64;
/// cbindgen:ignore
/// Capacity of `gpu_agents` and `gpu_cpu_map`.
pub const TOPOLOGY_MAX_GPU_AGENT_COUNT: usize = 64;

/// cbindgen:ignore
/// IREE's `iree_hal_amdgpu_topology_t` (the header only forward-declares it;
/// IREE's `util/topology.h` defines it). Every field is a plain integer or
/// handle, so any bit pattern is a valid value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct iree_hal_amdgpu_topology_t {
    pub all_agent_count: iree_host_size_t,
    pub all_agents: [hsa_agent_t; TOPOLOGY_MAX_AGENT_COUNT],
    pub cpu_agent_count: iree_host_size_t,
    pub cpu_agents: [hsa_agent_t; TOPOLOGY_MAX_CPU_AGENT_COUNT],
    pub gpu_agent_count: iree_host_size_t,
    pub gpu_agents: [hsa_agent_t; TOPOLOGY_MAX_GPU_AGENT_COUNT],
    pub gpu_agent_queue_count: iree_host_size_t,
    pub gpu_cpu_map: [u8; TOPOLOGY_MAX_GPU_AGENT_COUNT],
}

const_assert_eq!(size_of::<iree_hal_amdgpu_topology_t>(), 2144);
const_assert_eq!(align_of::<iree_hal_amdgpu_topology_t>(), 8);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, all_agent_count), 0);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, all_agents), 8);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, cpu_agent_count), 1032);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, cpu_agents), 1040);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, gpu_agent_count), 1552);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, gpu_agents), 1560);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, gpu_agent_queue_count), 2072);
const_assert_eq!(offset_of!(iree_hal_amdgpu_topology_t, gpu_cpu_map), 2080);

//===----------------------------------------------------------------------===//
// iree_hal_amdgpu_libhsa_t (defined by IREE's util/libhsa.h)
//===----------------------------------------------------------------------===//

/// cbindgen:ignore
/// IREE's `iree_hal_amdgpu_libhsa_t`, opaque here: its function table's order
/// changes between IREE versions (docs/iree.md#layouts-shared-with-iree), so the library never declares
/// its fields past the fixed prefix below.
#[repr(C)]
pub struct iree_hal_amdgpu_libhsa_t {
    _opaque: [u8; 0],
}

/// cbindgen:ignore
/// The fixed start of `iree_hal_amdgpu_libhsa_t` in IREE's default (dynamic)
/// mode, identical in every IREE version: `bool initialized`, the library
/// handle, then one function pointer per table entry.
#[repr(C)]
pub struct iree_hal_amdgpu_libhsa_prefix_t {
    pub initialized: u8,
    pub library: *mut c_void,
}

const_assert_eq!(size_of::<iree_hal_amdgpu_libhsa_prefix_t>(), 16);
const_assert_eq!(offset_of!(iree_hal_amdgpu_libhsa_prefix_t, library), 8);

/// cbindgen:ignore
/// Byte offset of the first function pointer of the table (slot 0).
pub const LIBHSA_FIRST_SLOT_OFFSET: usize = size_of::<iree_hal_amdgpu_libhsa_prefix_t>();

/// cbindgen:ignore
/// Alignment the caller's `iree_hal_amdgpu_libhsa_t` has (it holds pointers).
pub const LIBHSA_ALIGN: usize = align_of::<*const c_void>();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_and_reject_unknown_values() {
        for raw in 0..4 {
            assert_eq!(AccessMode::from_raw(raw).map(|m| m as u32), Some(raw));
        }
        assert_eq!(AccessMode::from_raw(4), None);
        assert_eq!(AccessMode::from_raw(u32::MAX), None);
        assert_eq!(MemoryType::from_raw(0).map(MemoryType::to_hsa), Some(hsa_sys::MEMORY_TYPE_NONE));
        assert_eq!(MemoryType::from_raw(1).map(MemoryType::to_hsa), Some(hsa_sys::MEMORY_TYPE_PINNED));
        assert_eq!(MemoryType::from_raw(2), None);
        assert_eq!(MemoryType::from_raw(0x8000_0000), None);
    }
}
