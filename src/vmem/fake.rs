//! A fake HSA runtime for the unit tests of the vmem logic: pools with
//! attributes, vmem bookkeeping (no real memory), a call log, live-object
//! counts and fault injection (the nth call of a function fails).

use core::cell::RefCell;
use core::ffi::c_void;

use hsa_sys::*;

use super::libhsa_table::VmemApi;

#[derive(Clone, Copy, Debug)]
pub struct FakePool {
    pub segment: u32,
    pub flags: u32,
    pub alloc_allowed: bool,
    pub granule: u64,
}

#[derive(Default)]
struct State {
    calls: Vec<(&'static str, [u64; 4])>,
    faults: Vec<(&'static str, usize, hsa_status_t)>,
    failures: usize,
    next_va: u64,
    next_handle: u64,
    reservations: Vec<(u64, u64)>,
    handles: Vec<u64>,
    mappings: Vec<(u64, u64)>,
}

pub struct FakeHsa {
    pools: Vec<FakePool>,
    state: RefCell<State>,
}

impl FakeHsa {
    pub fn with_pools(pools: Vec<FakePool>) -> FakeHsa {
        FakeHsa {
            pools,
            state: RefCell::new(State { next_va: 0x7000_0000_0000, next_handle: 1, ..State::default() }),
        }
    }

    pub fn pool_handle(index: usize) -> hsa_amd_memory_pool_t {
        hsa_amd_memory_pool_t { handle: 0x100 + index as u64 }
    }

    pub fn fail_nth(&self, function: &'static str, nth: usize, status: hsa_status_t) {
        let mut s = self.state.borrow_mut();
        let already = s.calls.iter().filter(|c| c.0 == function).count();
        s.faults.push((function, already + nth, status));
    }

    pub fn calls(&self) -> Vec<(&'static str, [u64; 4])> {
        self.state.borrow().calls.clone()
    }

    pub fn count(&self, function: &str) -> usize {
        self.state.borrow().calls.iter().filter(|c| c.0 == function).count()
    }

    pub fn failures(&self) -> usize {
        self.state.borrow().failures
    }

    /// Live reservations, handles, mappings.
    pub fn live(&self) -> [usize; 3] {
        let s = self.state.borrow();
        [s.reservations.len(), s.handles.len(), s.mappings.len()]
    }

    /// Records the call; returns the injected status if this call must fail.
    fn enter(&self, function: &'static str, args: [u64; 4]) -> Option<hsa_status_t> {
        let mut s = self.state.borrow_mut();
        s.calls.push((function, args));
        let n = s.calls.iter().filter(|c| c.0 == function).count();
        let fault = s.faults.iter().find(|f| f.0 == function && f.1 == n).map(|f| f.2);
        if fault.is_some() {
            s.failures += 1;
        }
        fault
    }

    fn pool(&self, pool: hsa_amd_memory_pool_t) -> Option<&FakePool> {
        self.pools.get((pool.handle as usize).wrapping_sub(0x100))
    }
}

impl VmemApi for FakeHsa {
    fn pool_get_info(
        &self,
        pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_memory_pool_info_t,
    ) -> (hsa_status_t, [u8; 8]) {
        if let Some(st) = self.enter("hsa_amd_memory_pool_get_info", [pool.handle, attribute as u64, 0, 0]) {
            return (st, [0; 8]);
        }
        let Some(p) = self.pool(pool) else {
            return (HSA_STATUS_ERROR_INVALID_ARGUMENT, [0; 8]);
        };
        let value: u64 = match attribute {
            HSA_AMD_MEMORY_POOL_INFO_SEGMENT => p.segment as u64,
            HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS => p.flags as u64,
            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED => p.alloc_allowed as u64,
            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_REC_GRANULE => p.granule,
            _ => return (HSA_STATUS_ERROR_INVALID_ARGUMENT, [0; 8]),
        };
        (HSA_STATUS_SUCCESS, value.to_ne_bytes())
    }

    fn iterate_pools(
        &self,
        agent: hsa_agent_t,
        callback: &mut dyn FnMut(hsa_amd_memory_pool_t) -> hsa_status_t,
    ) -> hsa_status_t {
        if let Some(st) = self.enter("hsa_amd_agent_iterate_memory_pools", [agent.handle, 0, 0, 0]) {
            return st;
        }
        for i in 0..self.pools.len() {
            let st = callback(Self::pool_handle(i));
            if st != HSA_STATUS_SUCCESS {
                return st;
            }
        }
        HSA_STATUS_SUCCESS
    }

    fn address_reserve_align(&self, size: usize, alignment: u64) -> (hsa_status_t, *mut c_void) {
        if let Some(st) = self.enter("hsa_amd_vmem_address_reserve_align", [size as u64, alignment, 0, 0]) {
            return (st, core::ptr::null_mut());
        }
        let mut s = self.state.borrow_mut();
        let va = s.next_va;
        s.next_va += (size as u64).next_multiple_of(1 << 30);
        s.reservations.push((va, size as u64));
        (HSA_STATUS_SUCCESS, va as *mut c_void)
    }

    fn address_free(&self, va: *mut c_void, size: usize) -> hsa_status_t {
        if let Some(st) = self.enter("hsa_amd_vmem_address_free", [va as u64, size as u64, 0, 0]) {
            return st;
        }
        let mut s = self.state.borrow_mut();
        let Some(i) = s.reservations.iter().position(|r| *r == (va as u64, size as u64)) else {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        };
        if s.mappings.iter().any(|m| m.0 >= va as u64 && m.0 < va as u64 + size as u64) {
            return HSA_STATUS_ERROR_RESOURCE_FREE;
        }
        s.reservations.remove(i);
        HSA_STATUS_SUCCESS
    }

    fn handle_create(
        &self,
        pool: hsa_amd_memory_pool_t,
        size: usize,
        memory_type: hsa_amd_memory_type_t,
    ) -> (hsa_status_t, hsa_amd_vmem_alloc_handle_t) {
        let none = hsa_amd_vmem_alloc_handle_t::default();
        if let Some(st) =
            self.enter("hsa_amd_vmem_handle_create", [pool.handle, size as u64, memory_type as u64, 0])
        {
            return (st, none);
        }
        let mut s = self.state.borrow_mut();
        let h = s.next_handle;
        s.next_handle += 1;
        s.handles.push(h);
        (HSA_STATUS_SUCCESS, hsa_amd_vmem_alloc_handle_t { handle: h })
    }

    fn handle_release(&self, handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t {
        if let Some(st) = self.enter("hsa_amd_vmem_handle_release", [handle.handle, 0, 0, 0]) {
            return st;
        }
        let mut s = self.state.borrow_mut();
        match s.handles.iter().position(|h| *h == handle.handle) {
            Some(i) => {
                s.handles.remove(i);
                HSA_STATUS_SUCCESS
            }
            None => HSA_STATUS_ERROR_INVALID_ARGUMENT,
        }
    }

    fn map(&self, va: *mut c_void, size: usize, handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t {
        if let Some(st) = self.enter("hsa_amd_vmem_map", [va as u64, size as u64, handle.handle, 0]) {
            return st;
        }
        let mut s = self.state.borrow_mut();
        if s.mappings.iter().any(|m| m.0 == va as u64) {
            return HSA_STATUS_ERROR_INVALID_ARGUMENT;
        }
        s.mappings.push((va as u64, size as u64));
        HSA_STATUS_SUCCESS
    }

    fn unmap(&self, va: *mut c_void, size: usize) -> hsa_status_t {
        if let Some(st) = self.enter("hsa_amd_vmem_unmap", [va as u64, size as u64, 0, 0]) {
            return st;
        }
        let mut s = self.state.borrow_mut();
        match s.mappings.iter().position(|m| *m == (va as u64, size as u64)) {
            Some(i) => {
                s.mappings.remove(i);
                HSA_STATUS_SUCCESS
            }
            // Unmapping what is not mapped is an error, as in ROCr.
            None => HSA_STATUS_ERROR_INVALID_ARGUMENT,
        }
    }

    fn set_access(
        &self,
        va: *mut c_void,
        size: usize,
        descs: &[hsa_amd_memory_access_desc_t],
    ) -> hsa_status_t {
        if let Some(st) =
            self.enter("hsa_amd_vmem_set_access", [va as u64, size as u64, descs.len() as u64, 0])
        {
            return st;
        }
        HSA_STATUS_SUCCESS
    }
}
