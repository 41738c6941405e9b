//! ROCclr hostcall exports (filled by the hostcall work).
