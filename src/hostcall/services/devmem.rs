//! DEVMEM (service 3): device-side memory requests, and the default service
//! for embedders that are not ROCclr.
//!
//! # Encoding (ROCm device libraries, ockl `__ockl_devmem_request`)
//!
//! One lane per request: slot[0] = address, slot[1] = size, slot[2..8] = 0.
//! * address 0, size > 0: allocate `size` bytes of device memory; the answer
//!   in slot[0] is its device address, 0 on failure. The device heap (ockl's
//!   `dm` allocator) grows through this in 2 MiB slabs.
//! * address != 0: free that address (size 0); the device ignores the answer.
//! * Both 0 is not a request the device library makes.
//!
//! ROCclr serves it with its own memory objects: an allocation becomes a
//! runtime buffer object looked up by its device address; freeing an unknown
//! address is logged; both words 0 aborts the process (`guarantee`). ROCclr
//! never writes slot[1].
//!
//! # The default service here
//!
//! Enabled with `amdgpu_dropin_hostcall_devmem_enable` for one buffer or all.
//! Allocates with `hsa_amd_memory_pool_allocate` from the pool the enabler
//! named, grants the listed agents access (`hsa_amd_agents_allow_access`) and
//! answers the address; a failed grant frees the block and answers 0. Frees
//! with `hsa_amd_memory_pool_free` an address it handed out (on any buffer
//! the service serves) and answers 0. An unknown address, or both words 0, is
//! logged and answered 0; nothing aborts.
//!
//! # Who owns a block
//!
//! Device malloc's heap belongs to the device, not to one queue: a kernel on
//! queue B may free, or go on using, a block a kernel on queue A allocated
//! (ROCclr tracks the blocks per device and releases them when the device
//! goes). Here the blocks belong to the service scope, one memory pool and
//! its agents: every registration enabled with the same pool and agents
//! (for one buffer or for every buffer) shares one `DevmemBook`. A buffer
//! belongs to the scope from its registration (a per-buffer one) or its
//! first request; a block made through one buffer may be freed through any
//! other of the scope, also after the first was disabled. The blocks left
//! are freed when the scope ends: its last buffer is disabled, or its last
//! registration is unregistered. No HSA call is made at process exit or in a
//! forked child (the blocks belong to the runtime that made them; a child
//! starts with no registrations and no books, see docs/process.md).

use core::ffi::c_void;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use hsa_sys::*;

use super::handlers::{self, BuiltinService, Handler, HandlerError};
use super::ids::SERVICE_DEVMEM;
use crate::hostcall::process;
use crate::hostcall::protocol::host_packet::HostPacket;
use crate::log::Level;

/// What one lane asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Allocate {
        size: u64,
    },
    Free {
        address: u64,
    },
    /// Address and size both 0.
    Malformed,
}

/// Decodes one lane's words.
pub fn decode(slot: &[u64; 8]) -> Request {
    match (slot[0], slot[1]) {
        (0, 0) => Request::Malformed,
        (0, size) => Request::Allocate { size },
        (address, _) => Request::Free { address },
    }
}

/// Where the memory comes from (the HSA pool; a fake in unit tests).
pub trait PoolMemory: Send + Sync {
    /// Allocates `size` bytes usable by the device; its address.
    fn allocate(&self, size: u64) -> Result<u64, String>;
    /// Frees a block `allocate` returned.
    fn free(&self, address: u64) -> Result<(), String>;
}

/// What a book knows of its blocks and of the buffers it serves.
#[derive(Default)]
struct Books {
    /// Live blocks: address -> (size, buffer whose request made it).
    blocks: HashMap<u64, (u64, usize)>,
    /// Enabled buffers of the scope: those that made a request, and the
    /// buffer of a per-buffer registration.
    members: HashSet<usize>,
    /// Registrations whose service uses this book.
    services: usize,
}

