//! One acquisition: try, queue, wait for a reason to retry, give up at the deadline; then
//! the hold and its guard.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

mod attempt;
mod fair;
mod queued_waiter;
mod want;

use attempt::attempt;
pub(in crate::engine) use attempt::{backend_down, checked};
pub(in crate::engine) use fair::FairAcquisition;
use queued_waiter::QueuedWaiter;
pub(crate) use want::Acquired;
#[cfg(feature = "axum")]
pub(crate) use want::PendingWatchdog;
pub(in crate::engine) use want::{Grant, Want};

use crate::backend::Attempt;
use crate::engine::background::outage::{answer_by, answer_within, GaveUp};
use crate::engine::manager::shared::ManagerInner;
use crate::error::{BackendError, LockError};
use crate::key::LockKey;
use crate::wait::{Found, Local, Turn};

/// Pause before a waiter retries after a backend error (doubling up to a second).
pub(in crate::engine) const ERROR_RETRY: Duration = Duration::from_millis(50);

/// An acquisition under way.
pub(in crate::engine) struct Acquisition<'a> {
    inner: &'a Arc<ManagerInner>,
    want: &'a Want,
    wait: Duration,
    started: Instant,
    deadline: Instant,
    /// When the holder's lease ends, as last seen.
    holder_until: Option<Instant>,
    /// The last attempt was held back by a waiting writer's mark.
    held_back: bool,
    /// Its caller already waits (a multi-lock's parts after the first busy one): it rides
    /// an outage out from its first attempt on, like a queued waiter.
    waiting_already: bool,
}

impl<'a> Acquisition<'a> {
    pub(in crate::engine) fn new(
        inner: &'a Arc<ManagerInner>,
        want: &'a Want,
        wait: Duration,
    ) -> Self {
        let started = Instant::now();
        let deadline = deadline_after(started, wait);
        Acquisition {
            inner,
            want,
            wait,
            started,
            deadline,
            holder_until: None,
            held_back: false,
            waiting_already: false,
        }
    }

    /// Its caller already waits: no failing fast (see [`LockRequest`]'s
    /// `waiting_already`).
    ///
    /// [`LockRequest`]: crate::engine::request::LockRequest
    pub(in crate::engine) fn waiting_already(mut self, waiting: bool) -> Self {
        self.waiting_already = waiting;
        self
    }

    /// Tries, then waits in the local queue until acquired or the deadline.
    pub(in crate::engine) async fn run(mut self) -> Result<Grant, LockError> {
        // Local waiters go first: a newcomer does not try before them, nor while a holder
        // in this process has the lock. A single try asks the backend unless waiters are
        // queued (it must not overtake them).
        let local = self
            .inner
            .queues()
            .local_state(&self.want.key, self.want.kind);
        let (mut found, mut first_error) = (Found::Nothing, None);
        if local == Local::Free || (local == Local::Held && self.wait.is_zero()) {
            match self.first_try().await {
                Ok(Ok(grant)) => return Ok(grant),
                Ok(Err(refused)) => found = refused,
                // A caller that waits already rides the failure out while its wait lasts.
                Err(LockError::Unavailable(error))
                    if self.waiting_already && !self.wait.is_zero() =>
                {
                    (found, first_error) = (Found::Busy(ERROR_RETRY), Some(error));
                }
                Err(error) => return Err(error),
            }
            if self.wait.is_zero() {
                return Err(self.timed_out());
            }
        } else if self.wait.is_zero() {
            return Err(self.timed_out());
        }
        self.wait_in_queue(found, first_error).await
    }

    /// One attempt now, whatever waits or holds in this process (a downgrade: the writer
    /// asks for a read hold the backend grants it whoever queues).
    pub(in crate::engine) async fn try_now(mut self) -> Result<Grant, LockError> {
        match self.first_try().await? {
            Ok(grant) => Ok(grant),
            Err(_) => Err(self.timed_out()),
        }
    }

