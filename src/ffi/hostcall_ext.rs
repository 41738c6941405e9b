//! The hostcall extension API (`include/amdgpu_dropin_hostcall.h`): handlers
//! for hostcall services beyond FUNCTION_CALL and PRINTF, the default DEVMEM
//! service, and the SANITIZER hook.
//!
//! Only argument checks, logging, the panic boundary and status conversion
//! live here; the logic is in `crate::hostcall::services`.

use core::ffi::{c_char, c_void};

use static_assertions::const_assert_eq;

use crate::ffi::panic::{ffi_boundary, PanicFallback};
use crate::hostcall::protocol::host_packet::{
    amdgpu_dropin_hostcall_lane_fn, amdgpu_dropin_hostcall_packet_fn,
};
use crate::hostcall::protocol::payload::BUFFER_ALIGNMENT;
use crate::hostcall::services::devmem::{self, PoolError};
use crate::hostcall::services::handlers::{self, Handler, HandlerError, PrintfSinkFn};
use crate::hostcall::services::{ids, printf};
use crate::hostcall::PollFn;
use crate::hostcall::{DisableError, EnableError};
use crate::log::Level;

/// Version of this API: bumped when a function or type changes meaning
/// (docs/c-api-changes.md says what each version changed). Compare with
/// `amdgpu_dropin_hostcall_api_version()` at run time.
pub const AMDGPU_DROPIN_HOSTCALL_API_VERSION: u32 = 5;

/// Service id: call a host function (built in).
pub const AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL: u32 = 1;
/// Service id: device printf (built in).
pub const AMDGPU_DROPIN_HOSTCALL_SERVICE_PRINTF: u32 = 2;
/// Service id: device malloc/free (ROCm device libraries' DEVMEM).
pub const AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM: u32 = 3;
/// Service id: GPU AddressSanitizer reports (SANITIZER).
pub const AMDGPU_DROPIN_HOSTCALL_SERVICE_SANITIZER: u32 = 4;
/// slot[0] of a lane whose request failed or whose service is unknown.
pub const AMDGPU_DROPIN_HOSTCALL_ERROR_VALUE: u64 = u64::MAX;
// The C names of the ids in `services::ids`, the one source (cbindgen writes
// literals, so the values are repeated here and pinned).
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_SERVICE_FUNCTION_CALL, ids::SERVICE_FUNCTION_CALL);
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_SERVICE_PRINTF, ids::SERVICE_PRINTF);
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_SERVICE_DEVMEM, ids::SERVICE_DEVMEM);
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_SERVICE_SANITIZER, ids::SERVICE_SANITIZER);
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_ERROR_VALUE, ids::ERROR_VALUE);

/// printf sink stream: the message is for standard output.
pub const AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT: u32 = 1;
/// printf sink stream: the message is for standard error (control word bit 0).
pub const AMDGPU_DROPIN_HOSTCALL_PRINTF_STDERR: u32 = 2;
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT, printf::STREAM_STDOUT);
const_assert_eq!(AMDGPU_DROPIN_HOSTCALL_PRINTF_STDERR, printf::STREAM_STDERR);

/// Most agents `amdgpu_dropin_hostcall_devmem_enable` accepts.
pub const AMDGPU_DROPIN_HOSTCALL_MAX_AGENTS: u32 = 1024;

/// Result of the extension API's functions.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum amdgpu_dropin_hostcall_status_t {
    /// Done.
    AMDGPU_DROPIN_HOSTCALL_OK = 0,
    /// A NULL callback, a NULL or misaligned pointer, a zero count or handle.
    AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT = 1,
    /// Service 0 (reserved), FUNCTION_CALL or PRINTF: served by the library,
    /// cannot be registered or unregistered.
    AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE = 2,
    /// A handler or printf sink is already registered for this service and
    /// buffer scope, or a poll for this key.
    AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED = 3,
    /// No handler or printf sink is registered for this service and buffer
    /// scope, or no poll for this key.
    AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED = 4,
    /// The HSA runtime (or a function of it) cannot be found.
    AMDGPU_DROPIN_HOSTCALL_ERROR_HSA = 5,
    /// The memory pool is not an allocatable global pool.
    AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_POOL = 6,
    /// An internal error (a bug in the library); logged.
    AMDGPU_DROPIN_HOSTCALL_ERROR_INTERNAL = 7,
    /// The buffer is already enabled, or overlaps an enabled buffer.
    AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_ENABLED = 8,
    /// The process is exiting, or the listener thread cannot start.
    AMDGPU_DROPIN_HOSTCALL_ERROR_UNAVAILABLE = 9,
    /// The buffer is not enabled (unknown or already disabled).
    AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED = 10,
    /// The buffer was disabled from inside one of its own services, which
    /// the calling thread is still running (see the top of this header).
    AMDGPU_DROPIN_HOSTCALL_ERROR_BUSY = 11,
}

