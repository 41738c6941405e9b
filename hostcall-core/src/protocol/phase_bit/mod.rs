//! The phase-bit protocol (a device and a host phase per packet): its layout,
//! the view of a buffer in device memory, and the host's serving steps
//! (docs/protocols.md, docs/phase-bit-device-ordering.md).

pub mod buffer;
pub mod layout;
pub mod serve;