    /// The first attempt, with the name claimed so that newcomers that arrive meanwhile
    /// queue instead of trying too (a burst of duplicates costs one attempt, not one each).
    /// `Ok(Err(found))`: not granted, and what the attempt found.
    async fn first_try(&mut self) -> Result<Result<Grant, Found>, LockError> {
        let claim = self.inner.queues().claim(&self.want.key, self.want.kind);
        let sent = Instant::now();
        // A waiting request's deadline also bounds its first attempt (a slow backend),
        // unless the backend's own time limit comes first (a single try, or the common
        // long wait: no timer to set and cancel). Neither waits on a connection the
        // backend has found lost.
        let capabilities = self.inner.store().capabilities();
        let bounded = capabilities
            .attempt_time_limit
            .is_some_and(|limit| limit <= self.wait);
        let deadline = (!self.wait.is_zero() && !bounded).then_some(self.deadline);
        // Where the store queues waiters itself, the first attempt is a single try: a
        // request that waits does so from the local queue (its head in the store's), where
        // it is counted and newcomers line up behind it.
        let waits_until =
            (!self.wait.is_zero() && !capabilities.waits_in_store).then_some(self.deadline);
        let attempt = attempt(self.inner, self.want, waits_until);
        let answer = match deadline {
            Some(deadline) if self.waiting_already => answer_by(attempt, deadline).await,
            _ => answer_within(attempt, deadline, self.inner).await,
        };
        let result = match answer {
            Ok(result) => result,
            Err(GaveUp::Deadline) => Err(BackendError::new(format!(
                "no answer from the lock backend within the wait ({:?})",
                self.wait
            ))),
            Err(GaveUp::Unreachable) => Err(backend_down(self.inner)),
        };
        match result? {
            attempt @ (Attempt::Acquired | Attempt::Fenced(_)) => Ok(Ok(Grant {
                lease_from: sent,
                claim,
                token: attempt.fencing_token(),
            })),
            Attempt::Recorded(record) => Err(self.recorded(record)),
            Attempt::HeldForOtherWork => Err(self.held_for_other_work()),
            Attempt::Busy(pttl) => {
                self.holder_until = pttl.map(|pttl| sent + pttl);
                self.held_back = false;
                Ok(Err(pttl.map_or(Found::Nothing, Found::Busy)))
            }
            Attempt::HeldBack(marks_end) => {
                (self.holder_until, self.held_back) = (None, true);
                Ok(Err(Found::HeldBack(marks_end)))
            }
            Attempt::Lost => Ok(Err(Found::Nothing)),
            // Only a waiting fair acquisition queues (it has an acquisition of its own).
            attempt @ Attempt::Queued { .. } => Err(unexpected(self.inner, &attempt).into()),
        }
    }

    /// Waits in the local queue: retries when told to (an unlock, a release here, a lost
    /// subscription) or when the holder's lease as last seen ends, until the deadline.
    async fn wait_in_queue(
        mut self,
        found: Found,
        first_error: Option<BackendError>,
    ) -> Result<Grant, LockError> {
        let (inner, want) = (self.inner, self.want);
        let ticket = inner.queues().join(
            &want.key,
            (want.kind, want.unless_recorded),
            found,
            &want.owner,
            want.lease,
        );
        let mut queued = QueuedWaiter::new(ticket, inner, want);
        let mut last_error = first_error;
        let mut error_retry = ERROR_RETRY;
        loop {
            // The release this waiter waited for sent its record (another process's): the
            // answer an attempt would get, a round trip sooner.
            if let Some(record) = queued.ticket().take_record() {
                return Err(self.recorded(record));
            }
            match queued.ticket().turn() {
                Turn::Try => {
                    let sent = Instant::now();
                    // Queued, it rides an outage out while its wait lasts: its attempt
                    // waits for an answer even behind a reconnect, and a failed one is
                    // tried again. Given up at the deadline, the attempt may still land,
                    // and is undone in the background if it does (the owner id is not
                    // used again).
                    match answer_by(attempt(inner, want, Some(self.deadline)), self.deadline).await
                    {
                        Err(_) => break,
                        Ok(Ok(attempt @ (Attempt::Acquired | Attempt::Fenced(_)))) => {
                            let claim = inner.queues().claim(&want.key, want.kind);
                            queued.acquired();
                            return Ok(Grant {
                                lease_from: sent,
                                claim,
                                token: attempt.fencing_token(),
                            });
                        }
                        Ok(Ok(Attempt::Busy(pttl))) => {
                            last_error = None;
                            self.holder_until = pttl.map(|pttl| sent + pttl);
                            self.held_back = false;
                            queued.ticket().busy(pttl);
                        }
                        Ok(Ok(Attempt::HeldBack(marks_end))) => {
                            last_error = None;
                            (self.holder_until, self.held_back) = (None, true);
                            queued.ticket().held_back(marks_end);
                        }
                        Ok(Ok(Attempt::Lost)) => queued.ticket().busy(None),
                        Ok(Ok(Attempt::HeldForOtherWork)) => {
                            return Err(self.held_for_other_work());
                        }
                        Ok(Ok(attempt @ Attempt::Queued { .. })) => {
                            last_error = Some(unexpected(inner, &attempt));
                            queued.ticket().busy(Some(error_retry));
                            error_retry = (error_retry * 2).min(Duration::from_secs(1));
                        }
                        Ok(Ok(Attempt::Recorded(record))) => {
                            // Every local waiter for it will find the record too: they
                            // look at once rather than one after another.
                            queued.ticket().recorded();
                            return Err(self.recorded(record));
                        }
                        Ok(Err(error)) => {
                            last_error = Some(error);
                            queued.ticket().busy(Some(error_retry));
                            error_retry = (error_retry * 2).min(Duration::from_secs(1));
                        }
                    }
                }
                Turn::Handed(lease_from) => {
                    let claim = inner.queues().claim(&want.key, want.kind);
                    queued.acquired();
                    return Ok(Grant {
                        lease_from,
                        claim,
                        token: None,
                    });
                }
                Turn::Wait(until) => {
                    let wake_at = until.map_or(self.deadline, |until| until.min(self.deadline));
                    tokio::select! {
                        _ = queued.ticket().signalled() => {}
                        _ = tokio::time::sleep_until(wake_at) => {}
                    }
                }
            }
            if Instant::now() >= self.deadline {
                break;
            }
        }
        drop(queued);
        // A wait that ends while the backend fails or is known down says so: whether the
        // lock is busy is not known then.
        let seen = Seen {
            holder_until: self.holder_until,
            held_back: self.held_back,
        };
        Err(wait_ended(inner, &want.key, self.started, seen, last_error))
    }

