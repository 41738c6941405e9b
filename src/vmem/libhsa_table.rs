//! The HSA functions of the vmem half, found in the caller's
//! `iree_hal_amdgpu_libhsa_t` by what they are, never by a hard-coded slot.
//!
//! IREE passes its HSA function table by pointer, and the order of the table's
//! entries changed between IREE versions whose `vmem.h` is byte-identical
//! (`hsa_amd_vmem_address_reserve_align` sits in slot 32, 33 or 34:
//! docs/iree.md#layouts-shared-with-iree).
//! So each slot's pointer is identified by the exported symbol at exactly that
//! address (`crate::hsa::identify`, dladdr), and a function is used only when
//! a slot was identified as it. A needed function that no slot holds makes the
//! operation fail with INCOMPATIBLE naming that function; nothing is called.
//!
//! # How far the scan reads
//!
//! Slots are read from byte offset 16 (after `bool initialized` and the
//! library handle) upwards, and the scan stops as soon as all nine functions
//! below are identified — slot 40 at the latest in every known layout. It
//! never reads past slot [`MAX_SCAN_SLOTS`]` - 1`: 116 is the entry count of
//! the smallest table any IREE version with this API had (Jun 2025; later
//! versions have 117 and 118, and the loader extension table follows the
//! function table in all of them), so every slot read lies inside the
//! caller's struct whatever its version. A future IREE that moved a needed
//! function past slot 115 yields INCOMPATIBLE, not an out-of-bounds read.
//!
//! # Cache
//!
//! dladdr walks symbol tables, so identification results are cached per table
//! pointer in a small process-wide cache (a spin lock guards only copies in and
//! out; no HSA call or dladdr runs under it). A table pointer can be reused for
//! another table (a struct on the stack, freed and reallocated), so a cached
//! result is trusted only if every slot the scan read still holds the same
//! pointer; otherwise the table is scanned again.
//!
//! With the `libhsa-static` feature IREE's struct holds no table and HSA is
//! called directly: the functions are then resolved by name, once per process,
//! through `crate::hsa::resolve_fn`.

use core::ffi::{c_void, CStr};

use hsa_sys::*;

use crate::status::{Error, Result, StatusCode};

//===----------------------------------------------------------------------===//
// The functions the vmem half calls
//===----------------------------------------------------------------------===//

/// One HSA function the vmem half calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Func {
    MemoryPoolGetInfo = 0,
    AgentIterateMemoryPools,
    VmemAddressReserveAlign,
    VmemAddressFree,
    VmemSetAccess,
    VmemHandleCreate,
    VmemHandleRelease,
    VmemMap,
    VmemUnmap,
}

/// Number of `Func` values.
pub const FUNC_COUNT: usize = 9;

impl Func {
    pub const ALL: [Func; FUNC_COUNT] = [
        Func::MemoryPoolGetInfo,
        Func::AgentIterateMemoryPools,
        Func::VmemAddressReserveAlign,
        Func::VmemAddressFree,
        Func::VmemSetAccess,
        Func::VmemHandleCreate,
        Func::VmemHandleRelease,
        Func::VmemMap,
        Func::VmemUnmap,
    ];

    /// The exported HSA symbol name.
    pub fn name(self) -> &'static CStr {
        match self {
            Func::MemoryPoolGetInfo => c"hsa_amd_memory_pool_get_info",
            Func::AgentIterateMemoryPools => c"hsa_amd_agent_iterate_memory_pools",
            Func::VmemAddressReserveAlign => c"hsa_amd_vmem_address_reserve_align",
            Func::VmemAddressFree => c"hsa_amd_vmem_address_free",
            Func::VmemSetAccess => c"hsa_amd_vmem_set_access",
            Func::VmemHandleCreate => c"hsa_amd_vmem_handle_create",
            Func::VmemHandleRelease => c"hsa_amd_vmem_handle_release",
            Func::VmemMap => c"hsa_amd_vmem_map",
            Func::VmemUnmap => c"hsa_amd_vmem_unmap",
        }
    }

    pub fn name_str(self) -> &'static str {
        // The names above are ASCII literals.
        self.name().to_str().unwrap_or("?")
    }

    /// The function an exported symbol name denotes, if it is one we call.
    pub fn from_name(name: &CStr) -> Option<Func> {
        Func::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What finding pools needs.
pub const FIND_FUNCS: &[Func] = &[Func::AgentIterateMemoryPools, Func::MemoryPoolGetInfo];
/// What creating a ringbuffer needs (including everything its undo needs, so a
/// failure half-way can always be undone).
pub const INITIALIZE_FUNCS: &[Func] = &[
    Func::MemoryPoolGetInfo,
    Func::VmemAddressReserveAlign,
    Func::VmemHandleCreate,
    Func::VmemMap,
    Func::VmemSetAccess,
    Func::VmemUnmap,
    Func::VmemHandleRelease,
    Func::VmemAddressFree,
];
/// What releasing a ringbuffer needs.
pub const DEINITIALIZE_FUNCS: &[Func] = &[Func::VmemUnmap, Func::VmemHandleRelease, Func::VmemAddressFree];

/// A C function pointer of unknown signature, as read from a table slot.
pub type RawFn = unsafe extern "C" fn();

/// The identified functions of one table (`None` = no slot holds it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Functions {
    fns: [Option<RawFn>; FUNC_COUNT],
}

