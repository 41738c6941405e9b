//! Registration: `enableHostcalls` / `disableHostcalls`, the process-wide
//! listener's lifetime, and the process-level hooks (exit, fork, unload).
//!
//! # Thread safety
//!
//! Enable and disable may be called from any thread, concurrently with each
//! other and with traffic. They serialize on `State::control` (a std mutex
//! held for list updates and listener start, never while a service runs and
//! never while waiting for the listener). The listener never takes it.
//!
//! What enable and disable accept, refuse and wait for, and what exit, fork
//! and dlclose do, is documented behaviour: docs/behaviour.md and the C
//! headers state it; docs/process.md has exit and fork.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::counters::amdgpu_dropin_hostcall_counters_t as Counts;
use super::listener::{self, Entry, Listener, SignalApi};
use super::process::{
    self, ForkLocal, ForkSafeOnce, EXITING, EXIT_HANDLER_RAN, IN_DOORBELL_WAIT, LIVE_THREADS,
};
use super::protocol::poll::{PollChannel, PollFn};
use super::protocol::Buffer;
pub use super::protocol::Protocol;
use super::waiting;
use crate::log::Level;
use hostcall_core::gate::Gate;

/// Longest the last `disableHostcalls` waits for the listener thread to end
/// before leaving it to finish on its own (it holds its own references).
pub const STOP_TIMEOUT: Duration = Duration::from_millis(super::tunables::STOP_TIMEOUT_MS);

/// Longest process exit (or library unload) waits for listeners to leave
/// their loop (a listener stuck in a service is left behind after it).
pub const EXIT_TIMEOUT: Duration = Duration::from_millis(super::tunables::EXIT_TIMEOUT_MS);

/// Longest exit waits, after `EXIT_TIMEOUT`, for a listener still inside the
/// HSA doorbell wait (no ring could reach it): its longest wait plus margin.
const EXIT_WAIT_FOR_HSA_WAIT: Duration =
    Duration::from_millis(super::tunables::IDLE_WAIT_MAX_MS + super::tunables::EXIT_TIMEOUT_MS);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnableError {
    NullBuffer,
    Misaligned(usize),
    TooFewPackets(u32),
    /// Phase-bit without an occupancy bitmap, or it is not 4-aligned, wraps
    /// the address space or overlaps the buffer.
    BadOccupancy(usize),
    AddressRange,
    AlreadyEnabled,
    Overlaps(usize),
    /// The buffer (or one it overlaps, at this key) was disabled from inside
    /// one of its own services, which this thread is still running.
    StillServing(usize),
    Exiting,
    Hsa(String),
    Thread(String),
}

impl core::fmt::Display for EnableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            EnableError::NullBuffer => write!(f, "buffer is NULL"),
            EnableError::Misaligned(a) => {
                write!(
                    f,
                    "buffer {a:#x} is not aligned to {} bytes",
                    super::protocol::payload::BUFFER_ALIGNMENT
                )
            }
            EnableError::TooFewPackets(n) => {
                write!(f, "{n} packets: the classic hostcall protocol needs at least 2, phase-bit 1")
            }
            EnableError::BadOccupancy(a) => {
                write!(
                    f,
                    "occupancy bitmap {a:#x} is NULL, not aligned to 4 bytes, wraps the address space or \
                     overlaps the buffer (phase-bit needs one of its own)"
                )
            }
            EnableError::AddressRange => write!(f, "buffer range wraps around the address space"),
            EnableError::AlreadyEnabled => {
                write!(f, "buffer is already enabled (first registration kept, buffer untouched)")
            }
            EnableError::Overlaps(other) => {
                write!(f, "buffer overlaps the enabled buffer {other:#x}")
            }
            EnableError::StillServing(other) => write!(
                f,
                "buffer {other:#x} was disabled from inside one of its own hostcall services, which \
                 this thread is still running; enable it after that service has returned (nothing \
                 was changed)"
            ),
            EnableError::Exiting => write!(f, "the process is exiting"),
            EnableError::Hsa(e) => write!(f, "HSA unavailable: {e}"),
            EnableError::Thread(e) => write!(f, "{e}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisableError {
    NullBuffer,
    NotEnabled,
}

