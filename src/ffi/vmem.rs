//! The 8 exports of IREE's `iree/hal/drivers/amdgpu/util/vmem.h`.
//!
//! Each export only validates its arguments, runs inside `ffi_boundary!` and
//! converts the result with `crate::status`; the logic is in `crate::vmem`.
//! Out-parameters are zeroed first (when they can be written), as upstream
//! does, so a failed call always leaves them zeroed. Every pointer is checked
//! for NULL and alignment and every enum value for range before use: bad
//! input is an INVALID_ARGUMENT status, never a crash.

use crate::ffi::panic::ffi_boundary;
use core::ptr::NonNull;

use hsa_sys::{
    hsa_agent_t, hsa_amd_memory_access_desc_t, hsa_amd_memory_pool_global_flag_t, hsa_amd_memory_pool_t,
};

use crate::log::Level;
use crate::status::{iree_status_t, to_iree_status, Error, Result, StatusCode};
use crate::vmem::abi::{
    iree_device_size_t, iree_hal_amdgpu_libhsa_t, iree_hal_amdgpu_topology_t,
    iree_hal_amdgpu_vmem_access_mode_t, iree_hal_amdgpu_vmem_memory_type_t,
    iree_hal_amdgpu_vmem_ringbuffer_t, iree_host_size_t, AccessMode, MemoryType, LIBHSA_ALIGN,
};
use crate::vmem::libhsa_table::{self, Func, Hsa};
use crate::vmem::{pool, ringbuffer, topology};

/// Checks an out-pointer: non-NULL and aligned for `T`.
fn out_ptr<T>(ptr: Option<NonNull<T>>, name: &str) -> Result<NonNull<T>> {
    let ptr = ptr.ok_or_else(|| Error::invalid_argument(format!("{name} must not be NULL")))?;
    if !ptr.as_ptr().is_aligned() {
        return Err(Error::invalid_argument(format!("{name} {:p} is misaligned", ptr.as_ptr())));
    }
    Ok(ptr)
}

/// Checks an input pointer: non-NULL and aligned to `align`.
fn in_ptr<T>(ptr: *const T, name: &str, align: usize) -> Result<NonNull<T>> {
    let ptr = NonNull::new(ptr.cast_mut())
        .ok_or_else(|| Error::invalid_argument(format!("{name} must not be NULL")))?;
    if (ptr.as_ptr() as usize) % align != 0 {
        return Err(Error::invalid_argument(format!("{name} {:p} is misaligned", ptr.as_ptr())));
    }
    Ok(ptr)
}

/// The HSA functions of the caller's table that `needed` lists.
///
/// A struct whose `initialized` flag is false is refused with
/// FAILED_PRECONDITION: IREE sets the flag once `hsa_init` succeeded and
/// zeroes the whole struct when it deinitializes it, so such a struct holds no
/// usable table (and searching it would misreport an unsupported layout).
fn hsa_from(libhsa: NonNull<iree_hal_amdgpu_libhsa_t>, needed: &[Func]) -> Result<Hsa> {
    // SAFETY: `libhsa` is non-NULL and aligned (checked by `in_ptr`) and, per
    // the export's contract, points to IREE's libhsa struct, whose first byte
    // is `bool initialized` in both IREE modes; any byte value is a valid u8.
    let initialized = unsafe { libhsa.cast::<u8>().read() };
    if initialized == 0 {
        return Err(Error::new(
            StatusCode::FailedPrecondition,
            "libhsa is not initialized (iree_hal_amdgpu_libhsa_t.initialized is false)",
        ));
    }
    // SAFETY: `libhsa` is non-NULL and aligned (checked by `in_ptr`); the
    // export's contract says it is the caller's initialized IREE libhsa struct.
    let functions = unsafe { libhsa_table::functions_for_table(libhsa.as_ptr()) };
    functions.require(needed)
}

fn libhsa_arg(libhsa: *const iree_hal_amdgpu_libhsa_t) -> Result<NonNull<iree_hal_amdgpu_libhsa_t>> {
    in_ptr(libhsa, "libhsa", LIBHSA_ALIGN)
}

fn memory_type_arg(raw: iree_hal_amdgpu_vmem_memory_type_t) -> Result<MemoryType> {
    MemoryType::from_raw(raw)
        // Upstream's text, which prints the value as a C int.
        .ok_or_else(|| Error::invalid_argument(format!("unsupported vmem memory type: {}", raw as i32)))
}

//===----------------------------------------------------------------------===//
// Virtual Memory Utilities
//===----------------------------------------------------------------------===//

/// An export's checks and call, run inside the panic boundary, with the
/// result returned as an IREE status.
fn status_export(name: &str, body: impl FnOnce() -> Result<()>) -> iree_status_t {
    ffi_boundary!(name, { to_iree_status(body()) })
}