/// Equal when every function has the same address (a plain address
/// comparison: both sides come from the same table slots, not from Rust items).
impl PartialEq for Functions {
    fn eq(&self, other: &Self) -> bool {
        let addresses = |f: &Functions| f.fns.map(|p| p.map_or(0, |p| p as usize));
        addresses(self) == addresses(other)
    }
}
impl Eq for Functions {}

impl Functions {
    pub fn get(&self, func: Func) -> Option<RawFn> {
        self.fns[func as usize]
    }

    /// Checks that every function of `needed` was identified.
    pub fn require(&self, needed: &[Func]) -> Result<Hsa> {
        if let Some(missing) = needed.iter().find(|f| self.get(**f).is_none()) {
            return Err(Error::new(
                StatusCode::Incompatible,
                format!(
                    "{} was not found in the iree_hal_amdgpu_libhsa_t table (first {} slots \
                     searched by symbol identity, after slot 0 = hsa_init); this IREE build's HSA \
                     table is not supported (an IREE built with IREE_HAL_AMDGPU_LIBHSA_STATIC=1 \
                     needs amdgpu-dropin's libhsa-static feature)",
                    missing.name_str(),
                    MAX_SCAN_SLOTS
                ),
            ));
        }
        Ok(Hsa { fns: *self })
    }
}

//===----------------------------------------------------------------------===//
// Scanning a table
//===----------------------------------------------------------------------===//

/// Slots read at most (see the module docs for why 116).
pub const MAX_SCAN_SLOTS: usize = 116;

/// The outcome of scanning one table.
#[derive(Clone, Debug)]
pub struct Scan {
    pub functions: Functions,
    /// Slot index of each identified function.
    pub slots: [Option<usize>; FUNC_COUNT],
    /// The raw contents of every slot read, in order (the cache's validation key).
    pub read: Vec<Option<RawFn>>,
}

/// Scans slots `0..limit` in order, reading each with `read_slot` and naming
/// it with `identify`; stops as soon as every `Func` is identified. The first
/// slot identified as a function wins (a later duplicate is ignored).
pub fn scan_slots(
    limit: usize,
    mut read_slot: impl FnMut(usize) -> Option<RawFn>,
    mut identify: impl FnMut(RawFn) -> Option<Func>,
) -> Scan {
    let mut scan =
        Scan { functions: Functions::default(), slots: [None; FUNC_COUNT], read: Vec::with_capacity(48) };
    let mut found = 0;
    for index in 0..limit.min(MAX_SCAN_SLOTS) {
        let slot = read_slot(index);
        scan.read.push(slot);
        let Some(ptr) = slot else { continue };
        let Some(func) = identify(ptr) else { continue };
        if scan.functions.fns[func as usize].is_none() {
            scan.functions.fns[func as usize] = Some(ptr);
            scan.slots[func as usize] = Some(index);
            found += 1;
            if found == FUNC_COUNT {
                break;
            }
        }
    }
    scan
}

#[cfg(not(feature = "libhsa-static"))]
/// Names a pointer by the exported symbol at exactly its address.
fn identify_by_symbol(ptr: RawFn) -> Option<Func> {
    crate::hsa::identify(ptr as *const c_void).and_then(Func::from_name)
}