impl core::fmt::Display for DisableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DisableError::NullBuffer => write!(f, "buffer is NULL; nothing done"),
            DisableError::NotEnabled => {
                write!(f, "buffer is not enabled (unknown or already disabled); nothing done")
            }
        }
    }
}

/// The started listener: shared state and its main thread.
struct ActiveListener {
    listener: Arc<Listener>,
    thread: std::thread::JoinHandle<()>,
}

#[derive(Default)]
struct Control {
    entries: Vec<Arc<Entry>>,
    /// Buffers disabled from inside one of their own services, kept until
    /// the listener has left them (`enable` of an overlapping range waits
    /// for that, or refuses on the thread still inside).
    draining: Vec<Arc<Entry>>,
    listener: Option<ActiveListener>,
}

struct State {
    control: Mutex<Control>,
}

/// The process's registration state. Replaced (the old one leaked) in a
/// forked child, whose copy may hold a mutex locked by a thread that does
/// not exist there.
static STATE: ForkLocal<State> = ForkLocal::new();

fn state() -> &'static State {
    STATE.get_or_make(|| State { control: Mutex::new(Control::default()) })
}

fn lock(state: &State) -> std::sync::MutexGuard<'_, Control> {
    // A panic while holding the lock cannot leave Control inconsistent in a
    // way that matters more than refusing every later call would.
    state.control.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Registers `buffer` for the classic protocol (`enable_with`).
///
/// # Safety
/// As `enable_with`.
pub unsafe fn enable(buffer: *mut c_void, packets: u32, queue: *const c_void) -> Result<(), EnableError> {
    // SAFETY: forwarded contract.
    unsafe { enable_with(buffer, packets, queue, Protocol::Classic, 0) }
}

/// Registers `buffer` (initializing it for `protocol`, with the occupancy
/// bitmap at `occupied` for phase-bit, 0 for classic) and starts the
/// listener if needed.
///
/// # Safety
/// `buffer`, if non-NULL and accepted, must be valid for reads and writes of
/// `protocol.buffer_size(packets)` bytes until `disable` returns for it, and
/// accessed meanwhile only by device code following that protocol.
pub unsafe fn enable_with(
    buffer: *mut c_void,
    packets: u32,
    queue: *const c_void,
    protocol: Protocol,
    occupied: usize,
) -> Result<(), EnableError> {
    let base = NonNull::new(buffer.cast::<u8>()).ok_or(EnableError::NullBuffer)?;
    let key = base.as_ptr() as usize;
    if key % protocol.alignment() != 0 {
        return Err(EnableError::Misaligned(key));
    }
    if packets < protocol.min_packets() {
        return Err(EnableError::TooFewPackets(packets));
    }
    let size = protocol.buffer_size(packets);
    let end = key.checked_add(size).ok_or(EnableError::AddressRange)?;
    if !protocol.accepts_occupancy(occupied, packets, key..end) {
        return Err(EnableError::BadOccupancy(occupied));
    }
    let registered = register_entry(key, end, queue as usize, |doorbell| {
        // SAFETY: validated above (non-NULL, aligned, no wrap) and the
        // caller's contract covers validity and exclusive protocol access
        // until disable.
        unsafe { Buffer::initialize(protocol, base, packets, doorbell, occupied) }
    })?;
    crate::log!(
        Level::Info,
        "hostcall: enabled {} buffer {:#x} ({} packets, queue {:p}); {} buffer(s) enabled",
        protocol.name(),
        key,
        packets,
        queue,
        registered.entries
    );
    Ok(())
}

/// Registers a poll of a channel of the caller's own under `key`
/// (`amdgpu_dropin_hostcall_register_poll`), served by the listener as a
/// buffer is; starts the listener if needed. Returns the doorbell's handle.
pub fn register_poll(key: usize, function: PollFn, user_data: usize) -> Result<u64, EnableError> {
    if key == 0 {
        return Err(EnableError::NullBuffer);
    }
    let end = key.checked_add(1).ok_or(EnableError::AddressRange)?;
    let registered =
        register_entry(key, end, 0, |_| Buffer::Poll(PollChannel::new(key, function, user_data)))?;
    crate::log!(
        Level::Info,
        "hostcall: registered a poll for key {key:#x}; {} buffer(s) and poll(s) registered",
        registered.entries
    );
    Ok(registered.doorbell)
}