/// The blocks of one service scope: one memory pool and its agents. Device
/// malloc's heap belongs to the device, not to one queue: every buffer
/// served with the same pool and agents shares one book, so a block that a
/// request on buffer A made can be freed (or used on) through buffer B.
/// The blocks left are freed when the scope ends: its last member buffer is
/// disabled, or its last service is unregistered.
pub struct DevmemBook<M: PoolMemory> {
    memory: M,
    /// What the scope is (pool and sorted agents), to find the book again.
    key: Vec<u64>,
    books: Mutex<Books>,
    /// The fork epoch the blocks belong to.
    epoch: u64,
}

impl<M: PoolMemory> DevmemBook<M> {
    pub fn new(memory: M, key: Vec<u64>) -> DevmemBook<M> {
        DevmemBook {
            memory,
            key,
            books: Mutex::new(Books::default()),
            // Relaxed: only this process's own view of the epoch matters.
            epoch: process::FORK_EPOCH.load(Ordering::Relaxed),
        }
    }

    pub fn key(&self) -> &[u64] {
        &self.key
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Books> {
        // Every update is one insert or remove: a poisoned book is consistent.
        self.books.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Live blocks (and their bytes) made by requests of `buffer` (None: all).
    #[cfg(test)]
    pub fn live(&self, buffer: Option<usize>) -> (usize, u64) {
        self.lock()
            .blocks
            .values()
            .filter(|(_, b)| buffer.map_or(true, |buffer| *b == buffer))
            .fold((0, 0), |(n, bytes), (size, _)| (n + 1, bytes + size))
    }

    /// Takes every block out of the book and frees it (unless at exit or in
    /// a forked child, where they belong to the runtime that made them).
    fn free_all(&self, books: &mut Books, why: &str) {
        if books.blocks.is_empty() {
            return;
        }
        let taken: Vec<(u64, (u64, usize))> = books.blocks.drain().collect();
        // Relaxed: a hint; see the module docs.
        let usable = !process::EXITING.load(Ordering::Relaxed)
            && self.epoch == process::FORK_EPOCH.load(Ordering::Relaxed);
        crate::log!(
            Level::Info,
            "hostcall DEVMEM: {why}: {} block(s) the device did not free{}",
            taken.len(),
            if usable { " are freed" } else { " are left to the HSA runtime (exit or forked child)" }
        );
        if !usable {
            return;
        }
        for (address, (size, buffer)) in taken {
            if let Err(e) = self.memory.free(address) {
                crate::log!(
                    Level::Error,
                    "hostcall DEVMEM: freeing {address:#x} ({size} bytes, made for buffer {buffer:#x}) failed: {e}"
                );
            }
        }
    }

    /// `buffer` left the scope (disabled): the scope ends with its last member.
    fn leave(&self, buffer: usize, why: &str) {
        let mut books = self.lock();
        if books.members.remove(&buffer) && books.members.is_empty() {
            self.free_all(&mut books, why);
        }
    }

    fn join(&self, buffer: Option<usize>) {
        let mut books = self.lock();
        books.services += 1;
        if let Some(buffer) = buffer {
            books.members.insert(buffer);
        }
    }

    /// A service of the book was retired (unregistered, or its buffer
    /// disabled). Its buffer stays a member: it may still be enabled and be
    /// served by another registration of the scope (a process-wide one), and
    /// its device heap may still use the blocks. A disabled buffer leaves
    /// through `leave`; the last registration ends the scope.
    fn retire(&self) {
        let mut books = self.lock();
        books.services = books.services.saturating_sub(1);
        if books.services == 0 {
            books.members.clear();
            self.free_all(&mut books, "last DEVMEM service of the pool unregistered");
        }
    }

    /// Answers one lane: the value for slot[0].
    pub fn serve_lane(&self, buffer: usize, lane: u32, slot: &[u64; 8]) -> u64 {
        match decode(slot) {
            Request::Allocate { size } => match self.memory.allocate(size) {
                Ok(address) => {
                    let mut books = self.lock();
                    books.members.insert(buffer);
                    books.blocks.insert(address, (size, buffer));
                    address
                }
                Err(e) => {
                    crate::log!(
                        Level::Error,
                        "hostcall DEVMEM: buffer {buffer:#x} lane {lane}: allocating {size} bytes failed: \
                             {e}; the lane gets 0"
                    );
                    0
                }
            },
            Request::Free { address } => {
                let known = {
                    let mut books = self.lock();
                    books.members.insert(buffer);
                    books.blocks.remove(&address)
                };
                match known {
                    Some(_) => {
                        if let Err(e) = self.memory.free(address) {
                            crate::log!(
                                Level::Error,
                                "hostcall DEVMEM: buffer {buffer:#x} lane {lane}: freeing {address:#x} failed: {e}"
                            );
                        }
                    }
                    None => crate::log!(
                        Level::Error,
                        "hostcall DEVMEM: buffer {buffer:#x} lane {lane}: free of unknown address \
                         {address:#x} ignored; the lane gets 0"
                    ),
                }
                0
            }
            Request::Malformed => {
                crate::log!(
                    Level::Error,
                    "hostcall DEVMEM: buffer {buffer:#x} lane {lane}: request with address 0 and size 0 \
                     (not a device-library request); the lane gets 0"
                );
                0
            }
        }
    }
}

/// The default DEVMEM service of one registration (one buffer or every
/// buffer), over the book of its pool and agents (shared with every other
/// registration of the same pool and agents).
pub struct DevmemService<M: PoolMemory> {
    book: Arc<DevmemBook<M>>,
}

impl<M: PoolMemory + 'static> DevmemService<M> {
    /// A service with a book of its own.
    #[cfg(test)]
    pub fn new(memory: M) -> DevmemService<M> {
        Self::with_book(Arc::new(DevmemBook::new(memory, Vec::new())), None)
    }

    /// A service for `buffer` (None: every buffer) over `book`.
    pub fn with_book(book: Arc<DevmemBook<M>>, buffer: Option<usize>) -> DevmemService<M> {
        book.join(buffer);
        DevmemService { book }
    }

    /// Live blocks (and their bytes) made for `buffer` (None: all).
    #[cfg(test)]
    pub fn live(&self, buffer: Option<usize>) -> (usize, u64) {
        self.book.live(buffer)
    }

    /// Answers one lane: the value for slot[0].
    pub fn serve_lane(&self, buffer: usize, lane: u32, slot: &[u64; 8]) -> u64 {
        self.book.serve_lane(buffer, lane, slot)
    }
}

impl<M: PoolMemory + 'static> BuiltinService for DevmemService<M> {
    fn serve(&self, packet: &mut HostPacket) {
        let buffer = packet.buffer_key();
        packet.for_each_active_lane(|_, lane, slot| slot[0] = self.serve_lane(buffer, lane, slot));
    }

