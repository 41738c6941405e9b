//! The triple-mapped ringbuffer: one physical allocation mapped three times
//! back to back into one reserved virtual range.
//!
//! Creation is a sequence of HSA steps (reserve, create the handle, map three
//! views, set access on each view). Each completed step is recorded in an
//! `Undo` guard; on any failure (or a panic) the guard undoes exactly the
//! recorded steps in reverse dependency order — unmap the views that were
//! mapped, release the handle if it was created, free the reservation if it
//! was made — and nothing else. Upstream instead ran its full deinitialize on
//! the partial struct and so unmapped views that had never been mapped.

use core::ffi::c_void;

use hsa_sys::*;

use super::abi::{iree_hal_amdgpu_vmem_ringbuffer_t, MemoryType};
use super::libhsa_table::VmemApi;
use crate::log::Level;
use crate::status::{Error, Result, StatusCode};

/// Number of virtual views of the physical allocation.
pub const VIEW_COUNT: usize = 3;

/// The capacity for `min_capacity` and the pool's recommended granule:
/// `min_capacity` rounded up to a multiple of `granule`, checked so that the
/// `3 * capacity` reservation is representable.
pub fn round_capacity(min_capacity: usize, granule: u64) -> Result<usize> {
    if min_capacity == 0 {
        return Err(Error::invalid_argument("min_capacity must be non-zero"));
    }
    if granule == 0 || !granule.is_power_of_two() {
        return Err(Error::invalid_argument(format!(
            "memory pool reports RUNTIME_ALLOC_REC_GRANULE {granule}, which is not a non-zero power of two; \
             the pool cannot back a vmem ringbuffer"
        )));
    }
    let granule = usize::try_from(granule).map_err(|_| {
        Error::invalid_argument(format!("RUNTIME_ALLOC_REC_GRANULE {granule} exceeds the address space"))
    })?;
    let mask = granule - 1;
    let capacity = min_capacity.checked_add(mask).map(|v| v & !mask).ok_or_else(|| {
        Error::invalid_argument(format!(
            "min_capacity {min_capacity} overflows when rounded up to the granule {granule}"
        ))
    })?;
    // Pointer offsets up to 3 * capacity must also fit in isize.
    match capacity.checked_mul(VIEW_COUNT) {
        Some(total) if total <= isize::MAX as usize => Ok(capacity),
        _ => Err(Error::invalid_argument(format!(
            "ringbuffer capacity {capacity} (min_capacity {min_capacity} rounded to the granule {granule}) \
             overflows the 3*capacity virtual reservation"
        ))),
    }
}

fn view(va_base: *mut c_void, capacity: usize, index: usize) -> *mut c_void {
    // wrapping: the address is only handed to HSA, never dereferenced here.
    va_base.cast::<u8>().wrapping_add(index * capacity).cast()
}

/// What has been done so far; undoes exactly that when dropped armed.
struct Undo<'a> {
    api: &'a dyn VmemApi,
    capacity: usize,
    reservation: Option<*mut c_void>,
    handle: Option<hsa_amd_vmem_alloc_handle_t>,
    mapped: [bool; VIEW_COUNT],
    armed: bool,
}

impl Drop for Undo<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(va_base) = self.reservation else {
            return;
        };
        for (index, mapped) in self.mapped.iter().enumerate() {
            if *mapped {
                let status = self.api.unmap(view(va_base, self.capacity, index), self.capacity);
                log_undo_failure("hsa_amd_vmem_unmap", status);
            }
        }
        if let Some(handle) = self.handle {
            log_undo_failure("hsa_amd_vmem_handle_release", self.api.handle_release(handle));
        }
        log_undo_failure(
            "hsa_amd_vmem_address_free",
            self.api.address_free(va_base, self.capacity * VIEW_COUNT),
        );
    }
}

fn log_undo_failure(symbol: &str, status: hsa_status_t) {
    if status != HSA_STATUS_SUCCESS {
        crate::log!(
            Level::Warning,
            "undoing a failed ringbuffer initialization: {symbol} returned {status:#x}"
        );
    }
}

#[track_caller]
fn check(status: hsa_status_t, symbol: &str, details: impl FnOnce() -> String) -> Result<()> {
    if status == HSA_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(Error::from_hsa(symbol, status, &details()))
    }
}

