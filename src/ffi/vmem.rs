//! IREE vmem exports (filled by the vmem work).