    fn forget_buffer(&self, buffer_key: usize) {
        self.book
            .leave(buffer_key, &format!("buffer {buffer_key:#x}, the last of the pool's scope, disabled"));
    }

    fn retire(&self) {
        self.book.retire();
    }

    fn sharing_key(&self) -> Option<&[u64]> {
        let key = self.book.key();
        (!key.is_empty()).then_some(key)
    }

    fn joined(&self, scope: Option<usize>) -> Option<Arc<dyn BuiltinService>> {
        Some(Arc::new(DevmemService::with_book(Arc::clone(&self.book), scope)))
    }
}

/// Why `register_default` refused.
#[derive(Debug)]
pub enum RegisterError {
    /// The pool cannot serve (logged by the caller).
    Pool(PoolError),
    Handler(HandlerError),
}

/// Registers the default DEVMEM service for `scope` (None: every buffer),
/// serving from the HSA pool `pool` with access for `agents` (handles,
/// checked non-zero by the caller). Every registration with the same pool
/// and agents shares one book: the device heap's blocks are the device's,
/// not one buffer's.
pub fn register_default(scope: Option<usize>, pool: u64, agents: &[u64]) -> Result<(), RegisterError> {
    let hsa_agents = agents.iter().map(|&handle| hsa_agent_t { handle }).collect();
    let memory =
        HsaPool::new(hsa_amd_memory_pool_t { handle: pool }, hsa_agents).map_err(RegisterError::Pool)?;
    let mut key = agents.to_vec();
    key.sort_unstable();
    key.insert(0, pool);
    handlers::table()
        .register_with(SERVICE_DEVMEM, scope, |registrations| {
            let shared = registrations.iter().find_map(|r| match &r.handler {
                Handler::Builtin(s) if s.sharing_key() == Some(key.as_slice()) => s.joined(scope),
                _ => None,
            });
            Handler::Builtin(shared.unwrap_or_else(|| {
                Arc::new(DevmemService::with_book(Arc::new(DevmemBook::new(memory, key)), scope))
            }))
        })
        .map_err(RegisterError::Handler)
}