/// Creates a ringbuffer of at least `min_capacity` bytes from `pool`, with
/// `descs` applied to each of the three views. On failure nothing remains
/// allocated, reserved or mapped.
pub fn initialize(
    api: &dyn VmemApi,
    pool: hsa_amd_memory_pool_t,
    memory_type: MemoryType,
    min_capacity: usize,
    descs: &[hsa_amd_memory_access_desc_t],
) -> Result<iree_hal_amdgpu_vmem_ringbuffer_t> {
    if descs.is_empty() {
        return Err(Error::invalid_argument(
            "at least one access descriptor is required (without one no agent could access the ringbuffer)",
        ));
    }
    let (status, granule) = api.pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE);
    check(status, "hsa_amd_memory_pool_get_info", || {
        format!("querying RUNTIME_ALLOC_REC_GRANULE of memory pool {:#x}", pool.handle)
    })?;
    let granule = u64::from_ne_bytes(granule);
    let capacity = round_capacity(min_capacity, granule)?;
    let reserve_size = capacity * VIEW_COUNT;

    let mut undo =
        Undo { api, capacity, reservation: None, handle: None, mapped: [false; VIEW_COUNT], armed: true };

    let (status, va_base) = api.address_reserve_align(reserve_size, granule);
    check(status, "hsa_amd_vmem_address_reserve_align", || {
        format!("reserving ringbuffer capacity*3 ({capacity}*3={reserve_size})")
    })?;
    if va_base.is_null() {
        return Err(Error::new(
            StatusCode::Internal,
            "[hsa_amd_vmem_address_reserve_align] reported success without an address",
        ));
    }
    undo.reservation = Some(va_base);

    let (status, handle) = api.handle_create(pool, capacity, memory_type.to_hsa());
    check(status, "hsa_amd_vmem_handle_create", || {
        format!("allocating {capacity} physical bytes from memory pool {:#x}", pool.handle)
    })?;
    if handle.handle == 0 {
        // A zero handle means "none" in the ringbuffer struct, so it could
        // never be released later; refuse it.
        return Err(Error::new(
            StatusCode::Internal,
            "[hsa_amd_vmem_handle_create] reported success with a zero handle",
        ));
    }
    undo.handle = Some(handle);

    for index in 0..VIEW_COUNT {
        let status = api.map(view(va_base, capacity, index), capacity, handle);
        check(status, "hsa_amd_vmem_map", || {
            format!("mapping view {index} of the ringbuffer ({capacity} bytes)")
        })?;
        undo.mapped[index] = true;
    }

    for index in 0..VIEW_COUNT {
        let status = api.set_access(view(va_base, capacity, index), capacity, descs);
        check(status, "hsa_amd_vmem_set_access", || {
            format!("setting access of {} agent(s) on view {index} of the ringbuffer", descs.len())
        })?;
    }

    undo.armed = false;
    Ok(iree_hal_amdgpu_vmem_ringbuffer_t {
        capacity,
        alloc_handle: handle,
        va_base_ptr: va_base,
        ring_base_ptr: view(va_base, capacity, 1),
    })
}

