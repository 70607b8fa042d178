//! The count lock of a hold: the owner's count in the backend, locked around every change
//! so that each change is sent with the count it expects (see
//! [`AcquireArgs::expected`](crate::backend::AcquireArgs)).
//!
//! It lives inside the hold's own allocation: a `tokio::sync::Mutex` would need an `Arc`
//! of its own for a guard that outlives a borrow (one more allocation per lock).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use tokio::sync::Notify;

/// The lock is free.
const FREE: u8 = 0;
/// Locked, and nobody waits: unlocking is one atomic swap (the uncontended path of every
/// acquisition and release goes through here; a `tokio::sync::Semaphore` takes a mutex on
/// every release).
const LOCKED: u8 = 1;
/// Locked, and someone may wait: unlocking wakes one waiter.
const CONTENDED: u8 = 2;

/// The count and its lock.
#[derive(Debug)]
pub(crate) struct Count {
    state: AtomicU8,
    unlocked: Notify,
    /// Read and written only by the holder of the lock.
    value: AtomicU32,
}

impl Count {
    pub(crate) fn new(value: u32) -> Self {
        Count {
            state: AtomicU8::new(FREE),
            unlocked: Notify::new(),
            value: AtomicU32::new(value),
        }
    }

    fn try_lock(&self) -> bool {
        self.state
            .compare_exchange(FREE, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Waits for the lock. Cancel-safe: nothing is taken until it returns, and a wake-up
    /// meant for a dropped waiter passes to the next one (`Notify::notify_one`).
    async fn lock(&self) {
        if self.try_lock() {
            return;
        }
        loop {
            let unlocked = self.unlocked.notified();
            tokio::pin!(unlocked);
            unlocked.as_mut().enable();
            // Taken as contended: whoever unlocks wakes the next waiter (there may be one).
            if self.state.swap(CONTENDED, Ordering::Acquire) == FREE {
                return;
            }
            unlocked.await;
        }
    }

    fn unlock(&self) {
        if self.state.swap(FREE, Ordering::Release) == CONTENDED {
            self.unlocked.notify_one();
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
        hold.count().lock().await;
        Self::locked(hold)
    }

    /// The count lock if it is free now, else `Err(hold)`.
    pub(crate) fn try_lock(hold: H) -> Result<Self, H> {
        if hold.count().try_lock() {
            Ok(Self::locked(hold))
        } else {
            Err(hold)
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
        count.unlock();
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;
    use std::sync::Arc;

    use crate::engine::hold::count_lock::*;

    struct Holder(Count);

    impl Counts for Holder {
        fn count(&self) -> &Count {
            &self.0
        }
    }

    /// Polls `future` once: it must be waiting.
    async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) {
        tokio::select! {
            biased;
            _ = future => panic!("the lock is held"),
            _ = std::future::ready(()) => {}
        }
    }

    /// Adds one to the count once the lock is free.
    async fn add_one(holder: Arc<Holder>) {
        *Counted::lock(holder).await += 1;
    }

    #[tokio::test]
    async fn waiters_get_the_lock_in_turn_and_a_dropped_waiter_passes_its_wake_up_on() {
        let holder = Arc::new(Holder(Count::new(1)));
        let mut held = Counted::try_lock(holder.clone()).ok().expect("free");
        assert!(Counted::try_lock(holder.clone()).is_err(), "taken once");

        // Three waiters in line; the first is dropped after the unlock woke it.
        let mut dropped = Box::pin(Counted::lock(holder.clone()));
        let mut second = pin!(add_one(holder.clone()));
        let mut third = pin!(add_one(holder.clone()));
        poll_once(&mut dropped).await;
        poll_once(&mut second).await;
        poll_once(&mut third).await;
        *held += 10;
        drop(held);
        drop(dropped);
        // Each waiter's turn comes from the one before (a lost wake-up would hang here).
        let bound = std::time::Duration::from_secs(30);
        tokio::time::timeout(bound, second)
            .await
            .expect("the second waiter's turn");
        tokio::time::timeout(bound, third)
            .await
            .expect("the third waiter's turn");
        let count = Counted::try_lock(holder.clone()).ok().expect("free again");
        assert_eq!(*count, 13);
    }
}
