//! The test hooks, the one place they live: in the unit tests and in a
//! library built with the `test-hooks` feature (the C suite's hook build)
//! they make a service panic or pause the main listener at a chosen step;
//! in every other build `TestHooks` has no fields and its steps are empty.

/// Requests with this service id panic inside the service in a library built
/// with the `test-hooks` feature, exercising the per-lane panic catch. The
/// product library answers it like any unknown id. (The C suite reads it
/// from the generated `ctest/include/amdgpu_dropin_hostcall_constants.h`.)
#[cfg_attr(not(feature = "test-hooks"), allow(dead_code))] // the header still carries it
pub const TEST_PANIC_SERVICE: u32 = 0x7E57_0001;

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
