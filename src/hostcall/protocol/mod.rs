//! The two wire protocols a hostcall buffer can speak (docs/protocols.md):
//! `classic` (ready and free packet stacks) and `phase_bit` (a device and a
//! host phase per packet), each as its layout, its view of a buffer in device
//! memory and its serving steps. `Protocol` is the one place the rest of the
//! crate asks what a protocol needs (size, alignment, packets, name);
//! `Buffer` is a registered buffer in its protocol. `packet` is the packet
//! view the services see, the same for both.

pub mod classic;
#[cfg(not(loom))]
pub mod device_words;
pub mod packet;
pub mod payload;
pub mod phase_bit;

#[cfg(not(loom))]
pub use real::{Buffer, Protocol};

#[cfg(not(loom))]
mod real {
    use core::ptr::NonNull;

    use super::classic::buffer::DeviceBuffer;
    use super::classic::layout as classic_layout;
    use super::phase_bit::buffer::PhaseBuffer;
    use super::phase_bit::layout as phase_layout;
    use super::phase_bit::serve::{has_pending, ScanCell};
    use crate::hostcall::sync::Ordering;

    /// The hostcall protocol a buffer is enabled with (the device code using
    /// the buffer must have been built for the same one).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Protocol {
        /// Ready and free stacks of tagged pointers (`classic`).
        Classic,
        /// Device and host phase words, packets claimed through the caller's
        /// occupancy bitmap at `occupied` (`phase_bit`).
        PhaseBit { occupied: usize },
    }

    impl Protocol {
        /// The protocol the C value `id` (`amdgpu_dropin_hostcall_protocol_t`)
        /// names, with the bitmap address for phase-bit; `None` if unknown.
        pub fn from_id(id: u32, occupied: usize) -> Option<Protocol> {
            match id {
                0 => Some(Protocol::Classic),
                1 => Some(Protocol::PhaseBit { occupied }),
                _ => None,
            }
        }

        /// Bytes a buffer of `packets` packets occupies in this protocol;
        /// defined for every count, 0 included.
        pub fn buffer_size(self, packets: u32) -> usize {
            match self {
                Protocol::Classic => classic_layout::buffer_size(packets),
                Protocol::PhaseBit { .. } => phase_layout::buffer_size(packets),
            }
        }

        /// The buffer's required alignment (8 in both).
        pub fn alignment(self) -> usize {
            match self {
                Protocol::Classic => classic_layout::BUFFER_ALIGNMENT,
                Protocol::PhaseBit { .. } => phase_layout::PHASE_BUFFER_ALIGNMENT,
            }
        }

        /// The fewest packets a buffer may have.
        pub fn min_packets(self) -> u32 {
            match self {
                // One packet would make the empty stack (0) and packet 0 alike.
                Protocol::Classic => 2,
                Protocol::PhaseBit { .. } => 1,
            }
        }

        /// The protocol's name in log lines.
        pub fn name(self) -> &'static str {
            match self {
                Protocol::Classic => "classic",
                Protocol::PhaseBit { .. } => "phase-bit",
            }
        }
    }

    /// A registered buffer, in the protocol it was enabled with.
    pub enum Buffer {
        /// The classic protocol (ready and free stacks).
        Classic(DeviceBuffer),
        /// The phase-bit protocol, with the host's scan state.
        PhaseBit { buffer: PhaseBuffer, scan: ScanCell },
    }

    impl Buffer {
        /// Initializes the buffer at `base` for `protocol` (its doorbell
        /// signal handle `doorbell`) and returns the view of it.
        ///
        /// # Safety
        /// `base` is `protocol.alignment()`-aligned and valid for reads and
        /// writes of `protocol.buffer_size(packets)` bytes until the buffer
        /// is unregistered and the listener has let go of it, and accessed
        /// meanwhile only atomically or by device code following `protocol`.
        pub unsafe fn initialize(
            protocol: Protocol,
            base: NonNull<u8>,
            packets: u32,
            doorbell: u64,
        ) -> Buffer {
            match protocol {
                Protocol::Classic => {
                    // SAFETY: forwarded contract.
                    let buffer = unsafe { DeviceBuffer::new(base, packets) };
                    buffer.initialize(doorbell);
                    Buffer::Classic(buffer)
                }
                Protocol::PhaseBit { occupied } => {
                    // SAFETY: forwarded contract, for the phase-bit size.
                    let buffer = unsafe { PhaseBuffer::new(base, packets) };
                    buffer.initialize(doorbell, occupied);
                    Buffer::PhaseBit { buffer, scan: ScanCell::new(packets) }
                }
            }
        }

        /// Bytes of device-shared memory the buffer spans.
        pub fn size(&self) -> usize {
            match self {
                Buffer::Classic(buffer) => Protocol::Classic.buffer_size(buffer.packets()),
                Buffer::PhaseBit { buffer, .. } => {
                    Protocol::PhaseBit { occupied: 0 }.buffer_size(buffer.packets())
                }
            }
        }

        /// Whether requests are waiting to be served: relaxed peeks (serving
        /// reads again with acquire). Only while the buffer is alive: from
        /// inside its gate, or by disable before it returns.
        pub fn has_waiting_requests(&self) -> bool {
            match self {
                Buffer::Classic(buffer) => buffer.ready_stack().load(Ordering::Relaxed) != 0,
                Buffer::PhaseBit { buffer, .. } => has_pending(buffer),
            }
        }
    }
}