/// Releases everything a ringbuffer holds: unmaps the three views and releases
/// the handle (if there is a handle), then frees the reservation (if there is
/// one). HSA failures are logged and the release continues, as upstream.
/// Returns an error, and calls nothing, when the struct cannot be one this
/// library produced (its ranges would overflow the address space, or its
/// capacity does not match its two pointers).
pub fn deinitialize(api: &dyn VmemApi, ringbuffer: &iree_hal_amdgpu_vmem_ringbuffer_t) -> Result<()> {
    let capacity = ringbuffer.capacity;
    let va_base = ringbuffer.va_base_ptr;
    let has_handle = ringbuffer.alloc_handle.handle != 0;
    let total = capacity.checked_mul(VIEW_COUNT);
    let in_address_space = total.is_some_and(|t| (va_base as usize).checked_add(t).is_some());
    if (has_handle || !va_base.is_null()) && !in_address_space {
        return Err(Error::invalid_argument(format!(
            "ringbuffer is corrupt: va_base_ptr {va_base:p} + 3 * capacity {capacity} overflows the address space"
        )));
    }
    if has_handle && va_base.is_null() {
        return Err(Error::invalid_argument("ringbuffer is corrupt: it has a handle but no va_base_ptr"));
    }
    // The ranges released below are computed from `capacity`; a capacity that
    // is not the one the ringbuffer was created with would unmap and free
    // ranges that may belong to other allocations. `initialize` always sets
    // `ring_base_ptr = va_base_ptr + capacity` with a non-zero capacity, so
    // that relation must hold.
    if !va_base.is_null() && (capacity == 0 || ringbuffer.ring_base_ptr != view(va_base, capacity, 1)) {
        return Err(Error::invalid_argument(format!(
            "ringbuffer is corrupt: capacity {capacity} does not match va_base_ptr {va_base:p} and \
             ring_base_ptr {:p}",
            ringbuffer.ring_base_ptr
        )));
    }
    let warn = |symbol: &str, status: hsa_status_t| {
        if status != HSA_STATUS_SUCCESS {
            crate::log!(Level::Warning, "ringbuffer deinitialize: {symbol} returned {status:#x}");
        }
    };
    if has_handle {
        for index in 0..VIEW_COUNT {
            warn("hsa_amd_vmem_unmap", api.unmap(view(va_base, capacity, index), capacity));
        }
        warn("hsa_amd_vmem_handle_release", api.handle_release(ringbuffer.alloc_handle));
    }
    if !va_base.is_null() {
        warn("hsa_amd_vmem_address_free", api.address_free(va_base, capacity * VIEW_COUNT));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vmem::fake::{FakeHsa, FakePool};

    const GRANULE: u64 = 65536;

    fn hsa() -> FakeHsa {
        FakeHsa::with_pools(vec![FakePool { segment: 0, flags: 4, alloc_allowed: true, granule: GRANULE }])
    }

    fn descs() -> Vec<hsa_amd_memory_access_desc_t> {
        vec![hsa_amd_memory_access_desc_t {
            permissions: HSA_ACCESS_PERMISSION_RW,
            agent_handle: hsa_agent_t { handle: 1 },
        }]
    }

    #[test]
    fn rounding_and_overflow() {
        assert_eq!(round_capacity(1, 4096).unwrap(), 4096);
        assert_eq!(round_capacity(4096, 4096).unwrap(), 4096);
        assert_eq!(round_capacity(4097, 4096).unwrap(), 8192);
        assert_eq!(round_capacity(1, 1).unwrap(), 1);
        for (min, granule) in [
            (0, 4096),
            (1, 0),
            (1, 3),
            (1, 4097),
            (usize::MAX, 4096),
            (usize::MAX / 3 + 1, 1),
            (usize::MAX - 10, 16),
        ] {
            let err = round_capacity(min, granule).unwrap_err();
            assert_eq!(err.code, StatusCode::InvalidArgument, "{min} {granule}: {}", err.message);
        }
        // Largest capacity whose 3x still fits in isize.
        let max = (isize::MAX as usize / 3) & !4095;
        assert_eq!(round_capacity(max, 4096).unwrap(), max);
        assert!(round_capacity(max + 4096, 4096).is_err());
    }

    #[test]
    fn success_sequence_matches_upstream() {
        let hsa = hsa();
        let pool = FakeHsa::pool_handle(0);
        let rb =
            initialize(&hsa, pool, MemoryType::IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_PINNED_HOST, 100, &descs())
                .unwrap();
        assert_eq!(rb.capacity, GRANULE as usize);
        assert_eq!(rb.ring_base_ptr as usize, rb.va_base_ptr as usize + GRANULE as usize);
        let calls = hsa.calls();
        let names: Vec<&str> = calls.iter().map(|c| c.0).collect();
        assert_eq!(
            names,
            [
                "hsa_amd_memory_pool_get_info",
                "hsa_amd_vmem_address_reserve_align",
                "hsa_amd_vmem_handle_create",
                "hsa_amd_vmem_map",
                "hsa_amd_vmem_map",
                "hsa_amd_vmem_map",
                "hsa_amd_vmem_set_access",
                "hsa_amd_vmem_set_access",
                "hsa_amd_vmem_set_access",
            ]
        );
        // reserve(3*cap, align granule); handle_create(pool, cap, PINNED)
        assert_eq!(calls[1].1[..2], [3 * GRANULE, GRANULE]);
        assert_eq!(calls[2].1[..3], [pool.handle, GRANULE, MEMORY_TYPE_PINNED as u64]);
        for i in 0..3 {
            assert_eq!(calls[3 + i].1[0], rb.va_base_ptr as u64 + i as u64 * GRANULE);
            assert_eq!(calls[6 + i].1[..3], [rb.va_base_ptr as u64 + i as u64 * GRANULE, GRANULE, 1]);
        }
        assert!(hsa.live().iter().all(|n| *n > 0));
        deinitialize(&hsa, &rb).unwrap();
        assert_eq!(hsa.live(), [0, 0, 0]);
    }

    #[test]
    fn every_failure_point_undoes_exactly_what_was_done() {
        let steps = [
            ("hsa_amd_memory_pool_get_info", 1),
            ("hsa_amd_vmem_address_reserve_align", 1),
            ("hsa_amd_vmem_handle_create", 1),
            ("hsa_amd_vmem_map", 1),
            ("hsa_amd_vmem_map", 2),
            ("hsa_amd_vmem_map", 3),
            ("hsa_amd_vmem_set_access", 1),
            ("hsa_amd_vmem_set_access", 2),
            ("hsa_amd_vmem_set_access", 3),
        ];
        for (step, (function, nth)) in steps.into_iter().enumerate() {
            let hsa = hsa();
            hsa.fail_nth(function, nth, HSA_STATUS_ERROR_OUT_OF_RESOURCES);
            let err = initialize(
                &hsa,
                FakeHsa::pool_handle(0),
                MemoryType::IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
                1,
                &descs(),
            )
            .unwrap_err();
            assert_eq!(err.code, StatusCode::ResourceExhausted, "{function} #{nth}");
            assert!(
                err.message.starts_with(&format!("[{function}] HSA_STATUS_ERROR_OUT_OF_RESOURCES")),
                "{}",
                err.message
            );
            assert_eq!(hsa.live(), [0, 0, 0], "{function} #{nth} left objects behind");
            // Exactly the mapped views are unmapped.
            let maps_done = (step.saturating_sub(3)).min(3);
            assert_eq!(hsa.count("hsa_amd_vmem_unmap"), maps_done, "{function} #{nth}");
            assert_eq!(hsa.count("hsa_amd_vmem_handle_release"), usize::from(step >= 3));
            assert_eq!(hsa.count("hsa_amd_vmem_address_free"), usize::from(step >= 2));
            // No call ever failed besides the injected one.
            assert_eq!(hsa.failures(), 1);
        }
    }

    #[test]
    fn zero_descriptors_and_bad_granules_are_rejected_before_allocating() {
        let hsa = hsa();
        let e = initialize(
            &hsa,
            FakeHsa::pool_handle(0),
            MemoryType::IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
            1,
            &[],
        )
        .unwrap_err();
        assert_eq!(e.code, StatusCode::InvalidArgument);
        assert!(hsa.calls().is_empty());
        for granule in [0, 3, 6000] {
            let hsa =
                FakeHsa::with_pools(vec![FakePool { segment: 0, flags: 4, alloc_allowed: true, granule }]);
            let e = initialize(
                &hsa,
                FakeHsa::pool_handle(0),
                MemoryType::IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
                1,
                &descs(),
            )
            .unwrap_err();
            assert_eq!(e.code, StatusCode::InvalidArgument);
            assert_eq!(hsa.calls().len(), 1, "only the granule query");
        }
    }

    #[test]
    fn deinitialize_zeroed_is_a_no_op_and_corrupt_is_refused() {
        let hsa = hsa();
        deinitialize(&hsa, &iree_hal_amdgpu_vmem_ringbuffer_t::ZEROED).unwrap();
        assert!(hsa.calls().is_empty());
        let corrupt = iree_hal_amdgpu_vmem_ringbuffer_t {
            capacity: usize::MAX / 2,
            alloc_handle: hsa_amd_vmem_alloc_handle_t { handle: 1 },
            va_base_ptr: 0x1000 as *mut c_void,
            ring_base_ptr: core::ptr::null_mut(),
        };
        assert!(deinitialize(&hsa, &corrupt).is_err());
        let no_va = iree_hal_amdgpu_vmem_ringbuffer_t {
            capacity: 4096,
            va_base_ptr: core::ptr::null_mut(),
            ..corrupt
        };
        assert!(deinitialize(&hsa, &no_va).is_err());
        assert!(hsa.calls().is_empty());
    }

    #[test]
    fn deinitialize_refuses_a_capacity_that_does_not_match() {
        let hsa = hsa();
        let rb = initialize(
            &hsa,
            FakeHsa::pool_handle(0),
            MemoryType::IREE_HAL_AMDGPU_VMEM_MEMORY_TYPE_DEFAULT,
            1,
            &descs(),
        )
        .unwrap();
        let calls_before = hsa.calls().len();
        // A doubled capacity would unmap va+2c and va+4c (outside the
        // reservation) and free 6c bytes; a zero one would pass zero sizes.
        for capacity in [rb.capacity * 2, rb.capacity / 2, 0] {
            let tampered = iree_hal_amdgpu_vmem_ringbuffer_t { capacity, ..rb };
            let err = deinitialize(&hsa, &tampered).unwrap_err();
            assert_eq!(err.code, StatusCode::InvalidArgument, "{capacity}");
            assert!(err.message.contains("does not match"), "{}", err.message);
        }
        let moved_ring = iree_hal_amdgpu_vmem_ringbuffer_t { ring_base_ptr: rb.va_base_ptr, ..rb };
        assert!(deinitialize(&hsa, &moved_ring).is_err());
        assert_eq!(hsa.calls().len(), calls_before, "nothing called for a corrupt struct");
        deinitialize(&hsa, &rb).unwrap();
        assert_eq!(hsa.live(), [0, 0, 0]);
    }
}
