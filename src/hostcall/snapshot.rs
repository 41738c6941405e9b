//! A list published to lock-free readers (the listener's buffers, the
//! handler table): an immutable `Arc<[T]>` snapshot plus a generation
//! counter. Writers replace the snapshot under a spin lock and bump the
//! generation; a reader compares the generation with the one it last saw and
//! takes the lock only to clone the new snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub struct Published<T> {
    /// The current snapshot; locked only to clone or replace it.
    current: spin::Mutex<Arc<[T]>>,
    /// Bumped (release) after `current` changes; 0 = never changed.
    generation: AtomicU64,
}

impl<T: Clone> Published<T> {
    pub fn new() -> Published<T> {
        Published { current: spin::Mutex::new(Arc::from(Vec::new())), generation: AtomicU64::new(0) }
    }

    /// Replaces the snapshot with `items`.
    pub fn publish(&self, items: &[T]) {
        *self.current.lock() = items.to_vec().into();
        // Release: pairs with `generation`'s acquire load; the reader then
        // takes the lock, which orders the snapshot (and what its items
        // point to) anyway.
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The generation (acquire): a reader that saw another one takes the
    /// snapshot (`load`); 0 before the first `publish`.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The generation as a hint (relaxed): whether to stop and look again.
    pub fn generation_hint(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    /// The current snapshot.
    pub fn load(&self) -> Arc<[T]> {
        self.current.lock().clone()
    }
}

impl<T: Clone> Default for Published<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publish_moves_the_generation_and_replaces_the_snapshot() {
        let published = Published::<u32>::new();
        assert_eq!((published.generation(), &*published.load()), (0, &[][..]));
        published.publish(&[1, 2]);
        assert_eq!((published.generation(), &*published.load()), (1, &[1, 2][..]));
        let old = published.load();
        published.publish(&[3]);
        assert_eq!((published.generation_hint(), &*published.load(), &*old), (2, &[3][..], &[1, 2][..]));
    }
}