use amdgpu_dropin_hostcall_status_t as Status;

impl PanicFallback for amdgpu_dropin_hostcall_status_t {
    fn panic_fallback() -> Self {
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INTERNAL
    }
}

impl PanicFallback for *const c_char {
    fn panic_fallback() -> Self {
        c"internal error".as_ptr()
    }
}

//===----------------------------------------------------------------------===//
// The one mapping of hostcall errors to C statuses, and their descriptions
//===----------------------------------------------------------------------===//

impl Status {
    /// Every status, for `from_raw`.
    const ALL: [Status; 12] = [
        Status::AMDGPU_DROPIN_HOSTCALL_OK,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_HSA,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_POOL,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INTERNAL,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_ENABLED,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_UNAVAILABLE,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED,
        Status::AMDGPU_DROPIN_HOSTCALL_ERROR_BUSY,
    ];

    /// The status a C value names, if any.
    fn from_raw(raw: i32) -> Option<Status> {
        Status::ALL.into_iter().find(|status| *status as i32 == raw)
    }

    /// What the status means, as `amdgpu_dropin_hostcall_status_string` returns it.
    pub(crate) fn text(self) -> &'static core::ffi::CStr {
        match self {
            Status::AMDGPU_DROPIN_HOSTCALL_OK => c"ok",
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT => c"invalid argument",
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE => {
                c"reserved service: 0, FUNCTION_CALL and PRINTF are built in"
            }
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED => {
                c"already registered (a handler or printf sink for this service and buffer, or a poll for this key)"
            }
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED => {
                c"not registered (no handler or printf sink for this service and buffer, or no poll for this key)"
            }
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_HSA => c"the HSA runtime or one of its functions is unavailable",
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_POOL => c"the memory pool is not an allocatable global pool",
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INTERNAL => c"internal error",
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_ENABLED => {
                c"the buffer is already enabled or overlaps an enabled buffer"
            }
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_UNAVAILABLE => {
                c"the process is exiting or the listener thread cannot start"
            }
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED => c"the buffer is not enabled",
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_BUSY => {
                c"the buffer is still being served by the calling thread (disabled from inside its own service)"
            }
        }
    }
}

impl From<HandlerError> for Status {
    fn from(error: HandlerError) -> Status {
        match error {
            HandlerError::ReservedService(_) => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_RESERVED_SERVICE,
            HandlerError::AlreadyRegistered => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED,
            HandlerError::NotRegistered => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED,
        }
    }
}

impl From<&EnableError> for Status {
    fn from(error: &EnableError) -> Status {
        match error {
            EnableError::NullBuffer
            | EnableError::Misaligned(_)
            | EnableError::TooFewPackets(_)
            | EnableError::BadOccupancy(_)
            | EnableError::AddressRange => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT,
            EnableError::AlreadyEnabled | EnableError::Overlaps(_) => {
                Status::AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_ENABLED
            }
            EnableError::Hsa(_) => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_HSA,
            EnableError::StillServing(_) => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_BUSY,
            EnableError::Exiting | EnableError::Thread(_) => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_UNAVAILABLE,
        }
    }
}

impl From<&DisableError> for Status {
    fn from(error: &DisableError) -> Status {
        match error {
            DisableError::NullBuffer => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT,
            DisableError::NotEnabled => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_ENABLED,
        }
    }
}

impl From<&PoolError> for Status {
    fn from(error: &PoolError) -> Status {
        match error {
            PoolError::Hsa(_) => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_HSA,
            PoolError::BadPool(_) => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_POOL,
        }
    }
}

