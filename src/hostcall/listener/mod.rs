//! The listener: threads that wait on the shared doorbell signal and serve
//! every registered buffer, whatever its protocol (they ask the buffer,
//! `protocol::Buffer`, and never name one).
//!
//! * `shared`      — what the registry and the threads share (`Listener`, `Entry`).
//! * `threads`     — starting the main listener and the helper, catching their panics.
//! * `thread_loop` — a thread's poll-then-block loop.
//! * `visit`       — one scan of the buffers, one visit of a buffer.
//! * `pacing`      — when a thread polls, yields and blocks (pure, clock injected).
//! * `forecast`    — when a steady pace lets a thread sleep until the next request (pure).
//! * `classifier`  — which thread serves which buffer (pure, clock injected).
//! * `clock`       — the monotonic clock the threads read, behind a trait.
//! * `doorbell`    — the HSA signal and its blocked wait (all HSA calls).
//! * `lost_ring_watch` — the thread that ends a wait a lost ring left waiting.
//!
//! The waiting strategy (poll after work while requests come often, then a
//! blocked doorbell wait whose timeout grows while idle; the doorbell is only
//! a hint), the lock-free snapshot the threads serve from, the slow-buffer
//! helper and how the threads stop are described in docs/listener.md; exit
//! and fork in docs/process.md.

mod classifier;
mod clock;
mod doorbell;
mod forecast;
mod lost_ring_watch;
mod pacing;
mod shared;
mod thread_loop;
mod threads;
mod visit;

pub use doorbell::SignalApi;
pub use shared::{Entry, Listener};
pub use threads::spawn;