fn find(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    agent: hsa_agent_t,
    match_flags: hsa_amd_memory_pool_global_flag_t,
    out_pool: Option<NonNull<hsa_amd_memory_pool_t>>,
) -> Result<()> {
    let out = out_ptr(out_pool, "out_pool")?;
    // SAFETY: `out` is non-NULL and aligned; the contract makes it writable.
    unsafe { out.write(hsa_amd_memory_pool_t::default()) };
    let hsa = hsa_from(libhsa_arg(libhsa)?, libhsa_table::FIND_FUNCS)?;
    let found = pool::find_global_memory_pool(&hsa, agent, match_flags)?;
    // SAFETY: as above.
    unsafe { out.write(found) };
    Ok(())
}

/// Finds the first memory pool of |agent| that is in the global segment,
/// allows runtime allocation and has any of |match_flags|. |out_pool| is
/// zeroed first; NOT_FOUND when no pool matches.
///
/// # Safety
/// `libhsa` is NULL or an initialized `iree_hal_amdgpu_libhsa_t`; `out_pool`
/// is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_find_global_memory_pool(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    agent: hsa_agent_t,
    match_flags: hsa_amd_memory_pool_global_flag_t,
    out_pool: Option<NonNull<hsa_amd_memory_pool_t>>,
) -> iree_status_t {
    status_export("iree_hal_amdgpu_find_global_memory_pool", || find(libhsa, agent, match_flags, out_pool))
}

/// Finds an allocatable coarse-grained global memory pool of |agent|
/// (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED).
///
/// # Safety
/// As `iree_hal_amdgpu_find_global_memory_pool`.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_find_coarse_global_memory_pool(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    agent: hsa_agent_t,
    out_pool: Option<NonNull<hsa_amd_memory_pool_t>>,
) -> iree_status_t {
    status_export("iree_hal_amdgpu_find_coarse_global_memory_pool", || {
        find(libhsa, agent, pool::COARSE_FLAGS, out_pool)
    })
}

/// Finds an allocatable fine-grained global memory pool of |agent|
/// (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED or
/// HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_EXTENDED_SCOPE_FINE_GRAINED).
///
/// # Safety
/// As `iree_hal_amdgpu_find_global_memory_pool`.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_find_fine_global_memory_pool(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    agent: hsa_agent_t,
    out_pool: Option<NonNull<hsa_amd_memory_pool_t>>,
) -> iree_status_t {
    status_export("iree_hal_amdgpu_find_fine_global_memory_pool", || {
        find(libhsa, agent, pool::FINE_FLAGS, out_pool)
    })
}

/// Like `iree_hal_amdgpu_find_coarse_global_memory_pool` but returns whether a
/// pool was found (into |out_pool|) instead of a status.
///
/// # Safety
/// As `iree_hal_amdgpu_find_global_memory_pool`.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_try_find_coarse_global_memory_pool(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    agent: hsa_agent_t,
    out_pool: Option<NonNull<hsa_amd_memory_pool_t>>,
) -> bool {
    ffi_boundary!("iree_hal_amdgpu_try_find_coarse_global_memory_pool", {
        find(libhsa, agent, pool::COARSE_FLAGS, out_pool).is_ok()
    })
}

/// Like `iree_hal_amdgpu_find_fine_global_memory_pool` but returns whether a
/// pool was found (into |out_pool|) instead of a status.
///
/// # Safety
/// As `iree_hal_amdgpu_find_global_memory_pool`.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_try_find_fine_global_memory_pool(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    agent: hsa_agent_t,
    out_pool: Option<NonNull<hsa_amd_memory_pool_t>>,
) -> bool {
    ffi_boundary!("iree_hal_amdgpu_try_find_fine_global_memory_pool", {
        find(libhsa, agent, pool::FINE_FLAGS, out_pool).is_ok()
    })
}

//===----------------------------------------------------------------------===//
// iree_hal_amdgpu_vmem_ringbuffer_t
//===----------------------------------------------------------------------===//

fn zeroed_out(
    out: Option<NonNull<iree_hal_amdgpu_vmem_ringbuffer_t>>,
) -> Result<NonNull<iree_hal_amdgpu_vmem_ringbuffer_t>> {
    let out = out_ptr(out, "out_ringbuffer")?;
    // SAFETY: `out` is non-NULL and aligned; the contract makes it writable.
    unsafe { out.write(iree_hal_amdgpu_vmem_ringbuffer_t::ZEROED) };
    Ok(out)
}