/// Returns `AMDGPU_DROPIN_HOSTCALL_API_VERSION` of the loaded library.
#[no_mangle]
pub extern "C" fn amdgpu_dropin_hostcall_api_version() -> u32 {
    AMDGPU_DROPIN_HOSTCALL_API_VERSION
}

/// Returns a static, NUL-terminated description of `status` ("unknown
/// status" for a value that is not an `amdgpu_dropin_hostcall_status_t`).
#[no_mangle]
pub extern "C" fn amdgpu_dropin_hostcall_status_string(status: i32) -> *const c_char {
    ffi_boundary!("amdgpu_dropin_hostcall_status_string", {
        Status::from_raw(status).map_or(c"unknown status", Status::text).as_ptr()
    })
}

/// The buffer scope of a registration: NULL = every buffer; else an address
/// aligned like a hostcall buffer.
fn scope(buffer: *mut c_void) -> Result<Option<usize>, Status> {
    let key = buffer as usize;
    if key == 0 {
        Ok(None)
    } else if key % BUFFER_ALIGNMENT != 0 {
        Err(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT)
    } else {
        Ok(Some(key))
    }
}

fn register(name: &str, service: u32, buffer: *mut c_void, handler: Option<Handler>) -> Status {
    let result = scope(buffer).and_then(|scope| {
        let handler = handler.ok_or(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT)?;
        handlers::table().register(service, scope, handler).map_err(Status::from)
    });
    report(name, service, buffer, result)
}

fn report(name: &str, service: u32, buffer: *mut c_void, result: Result<(), Status>) -> Status {
    match result {
        Ok(()) => Status::AMDGPU_DROPIN_HOSTCALL_OK,
        Err(status) => {
            crate::log!(
                Level::Error,
                "{name}(service={service}, buffer={buffer:p}): {}",
                status.text().to_string_lossy()
            );
            status
        }
    }
}

/// Registers `handler` to answer service `service` one active lane at a time,
/// for the hostcall buffer `buffer` only, or for every buffer when `buffer` is
/// NULL. A buffer's own handler is preferred over the one for every buffer.
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL `handler`, `buffer` not aligned like
/// a hostcall buffer), `_ERROR_RESERVED_SERVICE` (0, FUNCTION_CALL, PRINTF),
/// `_ERROR_ALREADY_REGISTERED` (this service already has a handler for this
/// scope: unregister it first).
///
/// # Safety
/// `handler` must be callable with `user_data` from the listener thread until
/// `amdgpu_dropin_hostcall_unregister_handler` returns for this service and
/// scope (or, for one buffer, until `disableHostcalls` of that buffer
/// returns). It must not unwind (a C++ exception terminates the process).
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_register_lane_handler(
    service: u32,
    buffer: *mut c_void,
    handler: amdgpu_dropin_hostcall_lane_fn,
    user_data: *mut c_void,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_register_lane_handler", {
        let handler = handler.map(|function| Handler::Lane { function, user_data: user_data as usize });
        register("amdgpu_dropin_hostcall_register_lane_handler", service, buffer, handler)
    })
}

/// As `amdgpu_dropin_hostcall_register_lane_handler`, with a handler that
/// answers a whole packet at a time (it sees the active mask and every active
/// lane; the SANITIZER hook is one of these).
///
/// # Safety
/// As `amdgpu_dropin_hostcall_register_lane_handler`.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_register_packet_handler(
    service: u32,
    buffer: *mut c_void,
    handler: amdgpu_dropin_hostcall_packet_fn,
    user_data: *mut c_void,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_register_packet_handler", {
        let handler = handler.map(|function| Handler::Packet { function, user_data: user_data as usize });
        register("amdgpu_dropin_hostcall_register_packet_handler", service, buffer, handler)
    })
}

