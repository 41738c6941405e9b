//! FUNCTION_CALL (service 1, built in): the wave names a host function of
//! this process and its 7 inputs; the function's 2 outputs are the lane's
//! answer. Served lane by lane in device memory (`Packet::answer_lanes`),
//! its inputs read in place.

use super::ids::ERROR_VALUE;
use crate::hostcall::protocol::packet::LaneRequest;
use crate::hostcall::protocol::payload::ANSWER_WORDS;
use crate::log::Level;

/// The FUNCTION_CALL signature: `void f(uint64_t out[2], const uint64_t in[7])`.
/// Called with an unwinding ABI: a C++ exception escaping it unwinds to the
/// listener's panic boundary, which aborts the process (Rust cannot catch
/// foreign exceptions); through `extern "C"` it would be undefined behaviour.
type HostFunction = unsafe extern "C-unwind" fn(out: *mut u64, input: *const u64);

/// FUNCTION_CALL: slot[0] = address of a `HostFunction`, slot[1..8] its
/// 7 inputs; returns its 2 outputs, the lane's answer. A NULL address is
/// answered with `ERROR_VALUE` in slot[0] (slot[1] stays as it was).
pub fn function_call(request: LaneRequest<'_>) -> [u64; ANSWER_WORDS] {
    let address = request.word(0) as usize;
    if address == 0 {
        crate::log!(Level::Error, "hostcall: FUNCTION_CALL with a NULL function; lane gets -1");
        return [ERROR_VALUE, request.word(1)];
    }
    let mut out = [0u64; ANSWER_WORDS];
    // SAFETY: the FUNCTION_CALL contract: device code places in slot[0] the
    // address of a host function of this process with the `HostFunction`
    // signature (the host application handed it to the kernel). The address
    // cannot be verified; `out` is a live array of 2 words and `inputs` the
    // lane's 7 input words, valid for the call (in device memory the wave
    // waits and does not write them; read only by the function). A C++
    // exception escaping the function aborts the process (see `HostFunction`).
    unsafe {
        let function = core::mem::transmute::<usize, HostFunction>(address);
        function(out.as_mut_ptr(), request.inputs());
    }
    out
}