/// What `register_entry` registered.
struct Registered {
    /// The listener's doorbell handle.
    doorbell: u64,
    /// Entries registered now (buffers and polls).
    entries: usize,
}

/// Adds the entry `make(doorbell)` for `key..end` and starts the listener
/// if none runs. Refuses a key or range in use, and waits for (or, on the
/// thread still inside, refuses) a range whose entry was unregistered from
/// inside its own service.
fn register_entry(
    key: usize,
    end: usize,
    queue: usize,
    make: impl FnOnce(u64) -> Buffer,
) -> Result<Registered, EnableError> {
    // Relaxed: checked again under the lock below; a hint here.
    if EXITING.load(Ordering::Relaxed) {
        return Err(EnableError::Exiting);
    }
    let state = state();
    let mut control = lock(state);
    // Disabled from inside its own service: wait until the listener has left, or refuse the thread inside.
    loop {
        control.draining.retain(|entry| !entry.gate.is_idle());
        let busy =
            control.draining.iter().find(|entry| key < entry.key + entry.buffer.size() && entry.key < end);
        let Some(busy) = busy.map(Arc::clone) else {
            break;
        };
        if process::serving_on_this_thread(&busy.gate) {
            return Err(EnableError::StillServing(busy.key));
        }
        drop(control);
        wait_until_idle(&busy.gate, busy.key);
        control = lock(state);
    }
    if EXITING.load(Ordering::SeqCst) {
        return Err(EnableError::Exiting);
    }
    for entry in &control.entries {
        if entry.key == key {
            return Err(EnableError::AlreadyEnabled);
        }
        let other_end = entry.key + entry.buffer.size();
        if key < other_end && entry.key < end {
            return Err(EnableError::Overlaps(entry.key));
        }
    }
    if control.listener.is_none() {
        control.listener = Some(start_listener()?);
    }
    let shared = Arc::clone(&control.listener.as_ref().expect("listener just ensured").listener);
    let doorbell = shared.doorbell_handle();
    control.entries.push(Arc::new(Entry::new(key, make(doorbell), queue, shared.counters.snapshot())));
    shared.publish(&control.entries);
    Ok(Registered { doorbell, entries: control.entries.len() })
}

/// Unregisters `buffer`; after return the listener no longer touches it
/// (except when called from a service of that buffer: docs/behaviour.md).
pub fn disable(buffer: *mut c_void, queue: *const c_void) -> Result<(), DisableError> {
    if buffer.is_null() {
        return Err(DisableError::NullBuffer);
    }
    let key = buffer as usize;
    let entry = unregister_entry(key, false)?;
    if entry.queue != queue as usize {
        crate::log!(
            Level::Warning,
            "disableHostcalls: buffer {:#x} was enabled with queue {:#x}, disabled with {:p}; disabled anyway",
            key,
            entry.queue,
            queue
        );
    }
    Ok(())
}

/// Unregisters the poll registered under `key`; after return it is not
/// called any more (except when called from that poll itself, which then
/// finishes after the return).
pub fn unregister_poll(key: usize) -> Result<(), DisableError> {
    if key == 0 {
        return Err(DisableError::NullBuffer);
    }
    unregister_entry(key, true).map(drop)
}

