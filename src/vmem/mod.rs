//! IREE vmem core.
