//! What the listener did for each buffer, counted as it goes: packets and
//! lanes served per service, doorbell rings seen, lost rings, blocked waits
//! and their timeouts, hand-offs to the helper, the longest service call,
//! and the listener's other wake-ups: the pace forecast's timed sleeps and
//! the lost-ring watch's looks
//! (`amdgpu_dropin_hostcall_get_counters`, and one log line at
//! `AMD_LOG_LEVEL` >= 3 when a buffer is disabled; docs/listener.md,
//! "Counters").
//!
//! Cost: every counter has one writer at a time, so a count is a relaxed
//! load and store (no locked instruction). A buffer's counters are written
//! only by the thread visiting it, and visits of one buffer are serialized
//! by its gate (the gate's acquire and release order one visitor's stores
//! before the next one's loads); the listener-wide counters (rings, waits,
//! forecast sleeps) are written by the main listener thread alone, the
//! watch's looks by the watch thread alone, and the lost rings the watch
//! finds are counted by the main listener's scan. Readers (any thread) load them relaxed:
//! a count read while it changes is the old or the new value, and counts
//! are never compared with each other in the library.
//!
//! The counts are kept in the C API's own struct
//! (`amdgpu_dropin_hostcall_counters_t`, part of
//! `include/amdgpu_dropin_hostcall.h`), so they are written out once.

use std::sync::atomic::{AtomicU64, Ordering};

use core::mem::offset_of;

/// Service slots of `amdgpu_dropin_hostcall_counters_t`: ids 0 to 6 each in
/// their own, every other id in the last.
pub const AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES: usize = 8;

/// The same, by its short name inside this module.
const COUNTER_SERVICES: usize = AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES;

/// The slot of service id `service`.
fn slot(service: u32) -> usize {
    (service as usize).min(COUNTER_SERVICES - 1)
}

/// One writer at a time (see the module docs): a relaxed load and store.
fn bump(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
}

/// The counts of one buffer since it was enabled.
pub struct BufferCounters {
    packets: [AtomicU64; COUNTER_SERVICES],
    lanes: [AtomicU64; COUNTER_SERVICES],
    lost_rings: AtomicU64,
    handoffs: AtomicU64,
    longest_service_ns: AtomicU64,
    /// The listener's counts when the buffer was enabled.
    listener_at_enable: ListenerSnapshot,
}

impl BufferCounters {
    pub fn new(listener_at_enable: ListenerSnapshot) -> BufferCounters {
        BufferCounters {
            packets: Default::default(),
            lanes: Default::default(),
            lost_rings: AtomicU64::new(0),
            handoffs: AtomicU64::new(0),
            longest_service_ns: AtomicU64::new(0),
            listener_at_enable,
        }
    }

    /// One packet of `service` with `lanes` active lanes served.
    #[inline]
    pub fn packet_served(&self, service: u32, lanes: u32) {
        let slot = slot(service);
        bump(&self.packets[slot], 1);
        bump(&self.lanes[slot], u64::from(lanes));
    }

    /// One service call (a packet) took `ns`.
    #[inline]
    pub fn service_took(&self, ns: u64) {
        if ns > self.longest_service_ns.load(Ordering::Relaxed) {
            self.longest_service_ns.store(ns, Ordering::Relaxed);
        }
    }

    /// A scan found work in this buffer that no ring announced.
    pub fn lost_ring(&self) {
        bump(&self.lost_rings, 1);
    }

    /// The buffer moved to the helper thread.
    pub fn handed_off(&self) {
        bump(&self.handoffs, 1);
    }

    /// The counts now; `listener`: the listener's counts now.
    pub fn read(&self, listener: ListenerSnapshot) -> amdgpu_dropin_hostcall_counters_t {
        let mut out = amdgpu_dropin_hostcall_counters_t {
            size: core::mem::size_of::<amdgpu_dropin_hostcall_counters_t>() as u32,
            ..Default::default()
        };
        for s in 0..COUNTER_SERVICES {
            out.packets[s] = self.packets[s].load(Ordering::Relaxed);
            out.lanes[s] = self.lanes[s].load(Ordering::Relaxed);
        }
        out.doorbell_rings = listener.rings.wrapping_sub(self.listener_at_enable.rings);
        out.blocked_waits = listener.blocked_waits.wrapping_sub(self.listener_at_enable.blocked_waits);
        out.wait_timeouts = listener.wait_timeouts.wrapping_sub(self.listener_at_enable.wait_timeouts);
        out.lost_rings = self.lost_rings.load(Ordering::Relaxed);
        out.helper_handoffs = self.handoffs.load(Ordering::Relaxed);
        out.longest_service_ns = self.longest_service_ns.load(Ordering::Relaxed);
        out.forecast_sleeps = listener.forecast_sleeps.wrapping_sub(self.listener_at_enable.forecast_sleeps);
        out.watch_looks = listener.watch_looks.wrapping_sub(self.listener_at_enable.watch_looks);
        out
    }
}