/// Removes the entry of `key` (a poll or a buffer, as `poll` says), waits
/// until no listener thread is inside it (unless this thread is), forgets
/// what the services keep for a buffer, and stops the listener with the last
/// entry. Returns the entry.
fn unregister_entry(key: usize, poll: bool) -> Result<Arc<Entry>, DisableError> {
    let what = if poll { "poll" } else { "buffer" };
    let (entry, shared, stopping, remaining) = {
        let mut control = lock(state());
        let index = control
            .entries
            .iter()
            .position(|e| e.key == key && e.buffer.is_poll() == poll)
            .ok_or(DisableError::NotEnabled)?;
        let entry = control.entries.remove(index);
        if !entry.gate.close() && process::serving_on_this_thread(&entry.gate) {
            // Disabled from inside its own service: kept until the listener has left it (see enable).
            control.draining.push(Arc::clone(&entry));
        }
        let shared =
            Arc::clone(&control.listener.as_ref().expect("an enabled buffer has a listener").listener);
        shared.publish(&control.entries);
        let stopping = if control.entries.is_empty() { control.listener.take() } else { None };
        (entry, shared, stopping, control.entries.len())
    };
    if process::serving_on_this_thread(&entry.gate) {
        crate::log!(
            Level::Info,
            "hostcall: {what} {key:#x} unregistered from inside its own service: not waiting for the \
             listener"
        );
    } else {
        // Also from a service of another buffer on a listener thread: the
        // other listener thread (main or helper) may be inside this gate.
        wait_until_idle(&entry.gate, key);
    }
    if !poll {
        // The buffer is still valid until we return.
        if entry.buffer.has_waiting_requests() {
            crate::log!(
                Level::Warning,
                "disableHostcalls({key:#x}): packets were still waiting to be served; they are \
                 abandoned and their waves get no answer"
            );
        }
        shared.services.forget_buffer(key);
    }
    crate::log!(
        Level::Info,
        "hostcall: unregistered {what} {key:#x}; {remaining} buffer(s) and poll(s) left; it was served {}",
        entry.counters.read(shared.counters.snapshot()).summary()
    );
    drop(shared);
    if let Some(active) = stopping {
        stop_listener(active, STOP_TIMEOUT);
    }
    Ok(entry)
}

/// The counts of an enabled buffer (`hostcall::counters`).
pub fn counters(buffer: *const c_void) -> Result<Counts, DisableError> {
    if buffer.is_null() {
        return Err(DisableError::NullBuffer);
    }
    let control = lock(state());
    let entry = control.entries.iter().find(|e| e.key == buffer as usize).ok_or(DisableError::NotEnabled)?;
    let listener = &control.listener.as_ref().expect("an enabled buffer has a listener").listener;
    Ok(entry.counters.read(listener.counters.snapshot()))
}

fn wait_until_idle(gate: &Gate, key: usize) {
    waiting::wait_until(
        || gate.is_idle(),
        |waited| {
            crate::log!(
                Level::Warning,
                "hostcall: unregistering {key:#x}: still waiting for a service of that buffer (or \
                 its poll) ({:.1} s)",
                waited.as_secs_f64()
            );
        },
    );
}

fn start_listener() -> Result<ActiveListener, EnableError> {
    let api = SignalApi::resolve().map_err(EnableError::Hsa)?;
    let doorbell = api.create_doorbell().map_err(EnableError::Hsa)?;
    let shared = Arc::new(Listener::new(doorbell));
    install_process_hooks();
    // On failure `shared` is dropped here, destroying the signal.
    let thread = listener::spawn(Arc::clone(&shared)).map_err(EnableError::Thread)?;
    Ok(ActiveListener { listener: shared, thread })
}

/// Stops and joins a listener that serves no buffer any more.
fn stop_listener(active: ActiveListener, timeout: Duration) {
    let ActiveListener { listener: shared, thread } = active;
    shared.request_stop();
    if process::on_listener_thread(Arc::as_ptr(&shared)) {
        // A service disabled the last buffer: the thread cannot join itself.
        // It leaves its loop when the service returns and drops its own
        // reference (destroying the signal if it is the last one).
        drop(thread);
        return;
    }
    if waiting::wait_for(timeout, || thread.is_finished()) {
        if thread.join().is_err() {
            crate::log!(Level::Error, "hostcall: the listener thread ended with a panic");
        }
    } else {
        crate::log!(
            Level::Error,
            "hostcall: the listener did not stop within {:?} (a hostcall service is blocked?); \
             leaving it to finish on its own",
            timeout
        );
    }
    drop(shared);
}

//===----------------------------------------------------------------------===//
// Process hooks
//===----------------------------------------------------------------------===//