//===----------------------------------------------------------------------===//
// The HSA memory pool
//===----------------------------------------------------------------------===//

/// Why the default service could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolError {
    /// The HSA functions are missing.
    Hsa(String),
    /// The pool handle is not an allocatable global pool.
    BadPool(String),
}

impl core::fmt::Display for PoolError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            PoolError::Hsa(e) => write!(f, "HSA unavailable: {e}"),
            PoolError::BadPool(e) => write!(f, "unusable memory pool: {e}"),
        }
    }
}

#[derive(Clone, Copy)]
struct PoolApi {
    get_info: pfn_hsa_amd_memory_pool_get_info,
    allocate: pfn_hsa_amd_memory_pool_allocate,
    free: pfn_hsa_amd_memory_pool_free,
    allow_access: pfn_hsa_amd_agents_allow_access,
}

impl PoolApi {
    fn resolve() -> Result<PoolApi, String> {
        // SAFETY: each name is resolved as the pfn type of its C signature.
        unsafe {
            Ok(PoolApi {
                get_info: crate::hsa::resolve_fn(c"hsa_amd_memory_pool_get_info")?,
                allocate: crate::hsa::resolve_fn(c"hsa_amd_memory_pool_allocate")?,
                free: crate::hsa::resolve_fn(c"hsa_amd_memory_pool_free")?,
                allow_access: crate::hsa::resolve_fn(c"hsa_amd_agents_allow_access")?,
            })
        }
    }
}

/// Device memory from one HSA memory pool, accessible to the listed agents.
pub struct HsaPool {
    api: PoolApi,
    pool: hsa_amd_memory_pool_t,
    agents: Vec<hsa_agent_t>,
}

impl HsaPool {
    /// Checks that `pool` is a global pool that allows runtime allocation.
    pub fn new(pool: hsa_amd_memory_pool_t, agents: Vec<hsa_agent_t>) -> Result<HsaPool, PoolError> {
        let api = PoolApi::resolve().map_err(PoolError::Hsa)?;
        let mut segment: u32 = u32::MAX;
        // SAFETY: SEGMENT writes one hsa_amd_segment_t (32-bit) to the pointer.
        let status = unsafe {
            (api.get_info)(
                pool,
                HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
                (&mut segment as *mut u32).cast::<c_void>(),
            )
        };
        if status != HSA_STATUS_SUCCESS {
            return Err(PoolError::BadPool(format!(
                "hsa_amd_memory_pool_get_info: {}",
                crate::hsa::status_text(status)
            )));
        }
        if segment != HSA_REGION_SEGMENT_GLOBAL {
            return Err(PoolError::BadPool(format!("segment {segment} is not GLOBAL")));
        }
        let mut allowed = false;
        // SAFETY: RUNTIME_ALLOC_ALLOWED writes one bool to the pointer.
        let status = unsafe {
            (api.get_info)(
                pool,
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                (&mut allowed as *mut bool).cast::<c_void>(),
            )
        };
        if status != HSA_STATUS_SUCCESS || !allowed {
            return Err(PoolError::BadPool("the pool does not allow runtime allocation".into()));
        }
        Ok(HsaPool { api, pool, agents })
    }
}

