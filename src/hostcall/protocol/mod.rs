//! The wire protocols, as the rest of the crate imports them: the lock-free,
//! model-checked core (`hostcall_core::protocol`: layouts,
//! buffer views, serving steps, the visit, the packet view), re-exported
//! whole, and beside it the C signatures of registered handlers, which take
//! its host copy of a packet (`host_packet`).

pub use hostcall_core::protocol::*;

pub mod host_packet;
