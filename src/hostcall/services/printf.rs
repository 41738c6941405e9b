//! The PRINTF service (id 2) as the listener runs it: message assembly and
//! formatting are `hostcall_printf`'s (`hostcall-printf/`); here is where a
//! finished message goes (the printf sink registered for its buffer, or for
//! every buffer, else one `write(2)` to fd 1 or 2) and where its
//! diagnostics go (the log, AMD_LOG_LEVEL ≥ 2).

use hostcall_printf::{Limits, Output};

use super::handlers::{self, Handler};
use super::ids::SERVICE_PRINTF;
use crate::log::Level;

/// The stream a message is for, as a registered sink is told: standard output.
pub const STREAM_STDOUT: u32 = 1;
/// The stream of a message with control bit 0 set: standard error.
pub const STREAM_STDERR: u32 = 2;

/// The listener's PRINTF service.
pub type PrintfService = hostcall_printf::PrintfService<LibraryOutput>;

/// The service with the default limits and the library's output.
pub fn service() -> PrintfService {
    PrintfService::new(Limits::DEFAULT, LibraryOutput)
}

/// Registered sinks, else fds 1 and 2; diagnostics to the log.
pub struct LibraryOutput;

impl Output for LibraryOutput {
    fn write(&self, buffer_key: usize, stderr: bool, bytes: &[u8]) -> usize {
        write_out(buffer_key, stderr, bytes)
    }

    fn warn(&self, args: core::fmt::Arguments<'_>) {
        crate::log!(Level::Warning, "{args}");
    }
}

/// Hands one whole message to the sink registered for `buffer_key` (or for
/// every buffer), else writes it to fd 1 or 2 in one write (`log::write_out`,
/// which notes a reader gone). Returns the bytes written.
fn write_out(buffer_key: usize, stderr: bool, bytes: &[u8]) -> usize {
    if let Some(call) = handlers::table().enter(SERVICE_PRINTF, buffer_key) {
        if let Handler::PrintfSink { function, user_data } = call.registration().handler {
            let stream = if stderr { STREAM_STDERR } else { STREAM_STDOUT };
            // SAFETY: the registration contract: `function` has the sink
            // signature and may be called with `user_data` until it is
            // unregistered (this call is counted, so unregister waits for
            // it); `bytes` is live for `bytes.len()` reads during the call.
            return unsafe {
                function(
                    user_data as *mut _,
                    buffer_key as *mut _,
                    stream,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                )
            };
        }
    }
    let fd = if stderr { libc::STDERR_FILENO } else { libc::STDOUT_FILENO };
    crate::log::write_out(fd, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hostcall::services::handlers::HandlerError;
    use hostcall_printf::device::printf as device_printf;
    use hostcall_printf::PRINTF_ERROR;
    use std::sync::Mutex as StdMutex;

    /// One call the registered test sink saw: (user, buffer, stream, bytes).
    type SinkCall = (usize, usize, u32, Vec<u8>);
    static SEEN: StdMutex<Vec<SinkCall>> = StdMutex::new(Vec::new());

    unsafe extern "C-unwind" fn record(
        user: *mut core::ffi::c_void,
        buffer: *mut core::ffi::c_void,
        stream: u32,
        bytes: *const core::ffi::c_char,
        length: usize,
    ) -> usize {
        // SAFETY: the service passes `length` readable bytes.
        let bytes = unsafe { core::slice::from_raw_parts(bytes.cast::<u8>(), length) };
        SEEN.lock().unwrap().push((user as usize, buffer as usize, stream, bytes.to_vec()));
        // user 2 is a sink that fails after one byte.
        if user as usize == 2 {
            1
        } else {
            length
        }
    }

    #[test]
    fn a_registered_sink_gets_each_whole_message_with_its_stream() {
        let table = handlers::table();
        let (own, global_only) = (0x5150_1000usize, 0x5150_2000usize);
        let svc = service();
        table.register_printf_sink(Some(own), record, 1).unwrap();
        assert_eq!(
            table.register_printf_sink(Some(own), record, 9),
            Err(HandlerError::AlreadyRegistered),
            "one sink per scope"
        );
        assert_eq!(device_printf(&svc, own, 0, 0, b"out %d\n", &[vec![7]]), 6);
        assert_eq!(device_printf(&svc, own, 3, 1, b"err", &[]), 3);
        table.register_printf_sink(Some(global_only), record, 2).unwrap();
        assert_eq!(device_printf(&svc, global_only, 0, 0, b"short", &[]), PRINTF_ERROR, "sink wrote 1 byte");
        let seen: Vec<_> = SEEN.lock().unwrap().drain(..).collect();
        assert_eq!(
            seen,
            vec![
                (1, own, STREAM_STDOUT, b"out 7\n".to_vec()),
                (1, own, STREAM_STDERR, b"err".to_vec()),
                (2, global_only, STREAM_STDOUT, b"short".to_vec()),
            ]
        );
        table.unregister_printf_sink(Some(own)).unwrap();
        table.unregister_printf_sink(Some(global_only)).unwrap();
        assert_eq!(table.unregister_printf_sink(Some(own)), Err(HandlerError::NotRegistered));
        assert!(table.enter(SERVICE_PRINTF, own).is_none(), "no sink left for the buffer");
        assert_eq!(
            table.unregister(SERVICE_PRINTF, Some(own)),
            Err(HandlerError::ReservedService(SERVICE_PRINTF)),
            "a sink is not a handler"
        );
    }
}
