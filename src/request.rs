//! One acquisition: try, queue, wait for a reason to retry, give up at the deadline.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{AcquireArgs, Attempt, BoxFuture};
use crate::count::Count;
use crate::error::{BackendError, LockError};
use crate::guard::{Hold, LockGuard};
use crate::key::{LockKey, OwnerId};
use crate::loss::Loss;
use crate::manager::{LockManager, ManagerInner};
use crate::orphans::{release_unowned, Queued};
use crate::outage::{answer_within, GaveUp};
use crate::settle::Settle;
use crate::wait::{Claim, Local, Turn};
use crate::watchdog::{Keeper, RenewGate};

/// Pause before a waiter retries after a backend error (doubling up to a second).
const ERROR_RETRY: Duration = Duration::from_millis(50);

/// A lock request: set how long to wait and the lease, then [`acquire`](Self::acquire).
#[derive(Debug)]
#[must_use = "nothing happens until `acquire` is awaited"]
pub struct LockRequest {
    manager: LockManager,
    key: Result<LockKey, LockError>,
    wait: Duration,
    lease: Option<Duration>,
}

/// A watchdog that the caller drives itself (polled inside the HTTP layer's future).
pub(crate) type InlineWatchdog = BoxFuture<()>;

/// A watchdog not started yet: the HTTP layer starts it only for a handler that does not
/// finish at once (see [`LockGuard::keep_alive`]).
pub(crate) type PendingWatchdog = Keeper;

/// A held lock, with its watchdog when the caller drives it itself.
pub(crate) type Acquired = (LockGuard, Option<PendingWatchdog>);

impl LockRequest {
    pub(crate) fn new(manager: LockManager, key: Result<LockKey, LockError>) -> Self {
        let wait = manager.inner.settings.wait;
        LockRequest {
            manager,
            key,
            wait,
            lease: None,
        }
    }

    /// How long [`acquire`](Self::acquire) waits for the lock before it fails with
    /// [`LockError::TimedOut`]. `Duration::ZERO` tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// An explicit lease: the lock expires after `lease` unless released, and no watchdog
    /// renews it. Values under 1 ms are raised to 1 ms, values over
    /// [`MAX_LEASE`](crate::MAX_LEASE) (about 100 years) lowered to it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = Some(lease.clamp(Duration::from_millis(1), crate::MAX_LEASE));
        self
    }

    /// The key to lock, unless the name was invalid.
    pub(crate) fn key(&self) -> Option<&LockKey> {
        self.key.as_ref().ok()
    }

    /// Tries once, without waiting.
    pub async fn try_acquire(self) -> Result<LockGuard, LockError> {
        self.wait(Duration::ZERO).acquire().await
    }

    /// Acquires the lock, waiting up to the wait time. Dropping this future at any point
    /// leaves no lock behind: an attempt already sent is finished in the background and
    /// released if it succeeded.
    pub async fn acquire(self) -> Result<LockGuard, LockError> {
        let acquired = match self.acquire_now(true) {
            Ok(acquired) => acquired,
            Err(request) => request.acquire_parts(true).await,
        };
        let (guard, watchdog) = acquired?;
        debug_assert!(watchdog.is_none());
        Ok(guard)
    }

    /// Acquires without a future when that needs no waiting: the backend answers at once
    /// (in-process) and nobody in this process holds or waits for the name. `Err(self)`:
    /// not so (or the lock is busy); go through [`acquire_parts`](Self::acquire_parts).
    pub(crate) fn acquire_now(
        self,
        spawn_watchdog: bool,
    ) -> Result<Result<Acquired, LockError>, Self> {
        let key = match self.key {
            Ok(ref key) => key,
            Err(error) => return Ok(Err(error)),
        };
        let inner = &self.manager.inner;
        if !inner.answers_at_once {
            return Err(self);
        }
        if !inner.has_runtime() {
            return Err(self);
        }
        // With no waiter queued near the name, the backend's own table keeps newcomers in
        // order and the hold needs no claim (see `WaitQueues::may_be_queued`); otherwise
        // claim the name, if it is free here.
        let claim = if inner.queues.may_be_queued(key) {
            let Some(claim) = inner.queues.claim_if_free(key) else {
                return Err(self);
            };
            Some(claim)
        } else {
            None
        };
        let owner = inner.ids.next_owner();
        let (lease, renewed) = self.lease_to_take(inner);
        let args = AcquireArgs {
            key: key.clone(),
            owner,
            lease,
            expected: 0,
        };
        let sent = Instant::now();
        match inner.backend.acquire_now(&args) {
            Some(Ok(Attempt::Acquired)) => {}
            // Busy, an error or no answer: the waiting path tries again (and queues).
            _ => return Err(self),
        }
        // The request's handle on the manager moves into the hold (no count change on
        // the manager shared by every request).
        let hold = Holding {
            inner: self.manager.inner,
            key: args.key,
            owner: args.owner,
            lease,
            renewed,
            acquired_at: sent,
            claim,
        };
        Ok(Ok(hold.start(spawn_watchdog, Duration::ZERO)))
    }

    /// The lease to take, and whether the watchdog renews it.
    fn lease_to_take(&self, inner: &ManagerInner) -> (Duration, bool) {
        match self.lease {
            Some(lease) => (lease, false),
            None => (inner.settings.lease, true),
        }
    }

    /// Acquires; with `spawn_watchdog == false` the watchdog (if any) is returned for the
    /// caller to start, and the caller must drop it before releasing.
    pub(crate) async fn acquire_parts(self, spawn_watchdog: bool) -> Result<Acquired, LockError> {
        let (lease, renewed) = self.lease_to_take(&self.manager.inner);
        let inner = self.manager.inner;
        let key = self.key?;
        // Waiting needs the current runtime's timers (one remembered from before will not
        // do); a Redis acquisition always comes here, and one round trip dwarfs the check.
        if tokio::runtime::Handle::try_current().is_err() || !inner.has_runtime() {
            return Err(BackendError::new("tower-lock needs a Tokio runtime").into());
        }
        // The backend knows it cannot be reached: say so now rather than queue behind a
        // reconnect (a waiter already queued rides the outage out while its wait lasts).
        if !inner.backend.is_available() {
            return Err(LockError::Unavailable(backend_down()));
        }
        let owner = inner.ids.next_owner();
        let (acquired_at, waited, claim) = wait_for(&inner, &key, &owner, lease, self.wait).await?;
        let hold = Holding {
            inner,
            key,
            owner,
            lease,
            renewed,
            acquired_at,
            claim: Some(claim),
        };
        Ok(hold.start(spawn_watchdog, waited))
    }
}

