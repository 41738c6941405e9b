//! Fuzz target: arbitrary bytes as PRINTF packet streams or raw messages.
#![no_main]

#[path = "../harness/printf.rs"]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    harness::run(data);
});
