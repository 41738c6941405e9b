//! The test hooks, the one place they live: in the unit tests and in a
//! library built with the `test-hooks` feature (the C suite's hook build)
//! they make a service panic or pause the main listener at a chosen step;
//! in every other build `TestHooks` has no fields and its steps are empty.
//!
//! Process-wide, in the hook build only (`pause_at`, `count_exit_hsa_wait`;
//! empty inlines otherwise): pause points, where a thread waits until the
//! test releases it (so a C test can fork while another thread is inside a
//! once-only initializer), and a count of exit waits. The exports that drive
//! them are in `ffi/test_hooks.rs`.

/// Requests with this service id panic inside the service in a library built
/// with the `test-hooks` feature, exercising the per-lane panic catch. The
/// product library answers it like any unknown id. (The C suite reads it
/// from the generated `ctest/include/amdgpu_dropin_hostcall_constants.h`.)
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // the header still carries it
pub const TEST_PANIC_SERVICE: u32 = 0x7E57_0001;

/// Pause point (hook build): inside the process hooks installed once, at the
/// first listener start.
pub const TEST_PAUSE_PROCESS_HOOKS: u32 = 1;
/// Pause point (hook build): inside the vmem half's first lookup of IREE's
/// status allocator.
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // the header still carries it
pub const TEST_PAUSE_STATUS_ALLOCATOR: u32 = 2;

#[cfg(feature = "test-hooks")]
pub use pauses::{arm, exit_hsa_waits, reached, release};

/// Pauses here if the test armed `point` (once per arming: a forked child
/// never finds the parent's arming).
#[inline(always)]
pub fn pause_at(point: u32) {
    #[cfg(feature = "test-hooks")]
    pauses::pause_at(point);
    #[cfg(not(feature = "test-hooks"))]
    let _ = point;
}

/// Counts an exit that had to wait for a listener inside the HSA wait.
#[inline(always)]
pub fn count_exit_hsa_wait() {
    #[cfg(feature = "test-hooks")]
    pauses::count_exit_hsa_wait();
}

#[cfg(feature = "test-hooks")]
mod pauses {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    /// Armed points (bit `point`): the next thread to reach one pauses there.
    static ARMED: AtomicU32 = AtomicU32::new(0);
    /// Points a thread is paused at now.
    static REACHED: AtomicU32 = AtomicU32::new(0);
    /// Points released by the test.
    static RELEASED: AtomicU32 = AtomicU32::new(0);
    /// Exits that waited for a listener inside the HSA doorbell wait.
    static EXIT_HSA_WAITS: AtomicU64 = AtomicU64::new(0);

    fn bit(point: u32) -> u32 {
        1u32 << (point % 32)
    }

    /// Arms `point`: the next thread that reaches it waits there until `release`.
    pub fn arm(point: u32) {
        // SeqCst (here and below): test-only, a handful of operations; the
        // simplest ordering that needs no argument.
        RELEASED.fetch_and(!bit(point), Ordering::SeqCst);
        REACHED.fetch_and(!bit(point), Ordering::SeqCst);
        ARMED.fetch_or(bit(point), Ordering::SeqCst);
    }

    /// Whether a thread is paused at `point` now.
    pub fn reached(point: u32) -> bool {
        REACHED.load(Ordering::SeqCst) & bit(point) != 0
    }

    /// Lets the thread paused at `point` (if any) go on.
    pub fn release(point: u32) {
        RELEASED.fetch_or(bit(point), Ordering::SeqCst);
    }

    pub fn pause_at(point: u32) {
        if ARMED.fetch_and(!bit(point), Ordering::SeqCst) & bit(point) == 0 {
            return;
        }
        REACHED.fetch_or(bit(point), Ordering::SeqCst);
        while RELEASED.load(Ordering::SeqCst) & bit(point) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        REACHED.fetch_and(!bit(point), Ordering::SeqCst);
    }

    pub fn count_exit_hsa_wait() {
        EXIT_HSA_WAITS.fetch_add(1, Ordering::SeqCst);
    }

    /// Exits (of this process) that waited for a listener inside the HSA wait.
    pub fn exit_hsa_waits() -> u64 {
        EXIT_HSA_WAITS.load(Ordering::SeqCst)
    }
}

#[cfg(any(test, feature = "test-hooks"))]
pub use armed::TestHooks;
#[cfg(not(any(test, feature = "test-hooks")))]
pub use inert::TestHooks;

#[cfg(any(test, feature = "test-hooks"))]
mod armed {
    /// What the tests ask of the listener and the services.
    #[derive(Default)]
    pub struct TestHooks {
        /// Requests with this id panic (the hook build: `TEST_PANIC_SERVICE`).
        pub panic_service: Option<u32>,
        /// For a built-in `panic_service`: only this lane panics (None: every lane).
        pub panic_lane: Option<u32>,
        /// Runs in the main listener after it decided to visit a buffer of
        /// the helper's (the helper looked stuck) and before it enters the
        /// buffer's gate.
        pub before_fallback_gate: Option<Box<dyn Fn() + Send + Sync>>,
    }

    impl TestHooks {
        pub fn new() -> TestHooks {
            TestHooks {
                panic_service: cfg!(feature = "test-hooks").then_some(super::TEST_PANIC_SERVICE),
                ..TestHooks::default()
            }
        }

        /// Panics if asked to for `service` (lane `lane`; None: the packet as a whole).
        pub fn panic_if_asked(&self, service: u32, lane: Option<u32>) {
            let lane_matches = match (lane, self.panic_lane) {
                (Some(lane), Some(panic_lane)) => lane == panic_lane,
                _ => true,
            };
            if self.panic_service == Some(service) && lane_matches {
                match lane {
                    Some(lane) => {
                        panic!("amdgpu-dropin test hook: requested panic in service {service:#x} lane {lane}")
                    }
                    None => panic!("amdgpu-dropin test hook: requested panic in service {service:#x}"),
                }
            }
        }

        pub fn before_fallback_gate(&self) {
            if let Some(hook) = &self.before_fallback_gate {
                hook();
            }
        }
    }
}

#[cfg(not(any(test, feature = "test-hooks")))]
mod inert {
    /// No hooks in a product build.
    pub struct TestHooks;

    impl TestHooks {
        pub fn new() -> TestHooks {
            TestHooks
        }

        #[inline(always)]
        pub fn panic_if_asked(&self, _service: u32, _lane: Option<u32>) {}

        #[inline(always)]
        pub fn before_fallback_gate(&self) {}
    }
}
