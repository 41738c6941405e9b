//! ROCclr hostcall host: serves the requests GPU waves post into hostcall
//! buffers, in either wire protocol of ROCm's device libraries (classic or
//! phase-bit, chosen at enable time), behind `rochostcall.hpp` and
//! `amdgpu_dropin_hostcall.h`.
//!
//! Three wings over a small base, each importing only downwards:
//!
//! * `protocol/` — the wire protocols: layouts, buffer views in device
//!   memory, serving steps, the one visit of a buffer, the packet view
//!   services see;
//! * `services/` — what a request asks for: FUNCTION_CALL, PRINTF,
//!   registered handlers, DEVMEM, SANITIZER, the error answer; `services::ids`
//!   holds every service id;
//! * `listener/` — the threads, the doorbell, the waiting strategy, the
//!   slow-buffer classifier;
//! * base: `gate` (the registration gate), `process` (exit, fork epoch,
//!   listener-thread flags), `counters` (what the listener did per buffer),
//!   `snapshot` (lists published to lock-free
//!   readers), `sync` (std or loom atomics), `test_hooks`, `tunables`,
//!   `waiting`, and `registry` (enable/disable, listener lifetime,
//!   exit/fork/unload hooks) on top.
//!
//! Under `--cfg loom` only the model-checked parts (the protocols, the gate,
//! the call gate, the helper bell: `tests/loom_*.rs`) and the plain base
//! files are built.

#[doc(hidden)]
pub mod gate;
#[doc(hidden)]
pub mod protocol;
mod sync;

#[cfg(loom)]
#[doc(hidden)]
pub mod services {
    pub mod call_gate;
}
#[cfg(not(loom))]
#[doc(hidden)]
pub mod services;

#[cfg(loom)]
#[doc(hidden)]
pub mod listener {
    pub mod helper_bell;
}
#[cfg(not(loom))]
#[doc(hidden)]
pub mod listener;

#[cfg(not(loom))]
pub(crate) mod counters;
#[cfg(not(loom))]
mod process;
#[cfg(not(loom))]
mod registry;
mod snapshot;
#[cfg(not(loom))]
pub(crate) mod test_hooks;
mod tunables;
mod waiting;

#[cfg(not(loom))]
pub(crate) use protocol::poll::PollFn;
#[cfg(not(loom))]
pub(crate) use registry::{
    counters, disable, enable, enable_with, register_poll, unregister_poll, DisableError, EnableError,
    Protocol,
};
