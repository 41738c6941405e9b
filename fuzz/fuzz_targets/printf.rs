//! Fuzz target: arbitrary bytes as PRINTF packet streams or raw messages.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    amdgpu_dropin::hostcall::printf::fuzzing::run(data);
});