impl PoolMemory for HsaPool {
    fn allocate(&self, size: u64) -> Result<u64, String> {
        let size = usize::try_from(size).map_err(|_| format!("{size} bytes do not fit the address space"))?;
        let mut ptr: *mut c_void = core::ptr::null_mut();
        // SAFETY: resolved hsa_amd_memory_pool_allocate; `ptr` is writable; flags 0.
        let status = unsafe { (self.api.allocate)(self.pool, size, 0, &mut ptr) };
        if status != HSA_STATUS_SUCCESS || ptr.is_null() {
            return Err(format!("hsa_amd_memory_pool_allocate: {}", crate::hsa::status_text(status)));
        }
        // SAFETY: resolved hsa_amd_agents_allow_access; `agents` holds
        // `agents.len()` handles; flags must be NULL; `ptr` was just allocated.
        let status = unsafe {
            (self.api.allow_access)(
                self.agents.len() as u32,
                self.agents.as_ptr(),
                core::ptr::null(),
                ptr.cast_const(),
            )
        };
        if status != HSA_STATUS_SUCCESS {
            // SAFETY: frees the block allocated above, which nothing else knows of.
            unsafe { (self.api.free)(ptr) };
            return Err(format!("hsa_amd_agents_allow_access: {}", crate::hsa::status_text(status)));
        }
        Ok(ptr as u64)
    }

