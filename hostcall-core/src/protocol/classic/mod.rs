//! The classic protocol (ready and free packet stacks): its layout, the view
//! of a buffer in device memory, and the host's serving steps
//! (docs/protocols.md).

pub mod buffer;
pub mod layout;
pub mod serve;