/// The common end of both initializers, once every argument is checked:
/// creates the ringbuffer and writes it to the zeroed `out`.
fn initialize_into(
    out: NonNull<iree_hal_amdgpu_vmem_ringbuffer_t>,
    libhsa: NonNull<iree_hal_amdgpu_libhsa_t>,
    memory_pool: hsa_amd_memory_pool_t,
    memory_type: MemoryType,
    min_capacity: iree_device_size_t,
    descs: &[hsa_amd_memory_access_desc_t],
) -> Result<()> {
    let hsa = hsa_from(libhsa, libhsa_table::INITIALIZE_FUNCS)?;
    let ringbuffer = ringbuffer::initialize(&hsa, memory_pool, memory_type, min_capacity, descs)?;
    // SAFETY: `out` was checked and zeroed by `zeroed_out`; the contract makes it writable.
    unsafe { out.write(ringbuffer) };
    Ok(())
}

/// The caller's `access_desc_count` descriptors at `access_descs`.
///
/// # Safety
/// `access_descs` is NULL or points to `access_desc_count` descriptors that
/// stay unchanged during the call.
unsafe fn access_descs_arg<'a>(
    access_desc_count: iree_host_size_t,
    access_descs: *const hsa_amd_memory_access_desc_t,
) -> Result<&'a [hsa_amd_memory_access_desc_t]> {
    if access_desc_count == 0 {
        return Ok(&[]);
    }
    let ptr = in_ptr(access_descs, "access_descs", core::mem::align_of::<hsa_amd_memory_access_desc_t>())?;
    if access_desc_count > isize::MAX as usize / core::mem::size_of::<hsa_amd_memory_access_desc_t>() {
        return Err(Error::invalid_argument(format!("access_desc_count {access_desc_count} is too large")));
    }
    // SAFETY: non-NULL, aligned, size in range (checked above); the caller
    // promises `access_desc_count` descriptors unchanged during the call.
    Ok(unsafe { core::slice::from_raw_parts(ptr.as_ptr(), access_desc_count) })
}

/// Creates a ringbuffer of at least |min_capacity| bytes (rounded up to the
/// pool's recommended allocation granule) whose physical memory, allocated
/// from |memory_pool| with |memory_type|, is mapped three times back to back;
/// each view gets the |access_desc_count| descriptors of |access_descs|
/// (at least one is required). |out_ringbuffer| is zeroed first and stays
/// zeroed on failure, and a failure leaves nothing allocated or mapped.
///
/// # Safety
/// `libhsa` is NULL or an initialized `iree_hal_amdgpu_libhsa_t`;
/// `access_descs` is NULL or points to `access_desc_count` descriptors;
/// `out_ringbuffer` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_vmem_ringbuffer_initialize(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    local_agent: hsa_agent_t,
    memory_pool: hsa_amd_memory_pool_t,
    memory_type: iree_hal_amdgpu_vmem_memory_type_t,
    min_capacity: iree_device_size_t,
    access_desc_count: iree_host_size_t,
    access_descs: *const hsa_amd_memory_access_desc_t,
    out_ringbuffer: Option<NonNull<iree_hal_amdgpu_vmem_ringbuffer_t>>,
) -> iree_status_t {
    // As upstream, the local agent plays no part when descriptors are explicit.
    let _ = local_agent;
    status_export("iree_hal_amdgpu_vmem_ringbuffer_initialize", || {
        let out = zeroed_out(out_ringbuffer)?;
        let libhsa = libhsa_arg(libhsa)?;
        let memory_type = memory_type_arg(memory_type)?;
        // SAFETY: the export's contract is `access_descs_arg`'s.
        let descs = unsafe { access_descs_arg(access_desc_count, access_descs)? };
        initialize_into(out, libhsa, memory_pool, memory_type, min_capacity, descs)
    })
}

/// Like `iree_hal_amdgpu_vmem_ringbuffer_initialize` with the access
/// descriptors derived from |topology| and |access_mode|: SHARED gives every
/// topology agent read/write; EXCLUSIVE gives |local_agent| read/write and no
/// one else access; EXCLUSIVE_CONSUMER gives |local_agent| read and every
/// other agent write; EXCLUSIVE_PRODUCER gives |local_agent| write and every
/// other agent read.
///
/// # Safety
/// `libhsa` is NULL or an initialized `iree_hal_amdgpu_libhsa_t`; `topology`
/// is NULL or a readable `iree_hal_amdgpu_topology_t`; `out_ringbuffer` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    local_agent: hsa_agent_t,
    memory_pool: hsa_amd_memory_pool_t,
    memory_type: iree_hal_amdgpu_vmem_memory_type_t,
    min_capacity: iree_device_size_t,
    topology: *const iree_hal_amdgpu_topology_t,
    access_mode: iree_hal_amdgpu_vmem_access_mode_t,
    out_ringbuffer: Option<NonNull<iree_hal_amdgpu_vmem_ringbuffer_t>>,
) -> iree_status_t {
    status_export("iree_hal_amdgpu_vmem_ringbuffer_initialize_with_topology", || {
        let out = zeroed_out(out_ringbuffer)?;
        let libhsa = libhsa_arg(libhsa)?;
        let topology = in_ptr(topology, "topology", core::mem::align_of::<iree_hal_amdgpu_topology_t>())?;
        // SAFETY: non-NULL and aligned; the contract says it is a readable
        // topology, unchanged during the call; every bit pattern is a valid value.
        let topology = unsafe { topology.as_ref() };
        topology::validate(topology)?;
        let mode = AccessMode::from_raw(access_mode)
            .ok_or_else(|| Error::invalid_argument(format!("unhandled access mode: {access_mode}")))?;
        let memory_type = memory_type_arg(memory_type)?;
        let descs = topology::access_descriptors(topology, local_agent, mode);
        initialize_into(out, libhsa, memory_pool, memory_type, min_capacity, &descs)
    })
}