/// The listener's own counts (shared by every buffer it serves).
#[derive(Default)]
pub struct ListenerCounters {
    rings: AtomicU64,
    blocked_waits: AtomicU64,
    wait_timeouts: AtomicU64,
    forecast_sleeps: AtomicU64,
    /// Written by the lost-ring watch's thread (its only writer).
    watch_looks: AtomicU64,
}

/// A copy of `ListenerCounters`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerSnapshot {
    pub rings: u64,
    pub blocked_waits: u64,
    pub wait_timeouts: u64,
    pub forecast_sleeps: u64,
    pub watch_looks: u64,
}

impl ListenerCounters {
    /// A change of the doorbell's value seen (by a poll or a wait): one or
    /// more rings.
    #[inline]
    pub fn ring_seen(&self) {
        bump(&self.rings, 1);
    }

    /// One blocked doorbell wait done; `timed_out`: it ended at its timeout.
    pub fn blocked_wait(&self, timed_out: bool) {
        bump(&self.blocked_waits, 1);
        if timed_out {
            bump(&self.wait_timeouts, 1);
        }
    }

    /// One timed sleep of the pace forecast, in place of a blocked wait.
    pub fn forecast_sleep(&self) {
        bump(&self.forecast_sleeps, 1);
    }

    /// The lost-ring watch woke and looked (watch thread only).
    pub fn watch_looked(&self) {
        bump(&self.watch_looks, 1);
    }

    pub fn snapshot(&self) -> ListenerSnapshot {
        ListenerSnapshot {
            rings: self.rings.load(Ordering::Relaxed),
            blocked_waits: self.blocked_waits.load(Ordering::Relaxed),
            wait_timeouts: self.wait_timeouts.load(Ordering::Relaxed),
            forecast_sleeps: self.forecast_sleeps.load(Ordering::Relaxed),
            watch_looks: self.watch_looks.load(Ordering::Relaxed),
        }
    }
}

/// What the listener did for one buffer since it was enabled, as
/// `amdgpu_dropin_hostcall_get_counters` fills it in. Counting costs the
/// listener no locked instruction; a count read while the listener serves
/// is at most a few packets old. The same counts are logged at
/// `AMD_LOG_LEVEL` 3 or more when the buffer is disabled.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub struct amdgpu_dropin_hostcall_counters_t {
    /// Set by the caller to `sizeof(amdgpu_dropin_hostcall_counters_t)`
    /// before the call. A larger value (a later version of this struct) gets
    /// the part this version knows; version 4's smaller struct gets its own
    /// fields. The library sets it to the size it wrote.
    pub size: u32,
    /// Zero.
    pub reserved: u32,
    /// Packets served, by service id: ids 0 to 6 each in their slot (1
    /// FUNCTION_CALL, 2 PRINTF, 3 DEVMEM, 4 SANITIZER), every other id in
    /// slot 7.
    pub packets: [u64; AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES],
    /// Active lanes of those packets, slotted as `packets`.
    pub lanes: [u64; AMDGPU_DROPIN_HOSTCALL_COUNTER_SERVICES],
    /// Changes of the doorbell's value the listener saw (one may stand for
    /// several rings that came together). The doorbell and its waits are the
    /// listener's, shared by every buffer it serves: this and the next two
    /// count since this buffer was enabled.
    pub doorbell_rings: u64,
    /// Blocked doorbell waits the listener made.
    pub blocked_waits: u64,
    /// Of those, the waits that ended at their timeout.
    pub wait_timeouts: u64,
    /// Lost rings: requests of this buffer found by a scan that no ring
    /// announced (after a wait that timed out, or woken by the listener's
    /// lost-ring watch).
    pub lost_rings: u64,
    /// Times this buffer was moved to the helper thread for slow buffers.
    pub helper_handoffs: u64,
    /// The longest one packet's service took, in nanoseconds (timed for the
    /// first packet of every visit of the buffer; a visit of one packet is
    /// all of it).
    pub longest_service_ns: u64,
    /// Since version 5 (a caller of version 4 gives the smaller size and
    /// gets the fields above). Timed sleeps the listener took instead of a
    /// blocked wait, while requests came one at a time at a steady pace:
    /// it slept until shortly before the next one was due, then polled for
    /// it. The listener's, counted since this buffer was enabled.
    pub forecast_sleeps: u64,
    /// Times the lost-ring watch woke to look for a request whose ring never
    /// came (every few milliseconds while the listener runs: with the
    /// blocked waits and the forecast sleeps, every wake-up of the
    /// listener's threads that no request caused). The listener's, counted
    /// since this buffer was enabled.
    pub watch_looks: u64,
}