    fn timed_out(&self) -> LockError {
        let seen = Seen {
            holder_until: self.holder_until,
            held_back: self.held_back,
        };
        timed_out(&self.want.key, self.started, seen)
    }

    fn held_for_other_work(&self) -> LockError {
        LockError::HeldForOtherWork {
            key: self.want.key.clone(),
        }
    }

    fn recorded(&self, record: bytes::Bytes) -> LockError {
        LockError::Recorded {
            key: self.want.key.clone(),
            record,
        }
    }
}

/// When a wait of `wait` from `started` ends (a year for waits too long for the clock).
pub(in crate::engine) fn deadline_after(started: Instant, wait: Duration) -> Instant {
    started
        .checked_add(wait)
        .unwrap_or(started + Duration::from_secs(86_400 * 365))
}

/// What the last attempt of a wait saw.
#[derive(Debug, Clone, Copy, Default)]
pub(in crate::engine) struct Seen {
    /// When the holder's lease ends, as reported.
    pub(in crate::engine) holder_until: Option<Instant>,
    /// A waiting writer's mark held this new reader back, whoever held the lock.
    pub(in crate::engine) held_back: bool,
}

/// The lock was busy throughout a wait from `started`, as its last attempt saw.
fn timed_out(key: &LockKey, started: Instant, seen: Seen) -> LockError {
    let holder_lease = seen
        .holder_until
        .map(|until| until.saturating_duration_since(Instant::now()));
    LockError::timed_out(key.clone(), started.elapsed(), holder_lease, seen.held_back)
}

/// The error of a wait that ended without the lock: a wait that ends while the backend
/// fails (`last_error`) or is known down says so, since whether the lock is busy is not
/// known then; otherwise the lock was busy.
pub(in crate::engine) fn wait_ended(
    inner: &ManagerInner,
    key: &LockKey,
    started: Instant,
    seen: Seen,
    last_error: Option<BackendError>,
) -> LockError {
    match last_error {
        Some(error) => LockError::Unavailable(error),
        None if !inner.store().is_available() => LockError::Unavailable(backend_down(inner)),
        None => timed_out(key, started, seen),
    }
}

/// The error for an answer the backend owes no such acquisition.
fn unexpected(inner: &ManagerInner, attempt: &Attempt) -> BackendError {
    BackendError::new(format!(
        "the {} lock backend answered {attempt:?} to an acquisition that does not queue",
        inner.store().name()
    ))
}

#[cfg(test)]
mod tests;
