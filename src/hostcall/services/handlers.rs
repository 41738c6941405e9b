//! Registered hostcall services: handlers an embedder registers for a service
//! id, for one buffer or for every buffer, and the lookup the listener does
//! for each packet of a service that is not built in. PRINTF's output sinks
//! are registrations too (under `SERVICE_PRINTF`, which no handler may take),
//! so they get the same scopes, lookup and unregister wait.
//!
//! # Serving path without locks
//!
//! The table is published as an immutable snapshot (`hostcall::snapshot`,
//! as the buffer registry is): a listener thread
//! keeps the snapshot it last took in a thread-local cache and takes the
//! (spin) lock only to clone a new one after the generation moved. Register
//! and unregister serialize on a std mutex the listener never takes.
//!
//! # Unregistering waits for running calls
//!
//! Each registration has a `CallGate` (`hostcall_core::call_gate`, model-checked with
//! loom): a call counts itself in, unregistering retires the gate and waits
//! until the calls have left, so everything a handler did happens before
//! `unregister` returns.
//!
//! A thread that unregisters from inside a handler does not wait for the
//! calls it is itself inside (a thread-local list of the registrations this
//! thread is in): it waits only for calls on other threads. The call it is
//! inside makes no further handler call: a per-lane handler is not called
//! for the packet's remaining lanes (they get the error value), so nothing
//! runs the handler after `unregister` returns except the very call that
//! unregistered it. Two handlers on
//! two listener threads that unregister each other at the same moment would
//! wait for each other forever; that is documented, as for disableHostcalls.
//! In a forked child the parent's running calls do not count (the gate's
//! count carries the fork epoch), and the child starts with an empty table
//! (a `ForkLocal` of its own epoch): the parent's locks may be held by a thread that
//! does not exist there, and its registrations are not the child's.

use core::ffi::c_void;
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::ids::{SERVICE_FUNCTION_CALL, SERVICE_PRINTF, SERVICE_RESERVED};
use crate::hostcall::process::ForkLocal;
use crate::hostcall::protocol::host_packet::{
    amdgpu_dropin_hostcall_lane_fn, amdgpu_dropin_hostcall_packet_fn, HostPacket,
};
use crate::hostcall::snapshot::Published;
use crate::log::Level;
use hostcall_core::call_gate::CallGate;

/// A service implemented in Rust and registered like a C handler (the
/// default DEVMEM service).
pub trait BuiltinService: Send + Sync {
    /// Answers every active lane of `packet` in place.
    fn serve(&self, packet: &mut HostPacket);
    /// The buffer `buffer_key` was disabled: drop what belongs to it.
    fn forget_buffer(&self, buffer_key: usize);
    /// The service was unregistered and no call of it runs any more (except
    /// one that unregistered it from inside): release everything.
    fn retire(&self);
    /// What registrations of this kind share with each other (DEVMEM: the
    /// pool and its sorted agents), if anything.
    fn sharing_key(&self) -> Option<&[u64]> {
        None
    }
    /// A service for the buffer scope `scope` sharing this one's state (for
    /// a new registration with the same `sharing_key`).
    fn joined(&self, scope: Option<usize>) -> Option<Arc<dyn BuiltinService>> {
        let _ = scope;
        None
    }
}

/// What runs for a registered service.
pub enum Handler {
    /// A C callback per active lane.
    Lane { function: LaneFn, user_data: usize },
    /// A C callback per packet.
    Packet { function: PacketFn, user_data: usize },
    /// A Rust service.
    Builtin(Arc<dyn BuiltinService>),
    /// Where PRINTF's formatted messages go (registered under
    /// `SERVICE_PRINTF`, which no other handler may take).
    PrintfSink { function: PrintfSinkFn, user_data: usize },
}

/// The non-NULL form of `amdgpu_dropin_hostcall_lane_fn`.
pub type LaneFn = unsafe extern "C-unwind" fn(*mut c_void, *mut c_void, u32, u32, *mut u64) -> i32;
/// The non-NULL form of `amdgpu_dropin_hostcall_packet_fn`.
pub type PacketFn = unsafe extern "C-unwind" fn(*mut c_void, *mut HostPacket) -> i32;
/// The non-NULL form of `amdgpu_dropin_hostcall_printf_sink_fn`:
/// `(user_data, buffer, stream, bytes, length) -> bytes written`.
pub type PrintfSinkFn =
    unsafe extern "C-unwind" fn(*mut c_void, *mut c_void, u32, *const core::ffi::c_char, usize) -> usize;