/// Unregisters the handler of `service` for `buffer` (NULL: the one for every
/// buffer), or the default DEVMEM service enabled for that scope (which
/// frees the remaining blocks of its pool and agents if it was their last
/// registration, or its buffer their last buffer). When it returns, the handler runs no more and
/// no call of it is running, except one this thread is inside: called from
/// the handler itself it does not wait for itself (that call finishes after
/// the return, and is the last: a per-lane handler is not called for the
/// packet's remaining lanes, which get `AMDGPU_DROPIN_HOSTCALL_ERROR_VALUE`
/// in slot[0]; so the handler may free its `user_data` right after the
/// unregister returns). Called from another handler it waits like any caller (two
/// handlers that unregister each other at the same moment wait forever).
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (misaligned `buffer`),
/// `_ERROR_RESERVED_SERVICE`, `_ERROR_NOT_REGISTERED`.
///
/// # Safety
/// `buffer` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_unregister_handler(
    service: u32,
    buffer: *mut c_void,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_unregister_handler", {
        let result = scope(buffer)
            .and_then(|scope| handlers::table().unregister(service, scope).map_err(Status::from));
        report("amdgpu_dropin_hostcall_unregister_handler", service, buffer, result)
    })
}

/// Serves DEVMEM (service 3) for `buffer` (NULL: every buffer) with the
/// default service: device allocations come from the HSA memory pool
/// `pool_handle` (an `hsa_amd_memory_pool_t` handle), the `agent_count`
/// agents of `agent_handles` (`hsa_agent_t` handles; usually the GPU) get
/// access, and frees return blocks to the pool. The blocks belong to the
/// device, not to one buffer: every registration with the same pool and
/// agents shares one book, so a block allocated through buffer A may be
/// freed (or used) through buffer B of that scope, also after A is disabled.
/// The blocks left are freed when the scope ends: its last buffer (one that
/// was registered for, or made a request) is disabled, or its last
/// registration is unregistered (service 3, same scope). A forked child
/// inherits no registration. A ROCclr-like runtime registers its own DEVMEM
/// handler instead.
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (zero pool handle, NULL agents, a count
/// of 0 or above `AMDGPU_DROPIN_HOSTCALL_MAX_AGENTS`, a zero agent handle,
/// misaligned `buffer`), `_ERROR_HSA`, `_ERROR_INVALID_POOL` (not a global
/// pool that allows runtime allocation), `_ERROR_ALREADY_REGISTERED`.
///
/// # Safety
/// `agent_handles`: NULL (rejected) or valid for reads of `agent_count`
/// handles during the call (they are copied).
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_devmem_enable(
    buffer: *mut c_void,
    pool_handle: u64,
    agent_handles: *const u64,
    agent_count: u32,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_devmem_enable", {
        let result = (|| {
            let scope = scope(buffer)?;
            if pool_handle == 0
                || agent_handles.is_null()
                || agent_count == 0
                || agent_count > AMDGPU_DROPIN_HOSTCALL_MAX_AGENTS
            {
                return Err(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
            }
            // SAFETY: non-NULL and valid for `agent_count` reads (caller contract).
            let handles = unsafe { core::slice::from_raw_parts(agent_handles, agent_count as usize) };
            if handles.contains(&0) {
                return Err(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
            }
            devmem::register_default(scope, pool_handle, handles).map_err(|e| match e {
                devmem::RegisterError::Pool(e) => {
                    crate::log!(Level::Error, "amdgpu_dropin_hostcall_devmem_enable: {e}");
                    Status::from(&e)
                }
                devmem::RegisterError::Handler(e) => Status::from(e),
            })
        })();
        report("amdgpu_dropin_hostcall_devmem_enable", ids::SERVICE_DEVMEM, buffer, result)
    })
}

/// A printf sink: takes one whole formatted device printf message, `length`
/// bytes at `bytes` (not NUL-terminated; it may contain NUL bytes), for
/// `stream` (`AMDGPU_DROPIN_HOSTCALL_PRINTF_STDOUT` or `_STDERR`, from the
/// message's control word), printed by a wave of hostcall buffer `buffer`.
/// Returns the bytes it wrote: `length` on success; any other value makes
/// that printf return -1 on the device (logged once). `bytes` is valid only
/// during the call. In C++, register `amdgpu_dropin::catching_printf_sink<f>`
/// (an exception leaving `f` then fails the message).
pub type amdgpu_dropin_hostcall_printf_sink_fn = Option<
    unsafe extern "C-unwind" fn(
        user_data: *mut c_void,
        buffer: *mut c_void,
        stream: u32,
        bytes: *const c_char,
        length: usize,
    ) -> usize,
>;
const_assert_eq!(
    core::mem::size_of::<amdgpu_dropin_hostcall_printf_sink_fn>(),
    core::mem::size_of::<PrintfSinkFn>()
);

/// Registers `sink` to take device printf output (service 2) instead of
/// file descriptors 1 and 2, for the hostcall buffer `buffer` only, or for
/// every buffer when `buffer` is NULL (a buffer's own sink is preferred, and
/// ends with the disable of that buffer). Each message is handed over whole,
/// in one call, on a listener thread, in the order the listener completed
/// the messages; two buffers' messages may reach the sink at once from two
/// listener threads. A runtime whose host printf goes through C stdio (ROCclr)
/// writes each message under the stream's lock and flushes it, so device and
/// host output keep their order. Without a sink each message is one
/// `write(2)` to fd 1 or 2.
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL `sink`, `buffer` not aligned like
/// a hostcall buffer), `_ERROR_ALREADY_REGISTERED` (this scope has a sink:
/// unregister it first). A forked child inherits no sink.
///
/// # Safety
/// `sink` must be callable with `user_data` from the listener threads until
/// `amdgpu_dropin_hostcall_unregister_printf_sink` returns for this scope (or,
/// for one buffer, until its disable returns). It must not unwind.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_register_printf_sink(
    buffer: *mut c_void,
    sink: amdgpu_dropin_hostcall_printf_sink_fn,
    user_data: *mut c_void,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_register_printf_sink", {
        let result = scope(buffer).and_then(|scope| {
            let sink = sink.ok_or(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT)?;
            handlers::table().register_printf_sink(scope, sink, user_data as usize).map_err(Status::from)
        });
        report("amdgpu_dropin_hostcall_register_printf_sink", ids::SERVICE_PRINTF, buffer, result)
    })
}

