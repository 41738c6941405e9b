//! Device-shared memory accessed only through atomic words: the one place
//! that turns a buffer offset into a reference. Both protocols' buffer views
//! hold one (docs/protocols.md).
//!
//! Device memory is never a Rust reference to plain data: the GPU (or the
//! device simulator) writes it concurrently, so every word is read and written
//! through an atomic view (`AtomicU64::from_ptr` / `AtomicU32::from_ptr`). A
//! misbehaving device that writes a slot while we read it yields a garbage
//! value, never undefined behaviour; on x86-64 and AArch64 a relaxed 64-bit
//! access is an ordinary move. One reader is not ours: a FUNCTION_CALL host
//! function (C) reads its lane's 7 input words in place (`slot`), as
//! upstream's does, while the wave waits for READY and writes nothing.

use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::payload::SLOT_WORDS;

/// A range of device-shared memory accessed only through atomic words: the
/// one place that turns a buffer offset into a reference (both protocols'
/// views hold one).
#[derive(Clone, Copy, Debug)]
pub struct DeviceWords {
    base: core::ptr::NonNull<u8>,
    size: usize,
}

// SAFETY: an address and a size; every access through it is atomic, so the
// listener thread and the enabling thread may share it while the memory is
// valid (the `new` contract).
unsafe impl Send for DeviceWords {}
// SAFETY: as above; `&DeviceWords` only permits atomic accesses.
unsafe impl Sync for DeviceWords {}

impl DeviceWords {
    /// # Safety
    /// `base` is 8-aligned and valid for reads and writes of `size` bytes for
    /// as long as the value (or a copy) is used, and accessed meanwhile only
    /// atomically or by device code following its protocol, never moved.
    pub unsafe fn new(base: core::ptr::NonNull<u8>, size: usize) -> DeviceWords {
        debug_assert!(base.as_ptr() as usize % 8 == 0);
        DeviceWords { base, size }
    }

    pub fn base(&self) -> usize {
        self.base.as_ptr() as usize
    }

    /// The 64-bit word at `offset`. Callers pass offsets from the layout
    /// modules: in bounds and 8-aligned (checked in debug builds).
    #[inline]
    pub fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0 && offset + 8 <= self.size);
        // SAFETY: in bounds and 8-aligned (the callers' layout offsets from an
        // 8-aligned base); valid and only accessed atomically (`new`).
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }

    /// Asks the CPU to bring the cache line at `offset` in for writing (one
    /// request for ownership instead of a read and then an upgrade when the
    /// line is written after being read). Only a hint: no memory access.
    #[inline]
    pub fn prefetch_for_write(&self, offset: usize) {
        debug_assert!(offset < self.size);
        #[cfg(target_arch = "x86_64")]
        // SAFETY: PREFETCHW is a hint, not an access: it cannot fault and
        // changes no memory, register or flag; on processors without it, it
        // executes as a no-op.
        unsafe {
            core::arch::asm!(
                "prefetchw [{}]",
                in(reg) self.base.as_ptr().wrapping_add(offset),
                options(nostack, preserves_flags, readonly)
            );
        }
    }

    /// Copies the `SLOT_WORDS` words from `offset` (a lane's slot) out.
    /// Relaxed loads: the caller's protocol step orders them (its acquire
    /// load or fence that found the request).
    #[inline]
    pub fn read_slot(&self, offset: usize) -> [u64; SLOT_WORDS] {
        let mut out = [0u64; SLOT_WORDS];
        for (word, value) in out.iter_mut().enumerate() {
            // Relaxed: see above.
            *value = self.word(offset + word * 8).load(Ordering::Relaxed);
        }
        out
    }

    /// Writes `words` (at most a slot) from `offset` on. Relaxed stores: the
    /// caller's release store that hands the packet back publishes them.
    #[inline]
    pub fn write_words(&self, offset: usize, words: &[u64]) {
        debug_assert!(words.len() <= SLOT_WORDS);
        for (word, value) in words.iter().enumerate() {
            // Relaxed: see above.
            self.word(offset + word * 8).store(*value, Ordering::Relaxed);
        }
    }

    /// The `SLOT_WORDS` words of a lane's slot from `offset` on (in bounds,
    /// 8-aligned), for a callee that reads the request where it lies.
    pub fn slot(&self, offset: usize) -> &[AtomicU64; SLOT_WORDS] {
        debug_assert!(offset % 8 == 0 && offset + SLOT_WORDS * 8 <= self.size);
        // SAFETY: in bounds and 8-aligned as in `word`; `[AtomicU64; N]` has
        // the layout of N consecutive `AtomicU64`, each valid as in `word`.
        unsafe { &*self.base.as_ptr().add(offset).cast::<[AtomicU64; SLOT_WORDS]>() }
    }

    /// The 32-bit word at `offset` (in bounds, 4-aligned).
    #[inline]
    pub fn word32(&self, offset: usize) -> &AtomicU32 {
        debug_assert!(offset % 4 == 0 && offset + 4 <= self.size);
        // SAFETY: as in `word`, 4-aligned.
        unsafe { AtomicU32::from_ptr(self.base.as_ptr().add(offset).cast()) }
    }
}