/// A lock just taken, before its guard exists.
struct Holding {
    inner: Arc<ManagerInner>,
    key: LockKey,
    owner: OwnerId,
    lease: Duration,
    renewed: bool,
    acquired_at: Instant,
    /// `None`: granted at once by an in-process backend with no waiter queued near.
    claim: Option<Claim>,
}

impl Holding {
    /// The guard, with the watchdog scheduled (`spawn_watchdog`) or handed back unstarted.
    fn start(self, spawn_watchdog: bool, waited: Duration) -> Acquired {
        let Holding {
            inner,
            key,
            owner,
            lease,
            renewed,
            acquired_at,
            claim,
        } = self;
        let margin = inner.settings.loss_margin.for_lease(lease);
        let hold = Arc::new(Hold {
            manager: inner,
            key,
            owner,
            lease,
            renewed,
            count: Count::new(1),
            loss: Loss::new(acquired_at + lease, margin),
            gate: RenewGate::default(),
            claim: Mutex::new(claim),
        });
        tracing::trace!(key = %hold.key, owner = %hold.owner, ?waited, "tower-lock: acquired");
        if !renewed {
            return (LockGuard::new(hold), None);
        }
        let keeper = Keeper::new(lease);
        if spawn_watchdog {
            let due = keeper.first_due(&hold);
            hold.manager.renewals.schedule(hold.clone(), keeper, due);
            (LockGuard::new(hold), None)
        } else {
            (LockGuard::new(hold), Some(keeper))
        }
    }
}

fn attempt(
    inner: &Arc<ManagerInner>,
    key: &LockKey,
    owner: &OwnerId,
    lease: Duration,
) -> Settle<Result<Attempt, BackendError>> {
    let args = AcquireArgs {
        key: key.clone(),
        owner: owner.clone(),
        lease,
        expected: 0,
    };
    let undo_inner = inner.clone();
    let (undo_key, undo_owner) = (key.clone(), owner.clone());
    Settle::new(inner.backend.acquire(args), move |result| {
        // Busy: nothing was taken. Acquired, or an error (the attempt may have landed):
        // release; releasing what was never taken changes nothing.
        if let Ok(Attempt::Busy(_)) = result {
            return None;
        }
        Some(release_unowned(undo_inner, undo_key, undo_owner, lease))
    })
}

/// The error of a backend that knows it cannot be reached now.
fn backend_down() -> BackendError {
    BackendError::new("the lock backend is unreachable (reconnecting)")
}