const _: () = {
    // The C typedefs are exactly Option<these>.
    assert!(core::mem::size_of::<amdgpu_dropin_hostcall_lane_fn>() == core::mem::size_of::<LaneFn>());
    assert!(core::mem::size_of::<amdgpu_dropin_hostcall_packet_fn>() == core::mem::size_of::<PacketFn>());
};

impl Handler {
    fn describe(&self) -> &'static str {
        match self {
            Handler::Lane { .. } => "per-lane handler",
            Handler::Packet { .. } => "per-packet handler",
            Handler::Builtin(_) => "built-in service",
            Handler::PrintfSink { .. } => "printf sink",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerError {
    /// 0, FUNCTION_CALL and PRINTF are served by the library itself.
    ReservedService(u32),
    /// A handler is already registered for this service and buffer scope.
    AlreadyRegistered,
    /// No handler is registered for this service and buffer scope.
    NotRegistered,
}

/// True for the ids the library serves itself (they cannot be registered).
pub fn is_reserved(service: u32) -> bool {
    matches!(service, SERVICE_RESERVED | SERVICE_FUNCTION_CALL | SERVICE_PRINTF)
}

/// One registered handler.
pub struct Registration {
    pub service: u32,
    /// The buffer it serves, or None for every buffer.
    pub buffer: Option<usize>,
    pub handler: Handler,
    gate: CallGate,
}

thread_local! {
    /// The registrations this thread is inside (innermost last).
    static INSIDE: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

fn fork_epoch() -> u32 {
    // Relaxed: the child handler bumps it before any other code of the child runs.
    crate::hostcall::process::FORK_EPOCH.load(Ordering::Relaxed) as u32
}

/// A running call of a registration; ends the call when dropped (also when
/// unwinding).
pub struct Call {
    registration: Arc<Registration>,
    epoch: u32,
}

impl Call {
    pub fn registration(&self) -> &Registration {
        &self.registration
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        let address = Arc::as_ptr(&self.registration) as usize;
        let _ = INSIDE.try_with(|inside| {
            let mut inside = inside.borrow_mut();
            if let Some(position) = inside.iter().rposition(|&a| a == address) {
                inside.remove(position);
            }
        });
        self.registration.gate.leave(self.epoch);
    }
}

impl Registration {
    fn new(service: u32, buffer: Option<usize>, handler: Handler) -> Registration {
        Registration { service, buffer, handler, gate: CallGate::new() }
    }

    /// Starts a call; None once the registration is being unregistered.
    pub fn try_enter(self: &Arc<Self>) -> Option<Call> {
        let epoch = fork_epoch();
        if !self.gate.enter(epoch) {
            return None;
        }
        let _ = INSIDE.try_with(|inside| inside.borrow_mut().push(Arc::as_ptr(self) as usize));
        Some(Call { registration: Arc::clone(self), epoch })
    }

    /// True once the registration is being (or was) unregistered: a running
    /// call makes no further handler call (the per-lane loop checks it
    /// before each lane).
    pub fn is_retired(&self) -> bool {
        self.gate.is_retired()
    }

    /// Refuses new calls and waits until the calls running on other threads
    /// have ended.
    fn retire_and_wait(&self) {
        self.gate.retire();
        let own = INSIDE
            .try_with(|inside| {
                let address = self as *const Registration as usize;
                inside.borrow().iter().filter(|&&a| a == address).count() as u32
            })
            .unwrap_or(0);
        crate::hostcall::waiting::wait_until(
            || self.gate.in_flight(fork_epoch()) <= own,
            |waited| {
                crate::log!(
                    Level::Warning,
                    "hostcall: unregistering the {} of service {}: still waiting for a running call \
                     ({:.1} s)",
                    self.handler.describe(),
                    self.service,
                    waited.as_secs_f64()
                );
            },
        );
        if own > 0 {
            crate::log!(
                Level::Info,
                "hostcall: the {} of service {} was unregistered from inside itself; the running \
                 call finishes after the unregister returns",
                self.handler.describe(),
                self.service
            );
        }
    }

    /// Retires a registration that has left the table.
    fn finish(&self) {
        self.retire_and_wait();
        if let Handler::Builtin(service) = &self.handler {
            service.retire();
        }
    }
}

type Snapshot = Arc<[Arc<Registration>]>;

/// The handler table.
pub struct HandlerTable {
    /// The registrations; serializes register and unregister.
    control: Mutex<Vec<Arc<Registration>>>,
    /// The snapshot the listener reads.
    published: Published<Arc<Registration>>,
}

thread_local! {
    /// The snapshot this thread last took: (table address, generation, snapshot).
    static CACHE: RefCell<Option<(usize, u64, Snapshot)>> = const { RefCell::new(None) };
}

impl Default for HandlerTable {
    fn default() -> Self {
        Self::new()
    }
}

/// The process's handler table (survives listener restarts: handlers may be
/// registered before the first buffer is enabled). Replaced (the old one
/// leaked, never freed) in a forked child: its locks may be held by a thread
/// of the parent that does not exist there, and its registrations (with the
/// DEVMEM books of their built-in services) belong to the parent.
static TABLE: ForkLocal<HandlerTable> = ForkLocal::new();

pub fn table() -> &'static HandlerTable {
    TABLE.get_or_make(HandlerTable::new)
}

impl HandlerTable {
    pub fn new() -> HandlerTable {
        HandlerTable { control: Mutex::new(Vec::new()), published: Published::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Registration>>> {
        // A panic while holding the lock leaves a consistent Vec (every
        // update is one push or remove).
        self.control.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn publish(&self, registrations: &[Arc<Registration>]) {
        self.published.publish(registrations);
    }

    /// Registers `handler` for `service` on `buffer` (None: every buffer).
    pub fn register(
        &self,
        service: u32,
        buffer: Option<usize>,
        handler: Handler,
    ) -> Result<(), HandlerError> {
        self.register_with(service, buffer, |_| handler)
    }

    /// As `register`, with the handler made by `make` from the registrations
    /// there are (under the table's lock, so two registrations cannot both
    /// miss what the other makes). `make` runs only if the scope is free.
    pub fn register_with(
        &self,
        service: u32,
        buffer: Option<usize>,
        make: impl FnOnce(&[Arc<Registration>]) -> Handler,
    ) -> Result<(), HandlerError> {
        if is_reserved(service) {
            return Err(HandlerError::ReservedService(service));
        }
        self.insert(service, buffer, make)
    }

    /// Registers a PRINTF output sink for `buffer` (None: every buffer).
    pub fn register_printf_sink(
        &self,
        buffer: Option<usize>,
        function: PrintfSinkFn,
        user_data: usize,
    ) -> Result<(), HandlerError> {
        self.insert(SERVICE_PRINTF, buffer, |_| Handler::PrintfSink { function, user_data })
    }

    /// Unregisters the PRINTF output sink of `buffer` (None: every buffer)
    /// and waits for its running calls (except those this thread is inside).
    pub fn unregister_printf_sink(&self, buffer: Option<usize>) -> Result<(), HandlerError> {
        self.remove(SERVICE_PRINTF, buffer)
    }

    fn insert(
        &self,
        service: u32,
        buffer: Option<usize>,
        make: impl FnOnce(&[Arc<Registration>]) -> Handler,
    ) -> Result<(), HandlerError> {
        let mut registrations = self.lock();
        if registrations.iter().any(|r| r.service == service && r.buffer == buffer) {
            return Err(HandlerError::AlreadyRegistered);
        }
        let handler = make(&registrations);
        let kind = handler.describe();
        registrations.push(Arc::new(Registration::new(service, buffer, handler)));
        self.publish(&registrations);
        drop(registrations);
        crate::log!(
            Level::Info,
            "hostcall: registered a {} for service {} on {}",
            kind,
            service,
            describe_scope(buffer)
        );
        Ok(())
    }

    /// Unregisters the handler of `service` on `buffer` and waits for its
    /// running calls (except those this thread is inside).
    pub fn unregister(&self, service: u32, buffer: Option<usize>) -> Result<(), HandlerError> {
        if is_reserved(service) {
            return Err(HandlerError::ReservedService(service));
        }
        self.remove(service, buffer)
    }

    fn remove(&self, service: u32, buffer: Option<usize>) -> Result<(), HandlerError> {
        let registration = {
            let mut registrations = self.lock();
            let index = registrations
                .iter()
                .position(|r| r.service == service && r.buffer == buffer)
                .ok_or(HandlerError::NotRegistered)?;
            let registration = registrations.remove(index);
            self.publish(&registrations);
            registration
        };
        registration.finish();
        crate::log!(
            Level::Info,
            "hostcall: unregistered the {} of service {} on {}",
            registration.handler.describe(),
            service,
            describe_scope(buffer)
        );
        Ok(())
    }

    /// The buffer `buffer_key` was disabled: its own registrations end, and
    /// the built-in services drop what belongs to it. The caller has waited
    /// until no packet of the buffer is being served (or is serving one itself).
    pub fn forget_buffer(&self, buffer_key: usize) {
        let (removed, remaining) = {
            let mut registrations = self.lock();
            let (removed, kept): (Vec<_>, Vec<_>) =
                registrations.drain(..).partition(|r| r.buffer == Some(buffer_key));
            *registrations = kept;
            if !removed.is_empty() {
                self.publish(&registrations);
            }
            (removed, registrations.clone())
        };
        for registration in &removed {
            registration.finish();
            crate::log!(
                Level::Info,
                "hostcall: the {} of service {} for buffer {:#x} ends with the buffer",
                registration.handler.describe(),
                registration.service,
                buffer_key
            );
        }
        for registration in &remaining {
            if let Handler::Builtin(service) = &registration.handler {
                service.forget_buffer(buffer_key);
            }
        }
    }

    /// The handler serving `service` on `buffer_key`: the buffer's own first,
    /// else the one for every buffer.
    pub fn find(&self, service: u32, buffer_key: usize) -> Option<Arc<Registration>> {
        let generation = self.published.generation();
        if generation == 0 {
            return None;
        }
        let table = self as *const HandlerTable as usize;
        let lookup = |snapshot: &Snapshot| {
            snapshot
                .iter()
                .find(|r| r.service == service && r.buffer == Some(buffer_key))
                .or_else(|| snapshot.iter().find(|r| r.service == service && r.buffer.is_none()))
                .cloned()
        };
        CACHE
            .try_with(|cache| {
                let mut cache = cache.borrow_mut();
                match &*cache {
                    Some((t, g, snapshot)) if *t == table && *g == generation => lookup(snapshot),
                    _ => {
                        let snapshot = self.published.load();
                        let found = lookup(&snapshot);
                        *cache = Some((table, generation, snapshot));
                        found
                    }
                }
            })
            .unwrap_or_else(|_| lookup(&self.published.load()))
    }

    /// Finds and enters the handler of `service` on `buffer_key`. A handler
    /// being unregistered is skipped; the lookup then runs once more on the
    /// newest table (a replacement may already be registered).
    pub fn enter(&self, service: u32, buffer_key: usize) -> Option<Call> {
        for _ in 0..2 {
            let registration = self.find(service, buffer_key)?;
            if let Some(call) = registration.try_enter() {
                return Some(call);
            }
        }
        None
    }
}

fn describe_scope(buffer: Option<usize>) -> String {
    match buffer {
        Some(key) => format!("buffer {key:#x}"),
        None => "every buffer".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU32};

    unsafe extern "C-unwind" fn lane_nop(_: *mut c_void, _: *mut c_void, _: u32, _: u32, _: *mut u64) -> i32 {
        0
    }

    fn lane(user_data: usize) -> Handler {
        Handler::Lane { function: lane_nop, user_data }
    }

    fn user_of(call: &Call) -> usize {
        match call.registration().handler {
            Handler::Lane { user_data, .. } => user_data,
            _ => unreachable!(),
        }
    }

    #[test]
    fn reserved_ids_double_registration_and_unknown_unregister() {
        let table = HandlerTable::new();
        for id in [0, SERVICE_FUNCTION_CALL, SERVICE_PRINTF] {
            assert_eq!(table.register(id, None, lane(1)), Err(HandlerError::ReservedService(id)));
            assert_eq!(table.unregister(id, None), Err(HandlerError::ReservedService(id)));
        }
        assert_eq!(table.register(3, None, lane(1)), Ok(()));
        assert_eq!(table.register(3, None, lane(2)), Err(HandlerError::AlreadyRegistered));
        assert_eq!(table.register(3, Some(0x1000), lane(3)), Ok(()), "another scope");
        assert_eq!(table.unregister(3, Some(0x2000)), Err(HandlerError::NotRegistered));
        assert_eq!(table.unregister(4, None), Err(HandlerError::NotRegistered));
        assert_eq!(table.unregister(3, None), Ok(()));
        assert_eq!(table.unregister(3, None), Err(HandlerError::NotRegistered));
    }

    #[test]
    fn register_with_sees_the_registrations_and_makes_nothing_for_a_taken_scope() {
        let table = HandlerTable::new();
        table.register(7, None, lane(1)).unwrap();
        let mut seen = 0;
        table
            .register_with(8, Some(0x1000), |registrations| {
                seen = registrations.len();
                lane(2)
            })
            .unwrap();
        assert_eq!(seen, 1, "the factory saw the registration there was");
        let mut made = false;
        let taken = table.register_with(8, Some(0x1000), |_| {
            made = true;
            lane(3)
        });
        assert_eq!(taken, Err(HandlerError::AlreadyRegistered));
        assert!(!made, "no handler is made for a scope that is taken");
    }

    #[test]
    fn the_buffers_own_handler_wins_over_the_global_one() {
        let table = HandlerTable::new();
        assert!(table.enter(7, 0x1000).is_none(), "empty table");
        table.register(7, None, lane(10)).unwrap();
        table.register(7, Some(0x1000), lane(11)).unwrap();
        assert_eq!(user_of(&table.enter(7, 0x1000).unwrap()), 11);
        assert_eq!(user_of(&table.enter(7, 0x2000).unwrap()), 10);
        assert!(table.enter(8, 0x1000).is_none());
        table.unregister(7, Some(0x1000)).unwrap();
        assert_eq!(user_of(&table.enter(7, 0x1000).unwrap()), 10, "falls back to the global one");
    }

    #[test]
    fn forget_buffer_ends_only_that_buffers_handlers() {
        let table = HandlerTable::new();
        table.register(7, Some(0x1000), lane(1)).unwrap();
        table.register(8, Some(0x1000), lane(2)).unwrap();
        table.register(7, Some(0x2000), lane(3)).unwrap();
        table.register(9, None, lane(4)).unwrap();
        table.forget_buffer(0x1000);
        assert!(table.enter(7, 0x1000).is_none());
        assert!(table.enter(8, 0x1000).is_none());
        assert_eq!(user_of(&table.enter(7, 0x2000).unwrap()), 3);
        assert_eq!(user_of(&table.enter(9, 0x1000).unwrap()), 4);
        assert_eq!(table.unregister(7, Some(0x1000)), Err(HandlerError::NotRegistered));
    }

    #[test]
    fn a_retired_registration_refuses_calls() {
        let table = HandlerTable::new();
        table.register(7, None, lane(1)).unwrap();
        let registration = table.find(7, 0).unwrap();
        table.unregister(7, None).unwrap();
        assert!(registration.try_enter().is_none(), "old snapshot, retired registration");
        assert!(table.enter(7, 0).is_none());
    }

    #[test]
    fn unregister_from_inside_does_not_wait_for_itself() {
        let table = HandlerTable::new();
        table.register(7, None, lane(1)).unwrap();
        let call = table.enter(7, 0).unwrap();
        // Would spin forever if it waited for the call this thread is inside.
        table.unregister(7, None).unwrap();
        drop(call);
        assert!(INSIDE.with(|i| i.borrow().is_empty()));
    }

    #[test]
    fn unregister_waits_for_a_call_on_another_thread() {
        let table = Arc::new(HandlerTable::new());
        table.register(7, None, lane(1)).unwrap();
        let inside = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicU32::new(0));
        let worker = {
            let (table, inside, release, ended) =
                (Arc::clone(&table), Arc::clone(&inside), Arc::clone(&release), Arc::clone(&ended));
            std::thread::spawn(move || {
                let call = table.enter(7, 0).unwrap();
                inside.store(true, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
                ended.store(1, Ordering::SeqCst);
                drop(call);
            })
        };
        while !inside.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        let unregistering = {
            let table = Arc::clone(&table);
            std::thread::spawn(move || table.unregister(7, None))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!unregistering.is_finished(), "unregister must wait for the running call");
        release.store(true, Ordering::SeqCst);
        assert_eq!(unregistering.join().unwrap(), Ok(()));
        assert_eq!(ended.load(Ordering::SeqCst), 1, "the call ended before unregister returned");
        worker.join().unwrap();
    }

    struct Recorder {
        forgotten: Mutex<Vec<usize>>,
        retired: AtomicBool,
    }

    impl BuiltinService for Recorder {
        fn serve(&self, _: &mut HostPacket) {}
        fn forget_buffer(&self, buffer_key: usize) {
            self.forgotten.lock().unwrap().push(buffer_key);
        }
        fn retire(&self) {
            self.retired.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn builtin_services_hear_of_disabled_buffers_and_their_retirement() {
        let table = HandlerTable::new();
        let global =
            Arc::new(Recorder { forgotten: Mutex::new(Vec::new()), retired: AtomicBool::new(false) });
        let own = Arc::new(Recorder { forgotten: Mutex::new(Vec::new()), retired: AtomicBool::new(false) });
        table.register(3, None, Handler::Builtin(global.clone())).unwrap();
        table.register(3, Some(0x1000), Handler::Builtin(own.clone())).unwrap();
        table.forget_buffer(0x1000);
        assert!(own.retired.load(Ordering::SeqCst), "the buffer's own service ends with it");
        assert_eq!(*global.forgotten.lock().unwrap(), [0x1000]);
        assert!(!global.retired.load(Ordering::SeqCst));
        table.unregister(3, None).unwrap();
        assert!(global.retired.load(Ordering::SeqCst));
    }
}