/// The size of `amdgpu_dropin_hostcall_counters_t` in API version 4, the
/// first that had it: the least `size` a caller may give.
pub const COUNTERS_V4_SIZE: usize = offset_of!(amdgpu_dropin_hostcall_counters_t, forecast_sleeps);
static_assertions::const_assert_eq!(COUNTERS_V4_SIZE, 184);
static_assertions::const_assert_eq!(core::mem::size_of::<amdgpu_dropin_hostcall_counters_t>(), 200);

impl amdgpu_dropin_hostcall_counters_t {
    /// The one-line summary logged when the buffer is disabled.
    pub fn summary(&self) -> String {
        let packets: u64 = self.packets.iter().sum();
        let lanes: u64 = self.lanes.iter().sum();
        let per_service: Vec<String> = (0..COUNTER_SERVICES)
            .filter(|&s| self.packets[s] > 0)
            .map(|s| {
                let name = if s == COUNTER_SERVICES - 1 { "other".to_string() } else { s.to_string() };
                format!("{name}: {}/{}", self.packets[s], self.lanes[s])
            })
            .collect();
        format!(
            "{packets} packet(s), {lanes} lane(s) [by service, packets/lanes: {}]; {} doorbell change(s) \
             seen, {} lost ring(s), {} blocked wait(s) ({} timed out), {} hand-off(s) to the helper, \
             longest service {} µs, {} forecast sleep(s), {} look(s) of the lost-ring watch",
            if per_service.is_empty() { "none".to_string() } else { per_service.join(", ") },
            self.doorbell_rings,
            self.lost_rings,
            self.blocked_waits,
            self.wait_timeouts,
            self.helper_handoffs,
            self.longest_service_ns / 1000,
            self.forecast_sleeps,
            self.watch_looks
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn services_beyond_the_slots_share_the_last() {
        let c = BufferCounters::new(ListenerSnapshot::default());
        c.packet_served(1, 64);
        c.packet_served(2, 3);
        c.packet_served(7, 1);
        c.packet_served(0x7E57_0001, 2);
        let out = c.read(ListenerSnapshot::default());
        assert_eq!(out.packets[1], 1);
        assert_eq!(out.lanes[1], 64);
        assert_eq!(out.packets[2], 1);
        assert_eq!(out.lanes[2], 3);
        assert_eq!(out.packets[COUNTER_SERVICES - 1], 2);
        assert_eq!(out.lanes[COUNTER_SERVICES - 1], 3);
    }

    #[test]
    fn listener_counts_start_at_the_enable() {
        let l = ListenerCounters::default();
        l.ring_seen();
        l.blocked_wait(true);
        l.forecast_sleep();
        l.watch_looked();
        let c = BufferCounters::new(l.snapshot());
        l.ring_seen();
        l.ring_seen();
        l.blocked_wait(false);
        l.blocked_wait(true);
        l.forecast_sleep();
        l.forecast_sleep();
        l.forecast_sleep();
        l.watch_looked();
        let out = c.read(l.snapshot());
        assert_eq!((out.doorbell_rings, out.blocked_waits, out.wait_timeouts), (2, 2, 1));
        assert_eq!((out.forecast_sleeps, out.watch_looks), (3, 1));
        assert!(out.summary().contains("3 forecast sleep(s), 1 look(s) of the lost-ring watch"));
    }

    #[test]
    fn the_longest_service_is_kept() {
        let c = BufferCounters::new(ListenerSnapshot::default());
        c.service_took(5);
        c.service_took(50);
        c.service_took(7);
        c.lost_ring();
        c.handed_off();
        let out = c.read(ListenerSnapshot::default());
        assert_eq!((out.longest_service_ns, out.lost_rings, out.helper_handoffs), (50, 1, 1));
        assert!(out.summary().contains("1 lost ring(s)"));
    }
}