/// Tries, then waits in the local queue until acquired or the deadline. Returns when the
/// lease started (the successful attempt, or the release that handed the lock over, was
/// sent) and how long it took.
async fn wait_for(
    inner: &Arc<ManagerInner>,
    key: &LockKey,
    owner: &OwnerId,
    lease: Duration,
    wait: Duration,
) -> Result<(Instant, Duration, Claim), LockError> {
    let started = Instant::now();
    let deadline = started
        .checked_add(wait)
        .unwrap_or(started + Duration::from_secs(86_400 * 365));
    // When the holder's lease ends, as last seen.
    let mut holder_until: Option<Instant> = None;
    let timed_out = |holder_until: Option<Instant>| LockError::TimedOut {
        key: key.clone(),
        waited: started.elapsed(),
        holder_lease: holder_until.map(|until| until.saturating_duration_since(Instant::now())),
    };

    // Local waiters go first: a newcomer does not try before them, nor while a holder in
    // this process has the lock.
    let mut holder_lease = None;
    let local = inner.queues.local_state(key);
    // A single try asks the backend unless waiters are queued (it must not overtake them);
    // a waiter joins the queue at once when a holder here has the lock.
    if local == Local::Free || (local == Local::Held && wait.is_zero()) {
        // Newcomers that arrive meanwhile queue instead of trying too (a burst of
        // duplicates costs one attempt, not one each).
        let claim = inner.queues.claim(key);
        let sent = Instant::now();
        // A waiting request's deadline also bounds its first attempt (a slow backend),
        // unless the backend's own time limit comes first (a single try, or the common
        // long wait: no timer to set and cancel). Neither waits on a connection the
        // backend has found lost.
        let bounded = inner
            .backend
            .acquire_time_limit()
            .is_some_and(|limit| limit <= wait);
        let deadline = (!wait.is_zero() && !bounded).then_some(deadline);
        let first = match answer_within(attempt(inner, key, owner, lease), deadline, inner).await {
            Ok(result) => result,
            Err(GaveUp::Deadline) => Err(BackendError::new(format!(
                "no answer from the lock backend within the wait ({wait:?})"
            ))),
            Err(GaveUp::Unreachable) => Err(backend_down()),
        };
        match first? {
            Attempt::Acquired => return Ok((sent, Duration::ZERO, claim)),
            Attempt::Busy(pttl) => holder_lease = pttl,
            Attempt::Lost => {}
        }
        holder_until = holder_lease.map(|pttl| sent + pttl);
        if wait.is_zero() {
            return Err(timed_out(holder_until));
        }
    } else if wait.is_zero() {
        return Err(timed_out(None));
    }

    let mut ticket = Queued {
        ticket: Some(inner.queues.join(key, holder_lease, owner, lease)),
        inner,
        key,
        lease,
    };
    let mut last_error: Option<BackendError> = None;
    let mut error_retry = ERROR_RETRY;
    loop {
        match ticket.get().turn() {
            Turn::Try => {
                let sent = Instant::now();
                let attempt = attempt(inner, key, owner, lease);
                match answer_within(attempt, Some(deadline), inner).await {
                    Err(GaveUp::Deadline) => break,
                    // Its owner id is not used again: the attempt may still land, and is
                    // undone in the background if it does.
                    Err(GaveUp::Unreachable) => {
                        last_error = Some(backend_down());
                        break;
                    }
                    Ok(Ok(Attempt::Acquired)) => {
                        let claim = inner.queues.claim(key);
                        ticket.acquired();
                        return Ok((sent, started.elapsed(), claim));
                    }
                    Ok(Ok(Attempt::Busy(pttl))) => {
                        last_error = None;
                        holder_until = pttl.map(|pttl| sent + pttl);
                        ticket.get().busy(pttl);
                    }
                    Ok(Ok(Attempt::Lost)) => ticket.get().busy(None),
                    Ok(Err(error)) => {
                        // Ride out a short outage while the deadline allows.
                        last_error = Some(error);
                        ticket.get().busy(Some(error_retry));
                        error_retry = (error_retry * 2).min(Duration::from_secs(1));
                    }
                }
            }
            Turn::Handed(lease_from) => {
                let claim = inner.queues.claim(key);
                ticket.acquired();
                return Ok((lease_from, started.elapsed(), claim));
            }
            Turn::Wait(until) => {
                let wake_at = until.map_or(deadline, |until| until.min(deadline));
                tokio::select! {
                    _ = ticket.get().signalled() => {}
                    _ = tokio::time::sleep_until(wake_at) => {}
                }
            }
        }
        if Instant::now() >= deadline {
            break;
        }
    }
    drop(ticket);
    // A wait that ends while the backend fails or is known down says so: whether the lock
    // is busy is not known then.
    Err(match last_error {
        Some(error) => LockError::Unavailable(error),
        None if !inner.backend.is_available() => LockError::Unavailable(backend_down()),
        None => timed_out(holder_until),
    })
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::Duration;

    use crate::{LockError, LockManager};

    /// Runs `future` on this thread, outside any Tokio runtime.
    fn block_on<F: Future>(future: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut future = std::pin::pin!(future);
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
                return output;
            }
            std::thread::park();
        }
    }

    /// Waiting needs the current runtime's timers: outside one it is an error, not a panic,
    /// even when the manager remembers the runtime it was used in before.
    #[test]
    fn waiting_outside_a_runtime_is_an_error() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let locks = LockManager::memory();
        let held = runtime.block_on(locks.lock("busy").acquire()).unwrap();
        let waiting = std::thread::scope(|scope| {
            scope
                .spawn(|| block_on(locks.lock("busy").wait(Duration::from_millis(10)).acquire()))
                .join()
        });
        let error = waiting.expect("no panic").unwrap_err();
        assert!(
            matches!(&error, LockError::Unavailable(e) if e.to_string().contains("Tokio runtime")),
            "{error}"
        );
        runtime.block_on(held.release()).unwrap();
    }
}
