//! A fair acquisition ([`LockKind::Fair`]): the waiter takes its place in the backend's
//! queue, shared by every process, keeps the place alive while it waits, and tries again
//! only when told its turn, when its place needs renewing, or when the holder's lease (or
//! the head's place) as last seen runs out. It never polls a free lock that its head has
//! not taken: only the head may take it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{
    backend_down, deadline_after, wait_ended, Acquisition, Grant, Seen, Want, ERROR_RETRY,
};
use crate::backend::{AcquireArgs, Attempt, LeaveArgs};
use crate::engine::background::drop_safe::DropSafe;
use crate::engine::background::outage::{answer_by, answer_within, GaveUp};
use crate::engine::background::unowned::release_unowned;
use crate::engine::manager::shared::ManagerInner;
use crate::error::{BackendError, LockError};
use crate::kind::LockKind;
use crate::telemetry::TARGET;
use crate::wait::FairTicket;

/// A fair acquisition under way.
pub(in crate::engine) struct FairAcquisition<'a> {
    inner: &'a Arc<ManagerInner>,
    want: &'a Want,
    wait: Duration,
    /// This waiter's queue timeout: the shorter of its wait and the manager's.
    timeout: Duration,
}

impl<'a> FairAcquisition<'a> {
    pub(in crate::engine) fn new(
        inner: &'a Arc<ManagerInner>,
        want: &'a Want,
        wait: Duration,
    ) -> Self {
        let timeout = wait
            .min(inner.settings().fair_queue_timeout)
            .max(Duration::from_millis(10));
        FairAcquisition {
            inner,
            want,
            wait,
            timeout,
        }
    }

    /// Queues, then waits for its turn until acquired or the deadline.
    pub(in crate::engine) async fn run(self) -> Result<Grant, LockError> {
        let (inner, want) = (self.inner, self.want);
        // A single try never queues (it must not overtake the queue either).
        if self.wait.is_zero() {
            return Acquisition::new(inner, want, Duration::ZERO)
                .try_now()
                .await;
        }
        let key = want.key.clone();
        let started = Instant::now();
        let deadline = deadline_after(started, self.wait);
        let mut place = Place::new(inner, want.clone(), self.timeout);
        let mut first = true;
        let (mut last_error, mut error_retry) = (None::<BackendError>, ERROR_RETRY);
        let mut holder_until = None;
        loop {
            let sent = Instant::now();
            place.in_flight = true;
            // A first attempt fails fast while the backend cannot be reached; a queued
            // waiter's waits for its answer, even behind a reconnect, within its wait.
            let answer = if first {
                answer_within(place.attempt(), Some(deadline), inner).await
            } else {
                answer_by(place.attempt(), deadline).await
            };
            // Given up on (the deadline, an outage): the attempt's own undo leaves the queue
            // once it has landed, so the place must not leave before it.
            place.in_flight = answer.is_err();
            let next_try = match answer {
                Err(GaveUp::Deadline) => break,
                // Only a first attempt gives up on a backend that cannot be reached (fail
                // fast, as below).
                Err(GaveUp::Unreachable) => {
                    last_error = Some(backend_down(inner));
                    break;
                }
                Ok(Ok(Attempt::Acquired)) => {
                    place.acquired = true;
                    let claim = inner.queues().claim(&key, LockKind::Fair);
                    return Ok(Grant {
                        lease_from: sent,
                        claim,
                        token: None,
                    });
                }
                Ok(Ok(Attempt::Queued {
                    retry_in,
                    holder_lease,
                    at_head,
                })) => {
                    (last_error, error_retry) = (None, ERROR_RETRY);
                    place.queued = true;
                    place.at_head = at_head;
                    holder_until = holder_lease.map(|lease| sent + lease);
                    // Renew the place every third of its timeout.
                    sent + retry_in.min(self.timeout / 3)
                }
                Ok(answer) => {
                    // Failed (or answered what a waiting fair acquisition is never
                    // answered): the attempt may have landed; if the wait ends now,
                    // release too.
                    place.uncertain = true;
                    last_error = Some(answer.err().unwrap_or_else(|| {
                        BackendError::new(format!(
                            "the {} lock backend answered a waiting fair acquisition with \
                             neither the lock nor a place in its queue",
                            inner.store().name()
                        ))
                    }));
                    // Like the plain lock's, a first attempt that fails answers at once
                    // (fail fast); a queued waiter rides the failure out while it waits.
                    if first {
                        break;
                    }
                    error_retry = (error_retry * 2).min(Duration::from_secs(1));
                    Instant::now() + error_retry / 2
                }
            };
            first = false;
            // Registered (on Redis: its channel subscribed) only once it did not get the
            // lock at once: an uncontended acquisition costs one script call. The
            // registration wakes the waiter once it is in place, so a release between the
            // first attempt and the subscription is not missed.
            let ticket = place
                .ticket
                .get_or_insert_with(|| inner.queues().fair_join(&key, &place.want.owner));
            tokio::select! {
                _ = ticket.signalled() => {}
                _ = tokio::time::sleep_until(next_try.min(deadline)) => {}
            }
            if Instant::now() >= deadline {
                break;
            }
        }
        drop(place);
        let seen = Seen {
            holder_until,
            held_back: false,
        };
        Err(wait_ended(inner, &want.key, started, seen, last_error))
    }
}