fn deinitialize(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    ringbuffer: Option<NonNull<iree_hal_amdgpu_vmem_ringbuffer_t>>,
) -> Result<()> {
    let ptr = out_ptr(ringbuffer, "ringbuffer")?;
    // SAFETY: non-NULL and aligned; the contract says it is readable and writable.
    let state = unsafe { ptr.read() };
    if state.alloc_handle.handle != 0 || !state.va_base_ptr.is_null() {
        let hsa = hsa_from(libhsa_arg(libhsa)?, libhsa_table::DEINITIALIZE_FUNCS)?;
        ringbuffer::deinitialize(&hsa, &state)?;
    }
    // SAFETY: as above.
    unsafe { ptr.write(iree_hal_amdgpu_vmem_ringbuffer_t::ZEROED) };
    Ok(())
}

/// Unmaps and releases everything |ringbuffer| holds and zeroes it. A zeroed
/// ringbuffer is left as is. If the ringbuffer cannot be released (NULL
/// arguments, a table without the needed HSA functions, a corrupt struct) the
/// reason is logged and the struct is left unchanged.
///
/// # Safety
/// `libhsa` is NULL or an initialized `iree_hal_amdgpu_libhsa_t`;
/// `ringbuffer` is NULL or a readable and writable ringbuffer that was zeroed
/// or initialized by this library and not yet deinitialized.
#[no_mangle]
pub unsafe extern "C" fn iree_hal_amdgpu_vmem_ringbuffer_deinitialize(
    libhsa: *const iree_hal_amdgpu_libhsa_t,
    ringbuffer: Option<NonNull<iree_hal_amdgpu_vmem_ringbuffer_t>>,
) {
    ffi_boundary!("iree_hal_amdgpu_vmem_ringbuffer_deinitialize", {
        if let Err(error) = deinitialize(libhsa, ringbuffer) {
            crate::log!(Level::Error, "iree_hal_amdgpu_vmem_ringbuffer_deinitialize: {}", error.message);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::status_code;

    #[test]
    fn uninitialized_table_is_a_failed_precondition() {
        // A dynamic-mode struct as IREE leaves it after deinitializing it:
        // all zero, `initialized` false.
        #[repr(C, align(8))]
        struct ZeroTable([u64; 2 + 118]);
        let table = ZeroTable([0; 120]);
        let libhsa = (&table as *const ZeroTable).cast::<iree_hal_amdgpu_libhsa_t>();
        let mut pool = hsa_amd_memory_pool_t { handle: 7 };
        // SAFETY: `table` is a live, aligned struct of IREE's dynamic layout;
        // `pool` is writable.
        let status = unsafe {
            iree_hal_amdgpu_find_coarse_global_memory_pool(
                libhsa,
                hsa_agent_t { handle: 1 },
                Some(NonNull::from(&mut pool)),
            )
        };
        assert_eq!(status_code(status), StatusCode::FailedPrecondition as u32);
        assert_eq!(pool.handle, 0);
        let mut rb = iree_hal_amdgpu_vmem_ringbuffer_t::ZEROED;
        let desc = hsa_amd_memory_access_desc_t { permissions: 3, agent_handle: hsa_agent_t { handle: 1 } };
        // SAFETY: as above; `desc` is one readable descriptor, `rb` writable.
        let status = unsafe {
            iree_hal_amdgpu_vmem_ringbuffer_initialize(
                libhsa,
                hsa_agent_t { handle: 1 },
                hsa_amd_memory_pool_t { handle: 2 },
                0,
                4096,
                1,
                &desc,
                Some(NonNull::from(&mut rb)),
            )
        };
        assert_eq!(status_code(status), StatusCode::FailedPrecondition as u32);
        assert!(rb.is_zeroed());
    }
}