/// Unregisters the printf sink of `buffer` (NULL: the one for every buffer);
/// that scope's messages go to the next sink in line (the one for every
/// buffer), else to fds 1 and 2. When it returns no call of the sink is
/// running, except one this thread is inside (called from the sink itself,
/// it does not wait for itself).
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (misaligned `buffer`),
/// `_ERROR_NOT_REGISTERED`.
///
/// # Safety
/// `buffer` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_unregister_printf_sink(
    buffer: *mut c_void,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_unregister_printf_sink", {
        let result = scope(buffer)
            .and_then(|scope| handlers::table().unregister_printf_sink(scope).map_err(Status::from));
        report("amdgpu_dropin_hostcall_unregister_printf_sink", ids::SERVICE_PRINTF, buffer, result)
    })
}

/// A poll callback: serves what is pending in a request channel of the
/// caller's own (an RPC buffer, say) registered under `key`. Returns 1 when
/// it served something (the listener polls again soon, as after a packet),
/// 0 when nothing was pending; a negative value is a failure (logged once
/// per registration, taken as 0). In C++, register
/// `amdgpu_dropin::catching_poll<f>` (an exception leaving `f` then fails
/// the call).
pub type amdgpu_dropin_hostcall_poll_fn =
    Option<unsafe extern "C-unwind" fn(user_data: *mut c_void, key: *mut c_void) -> i32>;
const_assert_eq!(core::mem::size_of::<amdgpu_dropin_hostcall_poll_fn>(), core::mem::size_of::<PollFn>());

