//! Process-wide values made once without a lock, so that they survive fork
//! (docs/process.md): a `OnceLock` or `Mutex` that another thread was inside
//! at the fork stays "running" or locked for ever in the child, where that
//! thread does not exist. Here the value is made outside any lock; threads
//! that race each make one and the first to publish it wins (the others'
//! copies are dropped), so a child forked while a thread was making it just
//! makes its own. Only for values that any thread computes alike (symbol
//! lookups, a clock origin) and that cost little to make twice.

use core::sync::atomic::{AtomicPtr, Ordering};

/// A value made on first use by whichever thread gets there, never freed.
pub struct RaceOnce<T> {
    value: AtomicPtr<T>,
}

impl<T> RaceOnce<T> {
    pub const fn new() -> RaceOnce<T> {
        RaceOnce { value: AtomicPtr::new(core::ptr::null_mut()) }
    }

    /// The value, made with `make` if no thread has published one yet.
    pub fn get_or_make(&self, make: impl FnOnce() -> T) -> &T {
        // Acquire: pairs with the release CAS that published it.
        let current = self.value.load(Ordering::Acquire);
        // SAFETY: a published value is leaked, never freed or changed.
        if let Some(value) = unsafe { current.as_ref() } {
            return value;
        }
        let fresh = Box::into_raw(Box::new(make()));
        // AcqRel: release publishes `fresh`; acquire reads a winner's value.
        match self.value.compare_exchange(core::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            // SAFETY: `fresh` is now published, leaked for the process's life.
            Ok(_) => unsafe { &*fresh },
            Err(winner) => {
                // SAFETY: `fresh` lost the race and was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: the winner is published, never freed.
                unsafe { &*winner }
            }
        }
    }
}

/// A process-wide list that only grows, searched and appended without a
/// lock (nodes are leaked, never freed).
pub struct GrowOnlyList<T: 'static> {
    head: AtomicPtr<Node<T>>,
}

struct Node<T: 'static> {
    value: T,
    next: *const Node<T>,
}

impl<T: 'static> GrowOnlyList<T> {
    pub const fn new() -> GrowOnlyList<T> {
        GrowOnlyList { head: AtomicPtr::new(core::ptr::null_mut()) }
    }

    /// The first element for which `found` holds, else `make()` appended.
    /// Two threads racing for the same element may both append one; the
    /// first found is returned later (both stay valid).
    pub fn find_or_push(&self, found: impl Fn(&T) -> bool, make: impl FnOnce() -> T) -> &'static T {
        // Acquire: pairs with the release CAS that pushed the head.
        let mut head = self.head.load(Ordering::Acquire);
        if let Some(value) = Self::find(head, &found) {
            return value;
        }
        let node = Box::into_raw(Box::new(Node { value: make(), next: head }));
        loop {
            // AcqRel: release publishes `node`; acquire reads the nodes
            // another thread pushed meanwhile.
            match self.head.compare_exchange(head, node, Ordering::AcqRel, Ordering::Acquire) {
                // SAFETY: `node` is now reachable from the head and leaked.
                Ok(_) => return unsafe { &(*node).value },
                Err(newer) => {
                    head = newer;
                    // SAFETY: `node` is not shared yet; only this thread writes it.
                    unsafe { (*node).next = head };
                }
            }
        }
    }

    fn find(mut at: *const Node<T>, found: &impl Fn(&T) -> bool) -> Option<&'static T> {
        // SAFETY: every node reachable from the head is leaked, never freed
        // or changed after it was pushed.
        while let Some(node) = unsafe { at.as_ref() } {
            if found(&node.value) {
                return Some(&node.value);
            }
            at = node.next;
        }
        None
    }
}

// SAFETY: the values are shared between threads only through `&T` after a
// release/acquire publication; that needs `T: Send + Sync` as for a static.
unsafe impl<T: Send + Sync> Sync for RaceOnce<T> {}
// SAFETY: as for `RaceOnce`.
unsafe impl<T: Send + Sync> Sync for GrowOnlyList<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_value_is_kept() {
        let once = RaceOnce::new();
        assert_eq!(*once.get_or_make(|| 1), 1);
        assert_eq!(*once.get_or_make(|| 2), 1);
    }

    #[test]
    fn racing_threads_see_one_value() {
        static ONCE: RaceOnce<u64> = RaceOnce::new();
        let seen: Vec<u64> = (0..8)
            .map(|i| std::thread::spawn(move || *ONCE.get_or_make(|| i)))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert!(seen.iter().all(|v| *v == seen[0]), "{seen:?}");
    }

    #[test]
    fn the_list_finds_what_it_holds_and_appends_the_rest() {
        static LIST: GrowOnlyList<(u32, u32)> = GrowOnlyList::new();
        let a = LIST.find_or_push(|e| e.0 == 1, || (1, 10));
        let b = LIST.find_or_push(|e| e.0 == 2, || (2, 20));
        assert_eq!((a.1, b.1), (10, 20));
        assert!(core::ptr::eq(LIST.find_or_push(|e| e.0 == 1, || (1, 99)), a));
        let threads: Vec<_> = (0..8u32)
            .map(|i| std::thread::spawn(move || LIST.find_or_push(|e| e.0 == 100 + i, || (100 + i, i)).1))
            .collect();
        for (i, t) in threads.into_iter().enumerate() {
            assert_eq!(t.join().unwrap(), i as u32);
        }
    }
}