/// Pins the library and registers the exit handler, once per process. A
/// `ForkSafeOnce`: a child forked while another thread was in here runs it
/// again (pinning twice is harmless; an exit handler registered twice runs
/// once, see `at_exit`).
fn install_process_hooks() {
    static ONCE: ForkSafeOnce = ForkSafeOnce::new();
    ONCE.call_once(|| {
        super::test_hooks::pause_at(super::test_hooks::TEST_PAUSE_PROCESS_HOOKS);
        process::install_fork_hook();
        // Pin this library: a listener thread runs its code from now on.
        match crate::sys::pin_object_containing(install_process_hooks as *const c_void) {
            Ok(path) => crate::log!(Level::Debug, "hostcall: pinned {path} (RTLD_NODELETE)"),
            Err(e) => crate::log!(Level::Debug, "hostcall: could not pin the library: {e}"),
        }
        // After HSA is initialized (the doorbell exists): see `at_exit`.
        if let Err(e) = crate::sys::register_at_exit(at_exit) {
            crate::log!(Level::Warning, "hostcall: {e}; exit waits for the listener's timeout");
        }
    });
}

/// Runs at exit(3): registered with atexit when the first listener starts,
/// after the HSA runtime was initialized, so it runs before the runtime's own
/// exit-time teardown (destructors registered earlier, `.fini_array` hooks).
/// Stops the listeners and, while HSA still answers, rings the doorbell so an
/// idle listener leaves its blocked wait at once: exit then costs
/// microseconds instead of up to one wait timeout (1 s when idle).
extern "C" fn at_exit() {
    // SeqCst: enable re-checks EXITING under the lock with SeqCst.
    EXITING.store(true, Ordering::SeqCst);
    // Relaxed: read later by this same thread (exit runs the hooks in order).
    // Registered twice (a child forked during `install_process_hooks`): the
    // second run has nothing left to do.
    if EXIT_HANDLER_RAN.swap(true, Ordering::Relaxed) {
        return;
    }
    if let Some(active) = listener_for_exit() {
        if let Err(why) = active.wake_for_exit() {
            crate::log!(
                Level::Debug,
                "hostcall: exit: no doorbell ring ({why}); listeners leave at their timeout"
            );
        }
    }
    wait_for_listeners(EXIT_TIMEOUT);
}

/// The running listener, if the registration lock is free (another thread
/// may hold it forever at exit: then no ring, the bounded wait still applies).
fn listener_for_exit() -> Option<Arc<Listener>> {
    let state = STATE.get()?;
    let control = match state.control.try_lock() {
        Ok(guard) => guard,
        Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => return None,
    };
    control.listener.as_ref().map(|active| Arc::clone(&active.listener))
}

/// Waits (bounded by `timeout`) until no listener thread other than this one
/// runs; then, if one is still inside the HSA doorbell wait (the exit could
/// not ring: HSA no longer answered, or the registration lock was held), up
/// to `EXIT_WAIT_FOR_HSA_WAIT` more until it has left the wait: its timeout
/// ends it, and it makes no HSA call after that (`EXITING` is set).
fn wait_for_listeners(timeout: Duration) {
    let own = usize::from(process::on_any_listener_thread());
    // Acquire: pairs with the listener's release decrement.
    waiting::wait_for(timeout, || LIVE_THREADS.load(Ordering::Acquire) <= own);
    // SeqCst: see `Listener::doorbell_wait_value` (EXITING was stored SeqCst before).
    if IN_DOORBELL_WAIT.load(Ordering::SeqCst) != 0 {
        super::test_hooks::count_exit_hsa_wait();
        waiting::wait_for(EXIT_WAIT_FOR_HSA_WAIT, || IN_DOORBELL_WAIT.load(Ordering::SeqCst) == 0);
    }
}