#[cfg(not(feature = "libhsa-static"))]
/// Reads slot `index` of the caller's table.
///
/// # Safety
/// `table` is an 8-aligned pointer to a dynamic-mode `iree_hal_amdgpu_libhsa_t`
/// and `index < MAX_SCAN_SLOTS`, so the slot lies inside the struct (module docs).
unsafe fn read_slot(table: *const crate::vmem::abi::iree_hal_amdgpu_libhsa_t, index: usize) -> Option<RawFn> {
    debug_assert!(index < MAX_SCAN_SLOTS);
    let offset = crate::vmem::abi::LIBHSA_FIRST_SLOT_OFFSET + index * core::mem::size_of::<RawFn>();
    // SAFETY: per the function contract the slot is inside the caller's struct
    // and aligned; every pointer-sized bit pattern is a valid `Option<fn>`
    // (NULL is `None`), and the pointer is only called once identified.
    unsafe { table.cast::<u8>().add(offset).cast::<Option<RawFn>>().read() }
}

//===----------------------------------------------------------------------===//
// Per-table cache
//===----------------------------------------------------------------------===//

#[cfg(not(feature = "libhsa-static"))]
struct CacheEntry {
    table: usize,
    scan: Scan,
}

#[cfg(not(feature = "libhsa-static"))]
/// Tables remembered at once (a process has one per IREE device at most,
/// usually one); the oldest entry is replaced when full.
const CACHE_CAPACITY: usize = 16;

#[cfg(not(feature = "libhsa-static"))]
struct Cache {
    entries: Vec<CacheEntry>,
    next_victim: usize,
}

#[cfg(not(feature = "libhsa-static"))]
static CACHE: spin::Mutex<Cache> = spin::Mutex::new(Cache { entries: Vec::new(), next_victim: 0 });

/// Identifies the functions of the caller's table (cached).
///
/// # Safety
/// `table` is non-NULL, 8-aligned and points to a dynamic-mode
/// `iree_hal_amdgpu_libhsa_t` (any IREE version) that stays valid and
/// unchanged during the call.
#[cfg(not(feature = "libhsa-static"))]
pub unsafe fn functions_for_table(table: *const crate::vmem::abi::iree_hal_amdgpu_libhsa_t) -> Functions {
    let key = table as usize;
    // SAFETY (for every read_slot call below): the caller guarantees the table
    // contract, and every index is below MAX_SCAN_SLOTS.
    // try_lock, never lock: in a forked child the lock may be held by a
    // parent's thread that does not exist there; a busy cache only costs a
    // scan (and not caching its result).
    if let Some(cache) = CACHE.try_lock() {
        if let Some(entry) = cache.entries.iter().find(|e| e.table == key) {
            let unchanged = entry.scan.read.iter().enumerate().all(|(index, value)| {
                // SAFETY: see above; `entry.scan.read` has at most
                // MAX_SCAN_SLOTS entries.
                let now = unsafe { read_slot(table, index) };
                now.map(|f| f as usize) == value.map(|f| f as usize)
            });
            if unchanged {
                return entry.scan.functions;
            }
        }
    }
    // Every IREE table layout starts with hsa_init. A struct whose slot 0 is
    // not hsa_init holds no table we know (for example IREE built with
    // IREE_HAL_AMDGPU_LIBHSA_STATIC=1, whose struct ends before the slots):
    // read nothing further from it (the one-slot result is cached like a scan).
    // SAFETY: see above; slot 0 is inside every dynamic-mode struct.
    let first = unsafe { read_slot(table, 0) };
    let scan = if first.and_then(|f| crate::hsa::identify(f as *const c_void)) != Some(c"hsa_init") {
        crate::log!(
            crate::log::Level::Warning,
            "libhsa table {key:#x}: slot 0 is not hsa_init, so this is not a dynamic-mode \
             iree_hal_amdgpu_libhsa_t (an IREE built with IREE_HAL_AMDGPU_LIBHSA_STATIC=1 needs \
             amdgpu-dropin built with the libhsa-static feature)"
        );
        Scan { functions: Functions::default(), slots: [None; FUNC_COUNT], read: vec![first] }
    } else {
        // SAFETY: see above; scan_slots never asks for an index >= MAX_SCAN_SLOTS.
        scan_slots(MAX_SCAN_SLOTS, |index| unsafe { read_slot(table, index) }, identify_by_symbol)
    };
    for func in Func::ALL {
        match scan.slots[func as usize] {
            Some(slot) => crate::log!(
                crate::log::Level::Debug,
                "libhsa table {key:#x}: {} in slot {slot}",
                func.name_str()
            ),
            None => crate::log!(
                crate::log::Level::Warning,
                "libhsa table {key:#x}: {} not found in the first {} slots",
                func.name_str(),
                scan.read.len()
            ),
        }
    }
    let functions = scan.functions;
    let Some(mut cache) = CACHE.try_lock() else { return functions };
    if let Some(entry) = cache.entries.iter_mut().find(|e| e.table == key) {
        entry.scan = scan;
    } else if cache.entries.len() < CACHE_CAPACITY {
        cache.entries.push(CacheEntry { table: key, scan });
    } else {
        let victim = cache.next_victim;
        cache.entries[victim] = CacheEntry { table: key, scan };
        cache.next_victim = (victim + 1) % CACHE_CAPACITY;
    }
    functions
}