/// Registers `poll` with the listener for a request channel of the caller's
/// own, named by `key` (not dereferenced; e.g. the channel's address): the
/// listener calls `poll(user_data, key)` whenever it scans its buffers, i.e.
/// after a ring of its doorbell, again right after a poll that served
/// something, and on the periodic re-check of an idle listener (its wait
/// timeout, up to 1 s); never while it sleeps otherwise, so an idle channel
/// costs no CPU. The doorbell's `hsa_signal_t` handle goes to `*doorbell`:
/// device code rings the listener by changing its value (e.g. adding 1),
/// as waves ring it for hostcall buffers. Like an enabled buffer, a
/// registration starts the listener and keeps it running.
///
/// One registration is polled by one thread at a time; two registrations
/// (or a registration and a buffer) may be served at once by the main
/// listener and its helper thread.
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL `key`, `poll` or `doorbell`),
/// `_ERROR_ALREADY_REGISTERED` (`key` is registered, or lies inside an
/// enabled hostcall buffer), `_ERROR_HSA` (no HSA
/// runtime for the doorbell signal), `_ERROR_UNAVAILABLE` (process exiting,
/// thread cannot start). `*doorbell` is written only on success. A forked
/// child inherits no registration.
///
/// # Safety
/// `poll` must be callable with `user_data` and `key` from the listener
/// threads until `amdgpu_dropin_hostcall_unregister_poll(key)` returns. It
/// must not unwind. `doorbell` must be NULL (rejected) or writable.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_register_poll(
    key: *mut c_void,
    poll: amdgpu_dropin_hostcall_poll_fn,
    user_data: *mut c_void,
    doorbell: *mut u64,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_register_poll", {
        let result = (|| {
            let poll = poll.ok_or(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT)?;
            if key.is_null() || doorbell.is_null() {
                return Err(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT);
            }
            let handle =
                crate::hostcall::register_poll(key as usize, poll, user_data as usize).map_err(|e| {
                    crate::log!(Level::Error, "amdgpu_dropin_hostcall_register_poll(key={key:p}): {e}");
                    poll_status(&e)
                })?;
            // SAFETY: non-NULL and writable (caller contract).
            unsafe { doorbell.write(handle) };
            Ok(())
        })();
        report_poll("amdgpu_dropin_hostcall_register_poll", key, result)
    })
}

/// Unregisters the poll registered under `key`. When it returns the poll is
/// not called any more and no call of it is running, except one this thread
/// is inside (called from the poll itself, it does not wait for itself;
/// that call is the last). The last registration or buffer gone stops the
/// listener, and its doorbell with it.
///
/// Errors: `_ERROR_INVALID_ARGUMENT` (NULL `key`), `_ERROR_NOT_REGISTERED`.
///
/// # Safety
/// `key` is only compared, never dereferenced.
#[no_mangle]
pub unsafe extern "C" fn amdgpu_dropin_hostcall_unregister_poll(
    key: *mut c_void,
) -> amdgpu_dropin_hostcall_status_t {
    ffi_boundary!("amdgpu_dropin_hostcall_unregister_poll", {
        let result = if key.is_null() {
            Err(Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT)
        } else {
            crate::hostcall::unregister_poll(key as usize).map_err(|e| match e {
                DisableError::NullBuffer => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_INVALID_ARGUMENT,
                DisableError::NotEnabled => Status::AMDGPU_DROPIN_HOSTCALL_ERROR_NOT_REGISTERED,
            })
        };
        report_poll("amdgpu_dropin_hostcall_unregister_poll", key, result)
    })
}

/// A poll registration's enable error as a status: the key in use is
/// "already registered", the rest as for buffers.
fn poll_status(error: &EnableError) -> Status {
    match error {
        EnableError::AlreadyEnabled | EnableError::Overlaps(_) => {
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_ALREADY_REGISTERED
        }
        other => Status::from(other),
    }
}

fn report_poll(name: &str, key: *mut c_void, result: Result<(), Status>) -> Status {
    match result {
        Ok(()) => Status::AMDGPU_DROPIN_HOSTCALL_OK,
        Err(status) => {
            crate::log!(Level::Error, "{name}(key={key:p}): {}", status.text().to_string_lossy());
            status
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_own_text_and_other_values_are_unknown() {
        let mut texts = Vec::new();
        for status in Status::ALL {
            let raw = status as i32;
            assert_eq!(Status::from_raw(raw), Some(status));
            // SAFETY: status_string returns a static NUL-terminated string.
            let text = unsafe { core::ffi::CStr::from_ptr(amdgpu_dropin_hostcall_status_string(raw)) };
            assert_eq!(text, status.text());
            assert!(!texts.contains(&text), "{status:?} shares its text");
            texts.push(text);
        }
        assert_eq!(
            texts.len(),
            Status::AMDGPU_DROPIN_HOSTCALL_ERROR_BUSY as usize + 1,
            "ALL lists every status"
        );
        for raw in [-1, Status::ALL.len() as i32, i32::MAX, i32::MIN] {
            // SAFETY: as above.
            let text = unsafe { core::ffi::CStr::from_ptr(amdgpu_dropin_hostcall_status_string(raw)) };
            assert_eq!(text, c"unknown status");
        }
    }
}
