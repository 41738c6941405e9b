//! ROCclr hostcall core: the host side of the classic hostcall protocol that
//! ROCm's device libraries speak (`rochostcall.hpp`).
//!
//! * `layout`   — the buffer layout and tagged-pointer arithmetic (pure).
//! * `buffer`   — the one module that touches device-shared memory.
//! * `protocol` — detach / walk / serve / release of the ready stack and the
//!   registration gate; model-checked with loom (`tests/loom_hostcall.rs`).
//! * `phase_layout`, `phase_protocol` — the same for the phase-bit protocol
//!   (chosen at enable time); model-checked in `tests/loom_phase.rs`.
//! * `call_gate` — calls of a registered handler vs. its unregistration
//!   (model-checked with loom: `tests/loom_handlers.rs`).
//! * `packet`   — the host copy of a packet and the handler signatures (C ABI).
//! * `service`  — dispatch: FUNCTION_CALL, PRINTF (`printf/`), registered
//!   handlers (`handlers`), DEVMEM (`devmem`), SANITIZER (`sanitizer`), the
//!   error answer.
//! * `listener` — the threads, the doorbell signal, the waiting strategy, the
//!   slow-buffer classifier (`listener/`).
//! * `waiting`  — how a caller waits for a listener thread to let go.
//! * `registry` — enable/disable, listener lifetime, exit/fork/unload hooks.
//!
//! `sync` swaps the atomics of `buffer`/`protocol` for loom's under
//! `--cfg loom`; in that configuration only the model-checkable part is built.

pub mod call_gate;
pub mod layout;
pub mod packet;
pub mod phase_layout;
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
mod phase_protocol;
#[cfg(loom)]
pub mod phase_protocol;

#[cfg(not(loom))]
mod helper_bell;
#[cfg(loom)]
pub mod helper_bell;

#[cfg(not(loom))]
mod listener;
#[cfg(not(loom))]
pub mod printf;
#[cfg(not(loom))]
mod registry;
#[cfg(not(loom))]
mod service;

#[cfg(not(loom))]
pub mod devmem;
#[cfg(not(loom))]
pub mod handlers;
#[cfg(not(loom))]
pub mod sanitizer;
#[cfg(not(loom))]
mod tunables;
#[cfg(not(loom))]
mod waiting;

#[cfg(not(loom))]
pub use registry::{disable, enable, enable_with, DisableError, EnableError, Protocol};

/// Bytes a buffer of `packets` packets occupies (getHostcallBufferSize); the
/// same value as upstream for every count, 0 included.
pub fn buffer_size(packets: u32) -> usize {
    layout::buffer_size(packets)
}

/// Required buffer alignment (getHostcallBufferAlignment): 8, as upstream.
pub fn buffer_alignment() -> u32 {
    layout::BUFFER_ALIGNMENT as u32
}