/// `libhsa-static`: IREE calls HSA directly, so do we; resolved by name once.
///
/// # Safety
/// None beyond the caller's general contract (`table` is not read).
#[cfg(feature = "libhsa-static")]
pub unsafe fn functions_for_table(_table: *const crate::vmem::abi::iree_hal_amdgpu_libhsa_t) -> Functions {
    // A `RaceOnce`: a fork during another thread's dlsym calls cannot leave
    // the child waiting for them.
    static RESOLVED: crate::race_once::RaceOnce<Functions> = crate::race_once::RaceOnce::new();
    *RESOLVED.get_or_make(|| {
        let mut functions = Functions::default();
        for func in Func::ALL {
            // SAFETY: RawFn is only a carrier; it is cast back to the symbol's
            // real signature (hsa-sys) before any call.
            match unsafe { crate::hsa::resolve_fn::<RawFn>(func.name()) } {
                Ok(ptr) => functions.fns[func as usize] = Some(ptr),
                Err(reason) => {
                    crate::log!(crate::log::Level::Warning, "{}: {reason}", func.name_str())
                }
            }
        }
        functions
    })
}

//===----------------------------------------------------------------------===//
// Calling the identified functions
//===----------------------------------------------------------------------===//

/// The HSA operations the vmem logic performs. Implemented over the caller's
/// identified table (`Hsa`) and, in unit tests, by a fake runtime.
pub trait VmemApi {
    /// `hsa_amd_memory_pool_get_info` into a zeroed 8-byte buffer; the value
    /// is returned as the buffer's bytes (interpret by attribute).
    fn pool_get_info(
        &self,
        pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_memory_pool_info_t,
    ) -> (hsa_status_t, [u8; 8]);
    /// `hsa_amd_agent_iterate_memory_pools` with `callback(pool)` per pool;
    /// the callback returns SUCCESS to continue or another status to stop.
    fn iterate_pools(
        &self,
        agent: hsa_agent_t,
        callback: &mut dyn FnMut(hsa_amd_memory_pool_t) -> hsa_status_t,
    ) -> hsa_status_t;
    fn address_reserve_align(&self, size: usize, alignment: u64) -> (hsa_status_t, *mut c_void);
    fn address_free(&self, va: *mut c_void, size: usize) -> hsa_status_t;
    fn handle_create(
        &self,
        pool: hsa_amd_memory_pool_t,
        size: usize,
        memory_type: hsa_amd_memory_type_t,
    ) -> (hsa_status_t, hsa_amd_vmem_alloc_handle_t);
    fn handle_release(&self, handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t;
    fn map(&self, va: *mut c_void, size: usize, handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t;
    fn unmap(&self, va: *mut c_void, size: usize) -> hsa_status_t;
    fn set_access(
        &self,
        va: *mut c_void,
        size: usize,
        descs: &[hsa_amd_memory_access_desc_t],
    ) -> hsa_status_t;
}

/// Identified functions checked present by `Functions::require`.
#[derive(Clone, Copy, Debug)]
pub struct Hsa {
    fns: Functions,
}

/// Status returned if a function that `require` did not check is called (a
/// bug in this crate): nothing unidentified is ever called.
const MISSING: hsa_status_t = HSA_STATUS_ERROR_INVALID_RUNTIME_STATE;

macro_rules! typed {
    ($self:ident, $func:expr, $pfn:ty) => {{
        match $self.fns.get($func) {
            // SAFETY: the slot was identified as the exported HSA symbol
            // `$func.name()`, whose C signature is `$pfn` (hsa-sys); both are
            // pointer-sized function pointers.
            Some(raw) => Some(unsafe { core::mem::transmute::<RawFn, $pfn>(raw) }),
            None => {
                crate::log!(
                    crate::log::Level::Error,
                    "internal: {} called without being required",
                    $func.name_str()
                );
                None
            }
        }
    }};
}

struct IterateState<'a> {
    callback: &'a mut dyn FnMut(hsa_amd_memory_pool_t) -> hsa_status_t,
    panicked: bool,
}

/// The C trampoline handed to `hsa_amd_agent_iterate_memory_pools`. A panic
/// never unwinds into the HSA runtime: it is caught and stops the iteration.
unsafe extern "C" fn iterate_trampoline(pool: hsa_amd_memory_pool_t, data: *mut c_void) -> hsa_status_t {
    // SAFETY: `data` is the `IterateState` passed by `Hsa::iterate_pools`,
    // alive and exclusively ours for the duration of the iteration call.
    let state = unsafe { &mut *data.cast::<IterateState<'_>>() };
    let callback = &mut *state.callback;
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(pool))) {
        Ok(status) => status,
        Err(_) => {
            state.panicked = true;
            HSA_STATUS_ERROR
        }
    }
}

