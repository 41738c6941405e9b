//! ROCclr hostcall core.
