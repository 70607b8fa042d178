//! Keeps a lease alive while the lock is held.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::guard::Hold;

/// Shortest pause between renewal retries after an error.
const MIN_RETRY: Duration = Duration::from_millis(50);

/// Orders renewals before the release without joining the watchdog: a renewal starts only
/// while the hold is open, and closing waits for a renewal that already started.
#[derive(Debug, Default)]
pub(crate) struct RenewGate {
    state: Mutex<GateState>,
    done: Notify,
}

#[derive(Debug, Default)]
struct GateState {
    closed: bool,
    renewing: bool,
    /// The hold's slot in the manager's renewal schedule, while one is due (kept here so
    /// that a release closes the gate and takes the slot in one step).
    slot: Option<Slot>,
}

/// A place in the renewal schedule: when it is due, and a number that makes it unique.
pub(crate) type Slot = (Instant, u64);

impl RenewGate {
    fn state(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a renewal, unless the hold is being released.
    fn begin(&self) -> Option<Renewing<'_>> {
        let mut state = self.state();
        if state.closed {
            return None;
        }
        state.renewing = true;
        Some(Renewing(self))
    }

    /// Puts the hold in the renewal schedule at `slot` (replacing its old place), unless
    /// the gate is closed (`false`).
    pub(crate) fn schedule(&self, slot: Slot) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        state.slot = Some(slot);
        true
    }

    /// Takes the hold's place in the renewal schedule (its renewal has been started).
    pub(crate) fn unschedule(&self) {
        self.state().slot = None;
    }

    /// Closes the gate unless a renewal is under way. `Some`: closed, with the place in
    /// the renewal schedule to cancel; `None`: a renewal runs, [`close`](Self::close)
    /// waits for it.
    pub(crate) fn try_close(&self) -> Option<Option<Slot>> {
        let mut state = self.state();
        state.closed = true;
        (!state.renewing).then(|| state.slot.take())
    }

    /// No renewal starts after this returns, and none is still running. Returns the place
    /// in the renewal schedule to cancel.
    pub(crate) async fn close(&self) -> Option<Slot> {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            {
                let mut state = self.state();
                state.closed = true;
                if !state.renewing {
                    return state.slot.take();
                }
            }
            done.await;
        }
    }
}

/// A renewal in progress; ends when dropped (also when its watchdog is aborted).
struct Renewing<'a>(&'a RenewGate);

impl Drop for Renewing<'_> {
    fn drop(&mut self) {
        self.0.state().renewing = false;
        self.0.done.notify_waiters();
    }
}

/// The renewal schedule of one hold: its lease, and how long to wait before retrying. When
/// the lease may end is the hold's own (its `Loss`).
#[derive(Debug, Clone)]
pub(crate) struct Keeper {
    lease: Duration,
    period: Duration,
    retry: Duration,
}

impl Keeper {
    pub(crate) fn new(lease: Duration) -> Self {
        Keeper {
            lease,
            period: lease / 3,
            retry: MIN_RETRY,
        }
    }

    /// When the first renewal of `hold` is due.
    pub(crate) fn first_due(&self, hold: &Hold) -> Instant {
        hold.loss.valid_until() - self.lease + self.period
    }
}

/// Renews the lease once (every lease/3 while held). Returns when to renew next; `None`
/// when the hold was released, or when the lock is lost (the loss signal fired and a
/// warning was traced). A failed renewal is retried until the loss deadline, a margin
/// before the lease could end (see [`LossMargin`](crate::LossMargin)): a holder is told
/// while nobody else can have the lock yet.
pub(crate) async fn renew_once(hold: &Hold, keeper: &mut Keeper) -> Option<Instant> {
    let _renewing = hold.gate.begin()?;
    let (key, owner) = (&hold.key, &hold.owner);
    let sent = Instant::now();
    let renewal = hold
        .manager
        .backend
        .renew(key.clone(), owner.clone(), keeper.lease);
    let lost = |why: &str| {
        tracing::warn!(key = %key, owner = %owner, "tower-lock: lock lost: {why}");
        hold.loss.fire();
        None
    };
    let deadline = hold.loss.deadline();
    match tokio::time::timeout_at(deadline, renewal).await {
        Ok(Ok(true)) => {
            hold.loss.extend(sent + keeper.lease);
            keeper.retry = MIN_RETRY;
            Some(sent + keeper.period)
        }
        Ok(Ok(false)) => lost("the renewal found it gone (expired or deleted)"),
        Ok(Err(error)) if Instant::now() + keeper.retry < deadline => {
            tracing::warn!(key = %key, %error, "tower-lock: lease renewal failed; retrying while the lease may still run");
            let next = Instant::now() + keeper.retry;
            keeper.retry = (keeper.retry * 2).min(keeper.period.max(MIN_RETRY));
            Some(next)
        }
        Ok(Err(_)) => lost("renewals failed until shortly before the lease could end"),
        Err(_) => lost("no renewal succeeded by shortly before the lease could end"),
    }
}

/// The watchdog as a future, for a caller that polls it itself (the HTTP layer's response
/// future): completes when the lock is lost or the hold released.
pub(crate) async fn keep_alive(hold: Arc<Hold>, mut keeper: Keeper) {
    let mut next = keeper.first_due(&hold);
    loop {
        tokio::time::sleep_until(next).await;
        match renew_once(&hold, &mut keeper).await {
            Some(due) => next = due,
            None => return,
        }
    }
}