// The `va` arguments are device virtual addresses handed to HSA as values;
// this code never dereferences them, so the functions need not be unsafe.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl VmemApi for Hsa {
    fn pool_get_info(
        &self,
        pool: hsa_amd_memory_pool_t,
        attribute: hsa_amd_memory_pool_info_t,
    ) -> (hsa_status_t, [u8; 8]) {
        let Some(f) = typed!(self, Func::MemoryPoolGetInfo, pfn_hsa_amd_memory_pool_get_info) else {
            return (MISSING, [0; 8]);
        };
        // Every attribute we query is at most 8 bytes (bool, u32, size_t); a
        // zeroed u64 leaves room even if a runtime writes a wider value.
        let mut value: u64 = 0;
        // SAFETY: identified function; `value` is writable for 8 bytes.
        let status = unsafe { f(pool, attribute, (&mut value as *mut u64).cast()) };
        (status, value.to_ne_bytes())
    }

    fn iterate_pools(
        &self,
        agent: hsa_agent_t,
        callback: &mut dyn FnMut(hsa_amd_memory_pool_t) -> hsa_status_t,
    ) -> hsa_status_t {
        let Some(f) = typed!(self, Func::AgentIterateMemoryPools, pfn_hsa_amd_agent_iterate_memory_pools)
        else {
            return MISSING;
        };
        let mut state = IterateState { callback, panicked: false };
        // SAFETY: identified function; the trampoline matches the callback
        // signature and `state` outlives the call (HSA calls back only during it).
        let status =
            unsafe { f(agent, Some(iterate_trampoline), (&mut state as *mut IterateState<'_>).cast()) };
        if state.panicked {
            std::panic::panic_any("pool iteration callback panicked");
        }
        status
    }

    fn address_reserve_align(&self, size: usize, alignment: u64) -> (hsa_status_t, *mut c_void) {
        let Some(f) = typed!(self, Func::VmemAddressReserveAlign, pfn_hsa_amd_vmem_address_reserve_align)
        else {
            return (MISSING, core::ptr::null_mut());
        };
        let mut va: *mut c_void = core::ptr::null_mut();
        // SAFETY: identified function; `va` is a writable out-pointer.
        let status = unsafe { f(&mut va, size, 0, alignment, 0) };
        (status, va)
    }

    fn address_free(&self, va: *mut c_void, size: usize) -> hsa_status_t {
        let Some(f) = typed!(self, Func::VmemAddressFree, pfn_hsa_amd_vmem_address_free) else {
            return MISSING;
        };
        // SAFETY: identified function; HSA validates the range itself.
        unsafe { f(va, size) }
    }

    fn handle_create(
        &self,
        pool: hsa_amd_memory_pool_t,
        size: usize,
        memory_type: hsa_amd_memory_type_t,
    ) -> (hsa_status_t, hsa_amd_vmem_alloc_handle_t) {
        let Some(f) = typed!(self, Func::VmemHandleCreate, pfn_hsa_amd_vmem_handle_create) else {
            return (MISSING, hsa_amd_vmem_alloc_handle_t::default());
        };
        let mut handle = hsa_amd_vmem_alloc_handle_t::default();
        // SAFETY: identified function; `handle` is a writable out-pointer.
        let status = unsafe { f(pool, size, memory_type, 0, &mut handle) };
        (status, handle)
    }

    fn handle_release(&self, handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t {
        let Some(f) = typed!(self, Func::VmemHandleRelease, pfn_hsa_amd_vmem_handle_release) else {
            return MISSING;
        };
        // SAFETY: identified function; plain value arguments.
        unsafe { f(handle) }
    }

    fn map(&self, va: *mut c_void, size: usize, handle: hsa_amd_vmem_alloc_handle_t) -> hsa_status_t {
        let Some(f) = typed!(self, Func::VmemMap, pfn_hsa_amd_vmem_map) else {
            return MISSING;
        };
        // SAFETY: identified function; `va` lies in our reservation (HSA checks).
        unsafe { f(va, size, 0, handle, 0) }
    }

    fn unmap(&self, va: *mut c_void, size: usize) -> hsa_status_t {
        let Some(f) = typed!(self, Func::VmemUnmap, pfn_hsa_amd_vmem_unmap) else {
            return MISSING;
        };
        // SAFETY: identified function; HSA validates the range itself.
        unsafe { f(va, size) }
    }

    fn set_access(
        &self,
        va: *mut c_void,
        size: usize,
        descs: &[hsa_amd_memory_access_desc_t],
    ) -> hsa_status_t {
        let Some(f) = typed!(self, Func::VmemSetAccess, pfn_hsa_amd_vmem_set_access) else {
            return MISSING;
        };
        // SAFETY: identified function; `descs` is a live slice of `descs.len()`
        // descriptors that HSA only reads during the call.
        unsafe { f(va, size, descs.as_ptr(), descs.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Distinct local functions standing in for table entries. Each body
    // differs (its own name), so an optimized build cannot fold them into
    // one address.
    macro_rules! fake_fns {
        ($($name:ident),*) => { $(extern "C" fn $name() { std::hint::black_box(stringify!($name)); })* };
    }
    fake_fns!(f0, f1, f2, f3, f4, f5, f6, f7, f8, other_a, other_b);
    const FAKES: [RawFn; 9] = [f0, f1, f2, f3, f4, f5, f6, f7, f8];

    fn fake_identify(ptr: RawFn) -> Option<Func> {
        FAKES.iter().position(|f| *f as usize == ptr as usize).map(|i| Func::ALL[i])
    }

    /// A table laid out like one of IREE's layouts: `order` lists, per slot,
    /// either a needed function's index in FAKES or an unrelated pointer.
    fn table(len: usize, placements: &[(usize, usize)]) -> Vec<Option<RawFn>> {
        let mut slots: Vec<Option<RawFn>> =
            (0..len).map(|i| Some(if i % 2 == 0 { other_a as RawFn } else { other_b as RawFn })).collect();
        for (slot, fake) in placements {
            slots[*slot] = Some(FAKES[*fake]);
        }
        slots
    }

    /// The slots of the nine functions in each of IREE's three layouts
    /// (order of Func::ALL: pool_get_info, iterate_pools, reserve, free,
    /// set_access, handle_create, handle_release, map, unmap).
    fn layout(reserve_slot: usize) -> Vec<(usize, usize)> {
        let r = reserve_slot;
        vec![(12, 0), (13, 1), (r, 2), (r + 1, 3), (r + 2, 4), (r + 3, 5), (r + 4, 6), (r + 5, 7), (r + 6, 8)]
    }

    #[test]
    fn identifies_each_iree_layout_and_stops_early() {
        for (len, reserve) in [(116, 32), (117, 33), (118, 34)] {
            let slots = table(len, &layout(reserve));
            let mut reads = 0;
            let scan = scan_slots(
                slots.len(),
                |i| {
                    reads += 1;
                    slots[i]
                },
                fake_identify,
            );
            for (i, func) in Func::ALL.into_iter().enumerate() {
                assert_eq!(scan.functions.get(func).map(|f| f as usize), Some(FAKES[i] as usize));
            }
            assert_eq!(scan.slots[Func::VmemAddressReserveAlign as usize], Some(reserve));
            // Stopped right after the last needed slot (unmap = reserve + 6).
            assert_eq!(reads, reserve + 7);
            assert_eq!(scan.read.len(), reserve + 7);
            assert!(scan.functions.require(INITIALIZE_FUNCS).is_ok());
        }
    }

    #[test]
    fn never_reads_beyond_the_smallest_table() {
        // A table where nothing is identified: the scan reads exactly 116 slots
        // even when told the table is longer.
        let mut max_index = 0;
        let scan = scan_slots(
            10_000,
            |i| {
                max_index = max_index.max(i);
                Some(other_a as RawFn)
            },
            fake_identify,
        );
        assert_eq!(max_index, MAX_SCAN_SLOTS - 1);
        assert_eq!(scan.read.len(), MAX_SCAN_SLOTS);
        // A needed function beyond slot 115 is not found.
        let mut slots = table(200, &layout(32));
        slots[38] = Some(other_a);
        slots[150] = Some(FAKES[8]);
        let scan = scan_slots(slots.len(), |i| slots[i], fake_identify);
        assert!(scan.functions.get(Func::VmemUnmap).is_none());
    }

    #[test]
    fn missing_function_is_incompatible_and_named() {
        let mut placements = layout(33);
        placements.retain(|(_, fake)| *fake != 7); // no hsa_amd_vmem_map
        let slots = table(117, &placements);
        let scan = scan_slots(slots.len(), |i| slots[i], fake_identify);
        let err = scan.functions.require(INITIALIZE_FUNCS).unwrap_err();
        assert_eq!(err.code, StatusCode::Incompatible);
        assert!(err.message.contains("hsa_amd_vmem_map"), "{}", err.message);
        // Finding pools does not need it.
        assert!(scan.functions.require(FIND_FUNCS).is_ok());
        // NULL slots are skipped, not identified.
        let nulls: Vec<Option<RawFn>> = vec![None; 116];
        let scan = scan_slots(nulls.len(), |i| nulls[i], |_| panic!("NULL slot identified"));
        assert_eq!(scan.functions, Functions::default());
    }

    #[test]
    fn first_duplicate_wins() {
        let mut slots = table(116, &layout(32));
        slots[5] = Some(FAKES[0]);
        let scan = scan_slots(slots.len(), |i| slots[i], fake_identify);
        assert_eq!(scan.slots[Func::MemoryPoolGetInfo as usize], Some(5));
    }

    #[test]
    fn names_round_trip() {
        for func in Func::ALL {
            assert_eq!(Func::from_name(func.name()), Some(func));
        }
        assert_eq!(Func::from_name(c"hsa_init"), None);
    }

    #[cfg(not(feature = "libhsa-static"))]
    #[test]
    fn cache_revalidates_a_reused_table_pointer() {
        // A fake dynamic-mode struct: 16-byte prefix then 116 slots, none of
        // which dladdr can name (local functions are not exported). Slot 0 is
        // not hsa_init, so only slot 0 is read and that result is cached;
        // changing the slot must invalidate it, changing a later one must not
        // matter (it is never read).
        #[repr(C, align(8))]
        struct FakeTable {
            prefix: [u64; 2],
            slots: [Option<RawFn>; MAX_SCAN_SLOTS],
        }
        let mut t = Box::new(FakeTable { prefix: [1, 0], slots: [Some(other_a as RawFn); MAX_SCAN_SLOTS] });
        let ptr = (&*t as *const FakeTable).cast();
        // SAFETY: `t` is a live, aligned struct with 116 slots after a 16-byte prefix.
        let first = unsafe { functions_for_table(ptr) };
        assert_eq!(first, Functions::default());
        let read_slots = |ptr| {
            let cache = CACHE.lock();
            let entry = cache.entries.iter().find(|e| e.table == ptr as usize).expect("cached");
            entry.scan.read.iter().map(|f| f.map(|f| f as usize)).collect::<Vec<_>>()
        };
        assert_eq!(read_slots(ptr), vec![Some(other_a as RawFn as usize)]);
        t.slots[0] = Some(other_b);
        // SAFETY: as above.
        let second = unsafe { functions_for_table(ptr) };
        assert_eq!(second, Functions::default());
        assert_eq!(read_slots(ptr), vec![Some(other_b as RawFn as usize)]);
    }
}