/// Runs at dlclose (if the library was never pinned) and at exit after every
/// exit handler: the last line of defence when `at_exit` did not run (no
/// listener was ever started, or atexit failed). Makes no HSA call: the
/// runtime may already be torn down.
extern "C" fn at_unload() {
    // SeqCst: as in `at_exit`.
    EXITING.store(true, Ordering::SeqCst);
    // Relaxed: see `at_exit`. Its bounded wait already ran: a listener still
    // running now is stuck in a service, and waiting twice helps nobody.
    if EXIT_HANDLER_RAN.load(Ordering::Relaxed) {
        return;
    }
    // Listeners see EXITING at the latest when their doorbell wait times out.
    wait_for_listeners(EXIT_TIMEOUT);
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".fini_array"]
static AT_UNLOAD: extern "C" fn() = at_unload;

/// Runs when the library is loaded, before any thread can use it: the fork
/// child handler is then in place before any lock exists (the `Once` in
/// `process::install_fork_hook` is only the fallback; a fork can find it
/// running only if it races the library's own load).
extern "C" fn at_load() {
    process::install_fork_hook();
}

#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

#[cfg(test)]
mod tests {
    use super::*;

    /// Enables `len` bytes at `offset` into a zeroed 8-aligned block.
    fn enable_at(
        memory: &mut [u64],
        offset: usize,
        packets: u32,
        protocol: Protocol,
        occupied: usize,
    ) -> EnableError {
        let buffer = memory.as_mut_ptr().cast::<u8>().wrapping_add(offset).cast::<c_void>();
        // SAFETY: every call here is refused before the buffer is touched.
        unsafe { enable_with(buffer, packets, core::ptr::null(), protocol, occupied) }.expect_err("refused")
    }

    #[test]
    fn bad_arguments_are_refused_before_anything_is_touched() {
        let mut memory = vec![0u64; 4096];
        let untouched = memory.clone();
        let bitmap = [0u32; 4];
        let bitmap_at = bitmap.as_ptr() as usize;
        // SAFETY: refused at once (NULL).
        let null = unsafe { enable(core::ptr::null_mut(), 4, core::ptr::null()) };
        assert_eq!(null, Err(EnableError::NullBuffer));
        let base = memory.as_ptr() as usize;
        assert_eq!(enable_at(&mut memory, 4, 4, Protocol::Classic, 0), EnableError::Misaligned(base + 4));
        assert_eq!(enable_at(&mut memory, 0, 1, Protocol::Classic, 0), EnableError::TooFewPackets(1));
        assert_eq!(
            enable_at(&mut memory, 0, 0, Protocol::PhaseBit, bitmap_at),
            EnableError::TooFewPackets(0)
        );
        assert_eq!(enable_at(&mut memory, 0, 4, Protocol::PhaseBit, 0), EnableError::BadOccupancy(0));
        assert_eq!(
            enable_at(&mut memory, 0, 4, Protocol::PhaseBit, base + 8),
            EnableError::BadOccupancy(base + 8)
        );
        // SAFETY: refused at once (the range wraps the address space).
        let wraps = unsafe {
            enable_with((usize::MAX - 7) as *mut c_void, 4, core::ptr::null(), Protocol::Classic, 0)
        };
        assert_eq!(wraps, Err(EnableError::AddressRange));
        assert!(memory == untouched, "nothing was written");
    }

    #[test]
    fn disabling_null_or_an_unknown_buffer_changes_nothing() {
        assert_eq!(disable(core::ptr::null_mut(), core::ptr::null()), Err(DisableError::NullBuffer));
        let mut unknown = [0u64; 8];
        let unknown = unknown.as_mut_ptr().cast::<c_void>();
        assert_eq!(disable(unknown, core::ptr::null()), Err(DisableError::NotEnabled));
    }

    unsafe extern "C-unwind" fn never(_: *mut c_void, _: *mut c_void) -> i32 {
        unreachable!("a refused poll is never called")
    }

    #[test]
    fn polls_refuse_a_null_or_wrapping_key_and_an_unknown_one() {
        assert_eq!(register_poll(0, never, 0), Err(EnableError::NullBuffer));
        assert_eq!(register_poll(usize::MAX, never, 0), Err(EnableError::AddressRange));
        assert_eq!(unregister_poll(0), Err(DisableError::NullBuffer));
        assert_eq!(unregister_poll(0x7777_0000), Err(DisableError::NotEnabled));
    }
}
