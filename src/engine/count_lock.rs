//! The count lock of a hold: the owner's count in the backend, locked around every change
//! so that each change is sent with the count it expects (see
//! [`AcquireArgs::expected`](crate::backend::AcquireArgs)).
//!
//! It lives inside the hold's own allocation: a `tokio::sync::Mutex` would need an `Arc`
//! of its own for a guard that outlives a borrow (one more allocation per lock).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

use tokio::sync::Semaphore;

/// The count and its lock (one permit).
#[derive(Debug)]
pub(crate) struct Count {
    lock: Semaphore,
    /// Read and written only by the holder of the permit.
    value: AtomicU32,
}

impl Count {
    pub(crate) fn new(value: u32) -> Self {
        Count {
            lock: Semaphore::new(1),
            value: AtomicU32::new(value),
        }
    }
}

/// The locked count of the hold `H` points to (`Arc<Hold>` to carry it into a future,
/// `&Hold` for a change made at once). Derefs to the count; dropping it stores the count
/// and unlocks.
/// What has a count lock (a hold).
pub(crate) trait Counts {
    fn count(&self) -> &Count;
}

pub(crate) struct Counted<H: Deref<Target: Counts>> {
    hold: H,
    value: u32,
}

impl<H: Deref<Target: Counts>> Counted<H> {
    /// Waits for the count lock (cancel-safe: nothing is taken until it returns).
    pub(crate) async fn lock(hold: H) -> Self {
        match hold.count().lock.acquire().await {
            Ok(permit) => permit.forget(),
            // The semaphore is never closed.
            Err(_) => unreachable!("the count lock is never closed"),
        }
        Self::locked(hold)
    }

    /// The count lock if it is free now, else `Err(hold)`.
    pub(crate) fn try_lock(hold: H) -> Result<Self, H> {
        let taken = hold
            .count()
            .lock
            .try_acquire()
            .map(|permit| permit.forget());
        match taken {
            Ok(()) => Ok(Self::locked(hold)),
            Err(_) => Err(hold),
        }
    }

    fn locked(hold: H) -> Self {
        let value = hold.count().value.load(Ordering::Acquire);
        Counted { hold, value }
    }

    /// The hold whose count this is.
    pub(crate) fn hold(&self) -> &H {
        &self.hold
    }
}

impl<H: Deref<Target: Counts>> Deref for Counted<H> {
    type Target = u32;

    fn deref(&self) -> &u32 {
        &self.value
    }
}

impl<H: Deref<Target: Counts>> DerefMut for Counted<H> {
    fn deref_mut(&mut self) -> &mut u32 {
        &mut self.value
    }
}

impl<H: Deref<Target: Counts>> Drop for Counted<H> {
    fn drop(&mut self) {
        let count = self.hold.count();
        count.value.store(self.value, Ordering::Release);
        count.lock.add_permits(1);
    }
}