/// A fair waiter's place: registered here for its turn, and queued in the backend. Leaving
/// without the lock (the wait ended, the acquisition was dropped) takes it out of the
/// backend's queue in the background.
struct Place<'a> {
    /// Its registration for its turn, once an attempt did not take the lock.
    ticket: Option<FairTicket>,
    inner: &'a Arc<ManagerInner>,
    /// What it asks for, under its owner id.
    want: Want,
    timeout: Duration,
    /// An attempt is on its way: if it is dropped, its own undo leaves the queue (after it
    /// landed, so that it cannot queue the waiter again behind the leave).
    in_flight: bool,
    /// An attempt took the lock.
    acquired: bool,
    /// An attempt was answered queued.
    queued: bool,
    /// The last attempt was answered queued at the head of the queue.
    at_head: bool,
    /// An attempt failed without an answer: it may have taken the lock.
    uncertain: bool,
}

impl<'a> Place<'a> {
    fn new(inner: &'a Arc<ManagerInner>, want: Want, timeout: Duration) -> Self {
        Place {
            ticket: None,
            inner,
            want,
            timeout,
            in_flight: false,
            acquired: false,
            queued: false,
            at_head: false,
            uncertain: false,
        }
    }

    /// One attempt, finished and undone in the background if it is dropped after it was
    /// sent: a lock it took (or may have) is released, and the waiter leaves the queue.
    fn attempt(&self) -> DropSafe<Result<Attempt, BackendError>> {
        let want = &self.want;
        let args = AcquireArgs::new(
            want.key.clone(),
            LockKind::Fair,
            want.owner.clone(),
            want.lease,
        )
        .fair_place(self.timeout, self.at_head);
        let (inner, want, timeout) = (self.inner.clone(), self.want.clone(), self.timeout);
        DropSafe::new(self.inner.store().acquire(args), move |result| {
            let took = !matches!(result, Ok(Attempt::Queued { .. }));
            Some(leave(inner, want, timeout, took))
        })
    }
}

/// Leaves the backend's queue as `want`'s owner, after releasing the lock first if it
/// `took` it (or may have).
fn leave(
    inner: Arc<ManagerInner>,
    want: Want,
    timeout: Duration,
    took: bool,
) -> crate::backend::BoxFuture<()> {
    Box::pin(async move {
        if took {
            let (key, owner) = (want.key.clone(), want.owner.clone());
            release_unowned(inner.clone(), key, LockKind::Fair, owner, want.lease).await;
        }
        let args = LeaveArgs::new(want.key, LockKind::Fair, want.owner).queue_timeout(timeout);
        if let Err(error) = inner.store().leave_queue(args).await {
            tracing::warn!(target: TARGET, %error, "tower-lock: a fair waiter could not leave the queue; its place runs out by itself");
        }
    })
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.ticket = None;
        // Acquired; an attempt's undo leaves for it; or never queued, nor may have been.
        if self.acquired || self.in_flight || !(self.queued || self.uncertain) {
            return;
        }
        let leaving = leave(
            self.inner.clone(),
            self.want.clone(),
            self.timeout,
            self.uncertain,
        );
        match self.inner.runtime() {
            Some(runtime) => drop(runtime.spawn(leaving)),
            None => {
                tracing::warn!(target: TARGET, key = %self.want.key, "tower-lock: a fair waiter dropped outside a Tokio runtime keeps its place until it runs out")
            }
        }
    }
}
