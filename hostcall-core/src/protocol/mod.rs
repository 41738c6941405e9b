//! The two wire protocols a hostcall buffer can speak (docs/protocols.md):
//! `classic` (ready and free packet stacks) and `phase_bit` (a device and a
//! host phase per packet), each as its layout, its view of a buffer in device
//! memory and its serving steps. `Protocol` (`kind.rs`) is the one place the
//! listener and the registry ask what a protocol needs (size, alignment, packets,
//! occupancy bitmap, name); `Buffer` (`visit.rs`) is a registered buffer in
//! its protocol and the one way to serve it. `packet` is the packet view the
//! services see, the same for both. `poll` is a channel in a protocol of the
//! caller's own, which its poll callback serves (ROCclr's RPC buffers).

pub mod classic;
#[cfg(not(loom))]
pub mod device_words;
pub mod host_packet;
mod kind;
pub mod packet;
pub mod payload;
pub mod pending;
pub mod phase_bit;
pub mod poll;
mod visit;

pub use kind::Protocol;
pub use visit::{Buffer, ByLane, PacketServer, VisitStats};