    fn free(&self, address: u64) -> Result<(), String> {
        // SAFETY: resolved hsa_amd_memory_pool_free on a block `allocate`
        // returned and the service removed from its map (freed once).
        let status = unsafe { (self.api.free)(address as usize as *mut c_void) };
        if status != HSA_STATUS_SUCCESS {
            return Err(format!("hsa_amd_memory_pool_free: {}", crate::hsa::status_text(status)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostcall::services::ids::SERVICE_DEVMEM;
    use std::sync::atomic::AtomicU64;

    /// Hands out addresses from a counter; fails sizes over 1 MiB.
    #[derive(Default)]
    struct FakePool {
        next: AtomicU64,
        live: Mutex<Vec<u64>>,
        frees: AtomicU64,
    }

    impl PoolMemory for FakePool {
        fn allocate(&self, size: u64) -> Result<u64, String> {
            if size > 1 << 20 {
                return Err("too big".into());
            }
            let address = 0x10_0000 * (self.next.fetch_add(1, Ordering::SeqCst) + 1);
            self.live.lock().unwrap().push(address);
            Ok(address)
        }
        fn free(&self, address: u64) -> Result<(), String> {
            self.frees.fetch_add(1, Ordering::SeqCst);
            let mut live = self.live.lock().unwrap();
            let index = live.iter().position(|&a| a == address).ok_or("double free")?;
            live.remove(index);
            Ok(())
        }
    }

    fn slot(address: u64, size: u64) -> [u64; 8] {
        [address, size, 0, 0, 0, 0, 0, 0]
    }

    #[test]
    fn decoding_follows_the_device_library() {
        assert_eq!(decode(&slot(0, 4096)), Request::Allocate { size: 4096 });
        assert_eq!(decode(&slot(0x1000, 0)), Request::Free { address: 0x1000 });
        assert_eq!(decode(&slot(0x1000, 77)), Request::Free { address: 0x1000 }, "address wins, as upstream");
        assert_eq!(decode(&slot(0, 0)), Request::Malformed);
        assert_eq!(decode(&[0, 0, 9, 9, 9, 9, 9, 9]), Request::Malformed, "only words 0 and 1 count");
    }

    #[test]
    fn allocate_free_unknown_and_malformed() {
        let service = DevmemService::new(FakePool::default());
        let a = service.serve_lane(0x1000, 0, &slot(0, 64));
        let b = service.serve_lane(0x1000, 1, &slot(0, 128));
        assert!(a != 0 && b != 0 && a != b);
        assert_eq!(service.live(None), (2, 192));
        assert_eq!(service.serve_lane(0x1000, 0, &slot(0, 2 << 20)), 0, "pool failure answers 0");
        assert_eq!(service.serve_lane(0x1000, 0, &slot(a, 0)), 0);
        assert_eq!(service.live(None), (1, 128));
        assert_eq!(service.serve_lane(0x1000, 0, &slot(a, 0)), 0, "double free: unknown, answered 0");
        assert_eq!(service.serve_lane(0x1000, 0, &slot(0xdead_0000, 0)), 0);
        assert_eq!(service.serve_lane(0x1000, 0, &slot(0, 0)), 0);
        assert_eq!(
            service.book.memory.frees.load(Ordering::SeqCst),
            1,
            "only the known block reached the pool"
        );
        assert_eq!(service.live(None), (1, 128));
    }

    #[test]
    fn a_block_may_be_freed_through_another_buffer_and_the_last_disable_frees_the_rest() {
        let service = DevmemService::new(FakePool::default());
        let a1 = service.serve_lane(0x1000, 0, &slot(0, 10));
        let a2 = service.serve_lane(0x1000, 0, &slot(0, 20));
        let b1 = service.serve_lane(0x2000, 0, &slot(0, 30));
        assert_eq!(service.serve_lane(0x2000, 0, &slot(a1, 0)), 0, "freed via buffer B");
        assert_eq!(service.live(Some(0x1000)), (1, 20));
        service.forget_buffer(0x1000);
        assert_eq!(service.live(None), (2, 50), "A's block lives on: B may still use or free it");
        assert_eq!(service.serve_lane(0x2000, 0, &slot(a2, 0)), 0, "A's block freed via B after A went");
        assert_eq!(*service.book.memory.live.lock().unwrap(), [b1]);
        service.forget_buffer(0x3000);
        assert_eq!(service.live(None), (1, 30), "a buffer that never asked is not of the scope");
        service.forget_buffer(0x2000);
        assert_eq!(service.live(None), (0, 0), "the scope's last buffer went: the rest is freed");
        assert!(service.book.memory.live.lock().unwrap().is_empty(), "nothing leaked");
        service.retire();
    }

    #[test]
    fn per_buffer_services_of_one_pool_share_one_book() {
        let book = Arc::new(DevmemBook::new(FakePool::default(), vec![1, 2]));
        let on_a = DevmemService::with_book(Arc::clone(&book), Some(0x1000));
        let on_b = DevmemService::with_book(Arc::clone(&book), Some(0x2000));
        let block = on_a.serve_lane(0x1000, 0, &slot(0, 64));
        let kept = on_a.serve_lane(0x1000, 1, &slot(0, 32));
        // Buffer A disabled: its own registration retires.
        on_a.retire();
        assert_eq!(book.live(None), (2, 96), "B still belongs to the scope");
        assert_eq!(on_b.serve_lane(0x2000, 0, &slot(block, 0)), 0);
        assert_eq!(book.memory.frees.load(Ordering::SeqCst), 1, "freed through B, known to the book");
        on_b.retire();
        assert_eq!(book.live(None), (0, 0), "last service gone: the rest is freed");
        assert!(book.memory.live.lock().unwrap().is_empty());
        let _ = kept;
    }

    #[test]
    fn unregistering_a_buffers_own_service_keeps_the_blocks_a_global_one_still_serves() {
        let book = Arc::new(DevmemBook::new(FakePool::default(), vec![1, 2]));
        let global = DevmemService::with_book(Arc::clone(&book), None);
        let own = DevmemService::with_book(Arc::clone(&book), Some(0x1000));
        let block = own.serve_lane(0x1000, 0, &slot(0, 64));
        // The buffer's own registration is unregistered; the buffer stays
        // enabled and the global registration serves it from now on.
        own.retire();
        assert_eq!(book.live(None), (1, 64), "the buffer's heap still uses the block");
        assert!(book.memory.live.lock().unwrap().contains(&block));
        assert_eq!(global.serve_lane(0x1000, 0, &slot(block, 0)), 0);
        assert_eq!(book.memory.frees.load(Ordering::SeqCst), 1, "freed through the global one");
        let _again = global.serve_lane(0x1000, 0, &slot(0, 8));
        global.forget_buffer(0x1000);
        assert_eq!(book.live(None), (0, 0), "the scope's last buffer disabled: the rest is freed");
        global.retire();
    }

    #[test]
    fn a_global_service_outlives_the_buffers_but_not_its_unregistration() {
        let service = DevmemService::new(FakePool::default());
        let _a = service.serve_lane(0x1000, 0, &slot(0, 10));
        let _b = service.serve_lane(0x2000, 0, &slot(0, 10));
        service.retire();
        assert_eq!(service.live(None), (0, 0));
        assert!(service.book.memory.live.lock().unwrap().is_empty());
    }

    #[test]
    fn the_packet_path_answers_each_active_lane_in_slot_zero() {
        let service = DevmemService::new(FakePool::default());
        let mut packet = HostPacket::new(0x1000, SERVICE_DEVMEM, 0b1011);
        packet.slots[0] = slot(0, 8);
        packet.slots[1] = slot(0, 0);
        packet.slots[3] = slot(0, 16);
        packet.slots[2] = slot(0, 99); // inactive: ignored
        BuiltinService::serve(&service, &mut packet);
        assert_ne!(packet.slots[0][0], 0);
        assert_eq!(packet.slots[1][0], 0, "malformed lane");
        assert_ne!(packet.slots[3][0], 0);
        assert_eq!(packet.slots[0][1], 8, "slot[1] left as the device wrote it");
        assert_eq!(service.live(None), (2, 24));
    }

    /// splitmix64, for the randomized test.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn random_requests_never_panic_and_the_books_balance() {
        let service = DevmemService::new(FakePool::default());
        let mut rng = 7u64;
        let mut handed_out: Vec<u64> = Vec::new();
        for _ in 0..20_000 {
            let buffer = 0x1000 * (1 + next(&mut rng) % 3) as usize;
            let words: [u64; 8] = core::array::from_fn(|_| next(&mut rng));
            let request = match next(&mut rng) % 4 {
                0 => slot(0, words[1] % (2 << 20)),
                1 if !handed_out.is_empty() => {
                    slot(handed_out.swap_remove(words[0] as usize % handed_out.len()), 0)
                }
                2 => [0, 0, words[2], words[3], words[4], words[5], words[6], words[7]],
                _ => words,
            };
            let answer = service.serve_lane(buffer, (words[0] % 64) as u32, &request);
            if let Request::Allocate { .. } = decode(&request) {
                if answer != 0 {
                    handed_out.push(answer);
                }
            } else {
                assert_eq!(answer, 0, "frees and malformed requests answer 0");
            }
            if next(&mut rng) % 5000 == 0 {
                service.forget_buffer(buffer);
                handed_out.clear(); // some of them are gone now; later frees may be unknown
            }
        }
        let (live, _) = service.live(None);
        assert_eq!(live, service.book.memory.live.lock().unwrap().len(), "the pool and the books agree");
        service.retire();
        assert!(service.book.memory.live.lock().unwrap().is_empty());
    }
}
