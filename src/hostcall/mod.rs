//! ROCclr hostcall core: the host side of the classic hostcall protocol that
//! ROCm's device libraries speak (`rochostcall.hpp`).
//!
//! * `layout`   — the buffer layout and tagged-pointer arithmetic (pure).
//! * `buffer`   — the one module that touches device-shared memory.
//! * `protocol` — detach / walk / serve / release of the ready stack and the
//!   registration gate; model-checked with loom (`tests/loom_hostcall.rs`).
//! * `service`  — FUNCTION_CALL, PRINTF (`printf/`), the error answer.
//! * `listener` — the threads, the doorbell signal, the waiting strategy, the
//!   slow-buffer classifier (`listener/`).
//! * `waiting`  — when the listener polls and when it blocks (pure logic).
//! * `registry` — enable/disable, listener lifetime, exit/fork/unload hooks.
//!
//! `sync` swaps the atomics of `buffer`/`protocol` for loom's under
//! `--cfg loom`; in that configuration only the model-checkable part is built.

pub mod layout;
mod sync;

#[cfg(not(loom))]
mod buffer;
#[cfg(loom)]
pub mod buffer;

#[cfg(not(loom))]
mod protocol;
#[cfg(loom)]
pub mod protocol;

#[cfg(not(loom))]
mod listener;
#[cfg(not(loom))]
pub mod printf;
#[cfg(not(loom))]
mod registry;
#[cfg(not(loom))]
mod service;
#[cfg(not(loom))]
mod waiting;

#[cfg(not(loom))]
mod tunables;

#[cfg(not(loom))]
pub use registry::{disable, enable, DisableError, EnableError};

/// Bytes a buffer of `packets` packets occupies (getHostcallBufferSize); the
/// same value as upstream for every count, 0 included.
pub fn buffer_size(packets: u32) -> usize {
    layout::buffer_size(packets)
}

/// Required buffer alignment (getHostcallBufferAlignment): 8, as upstream.
pub fn buffer_alignment() -> u32 {
    layout::BUFFER_ALIGNMENT as u32
}
