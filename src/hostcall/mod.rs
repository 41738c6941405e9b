//! ROCclr hostcall host: serves the requests GPU waves post into hostcall
//! buffers, in either wire protocol of ROCm's device libraries (classic or
//! phase-bit, chosen at enable time), behind `rochostcall.hpp` and
//! `amdgpu_dropin_hostcall.h`.
//!
//! Three wings over a small base, each importing only downwards, on top of
//! the lock-free core, a crate of its own (`hostcall_core`, in
//! `hostcall-core/`: the wire protocols, the registration gate, the call
//! gate, the helper bell; model-checked by its loom tests):
//!
//! * `protocol/` — the core's wire protocols, re-exported, and the C
//!   signatures of registered handlers;
//! * `services/` — what a request asks for: FUNCTION_CALL, PRINTF,
//!   registered handlers, DEVMEM, SANITIZER, the error answer; `services::ids`
//!   holds every service id;
//! * `listener/` — the threads, the doorbell, the waiting strategy, the
//!   slow-buffer classifier;
//! * base: `process` (exit, fork epoch, listener-thread flags), `counters`
//!   (what the listener did per buffer), `snapshot` (lists published to
//!   lock-free readers), `test_hooks`, `tunables`, `waiting`, and `registry`
//!   (enable/disable, listener lifetime, exit/fork/unload hooks) on top.

pub(crate) mod counters;
pub(crate) mod listener;
mod process;
pub(crate) mod protocol;
mod registry;
pub(crate) mod services;
mod snapshot;
pub(crate) mod test_hooks;
mod tunables;
mod waiting;

pub(crate) use protocol::poll::PollFn;
pub(crate) use registry::{
    counters, disable, enable, enable_with, register_poll, unregister_poll, DisableError, EnableError,
    Protocol,
};
