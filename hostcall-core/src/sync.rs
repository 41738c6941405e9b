//! The synchronization primitives the hostcall protocol code is written
//! against, swappable for loom's model-checked versions (`--cfg loom`), in the
//! manner of crossbeam's `primitive` module.
//!
//! Only the protocols' serving steps (`protocol/*/serve.rs`), the loom halves
//! of their buffer views (`protocol/*/buffer.rs`), `gate.rs`, `call_gate.rs`
//! and `helper_bell.rs` import from here, so the code loom explores is
//! exactly the code the listener runs: the detach / walk / serve / release
//! steps of the ready stack, the phase-bit scan / serve / hand-back, and the
//! registration gate between `disableHostcalls` and the listener. The
//! listener loop, the registry and the HSA calls (amdgpu-dropin) use `std`
//! directly and are not modelled (loom cannot model the HSA doorbell; the
//! doorbell's role in the model is played by a loom atomic).

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The helper thread's bell (`helper_bell.rs`) sleeps on these.
#[cfg(not(loom))]
pub(crate) use std::sync::{Condvar, Mutex};

#[cfg(loom)]
pub(crate) use loom::sync::{Condvar, Mutex};

/// Payload words of the modelled device memory: a loom `UnsafeCell`, so loom
/// reports any payload access not ordered by the READY handshake as a data
/// race (the real buffer uses relaxed atomic views, see `buffer.rs`).
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
