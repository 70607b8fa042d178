//! Reentry: another hold of a lock for the owner that holds it (the same kind again, or
//! what the kind's rules allow: a read hold under a write hold, a plain hold under a
//! fenced one), taken without waiting.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::backend::{Attempt, BoxFuture};
use crate::engine::background::drop_safe::DropSafe;
use crate::engine::background::outage::answer_within;
use crate::engine::hold::count_lock::Counted;
use crate::engine::hold::guard::LockGuard;
use crate::engine::hold::Hold;
use crate::engine::request::acquire::{checked, Acquisition, Want};
use crate::error::LockError;
use crate::kind::{Also, LockKind};
use crate::telemetry;

impl LockGuard {
    /// Acquires the same lock again for the same owner (count + 1). The returned guard
    /// releases its own hold; the lock is free once every guard has been released.
    ///
    /// # Errors
    /// [`LockError::Lost`] if the owner no longer holds the lock;
    /// [`LockError::Unavailable`] if the backend failed.
    ///
    /// # Cancel safety
    /// Cancel safe: a reentry already sent is finished in the background and undone.
    pub async fn reenter(&self) -> Result<LockGuard, LockError> {
        reenter(self.hold().clone()).await
    }

    /// A read hold of the same read-write lock for the same owner: from a write guard, a
    /// downgrade (the writer may also read; once it releases the write hold, other readers
    /// share the lock with it); from a read guard, a reentry. Asked of a plain lock's
    /// guard, an error.
    ///
    /// # Errors
    /// [`LockError::KindMismatch`] for a plain lock's guard; [`LockError::Lost`] if the
    /// owner no longer holds the lock; [`LockError::Unavailable`] if the backend failed.
    ///
    /// # Cancel safety
    /// As [`reenter`](Self::reenter).
    pub async fn read_lock(&self) -> Result<LockGuard, LockError> {
        hold_as(self.hold().clone(), LockKind::Read).await
    }

    /// A write hold of the same read-write lock for the same owner: from a write guard, a
    /// reentry. A read guard cannot upgrade (two readers upgrading at once would wait for
    /// each other forever): it gets an error at once, never a wait.
    ///
    /// # Errors
    /// [`LockError::KindMismatch`] for a read guard or a plain lock's guard;
    /// [`LockError::Lost`] and [`LockError::Unavailable`] as [`reenter`](Self::reenter).
    ///
    /// # Cancel safety
    /// As [`reenter`](Self::reenter).
    pub async fn write_lock(&self) -> Result<LockGuard, LockError> {
        hold_as(self.hold().clone(), LockKind::Write).await
    }
}

/// Another hold of `kind` for the owner of `hold`, where the kind's rules allow
/// ([`LockKind::also`]); anything else is [`LockError::KindMismatch`] at once. Shared with
/// the HTTP extractors.
pub(in crate::engine) async fn hold_as(
    hold: Arc<Hold>,
    kind: LockKind,
) -> Result<LockGuard, LockError> {
    match hold.kind().also(kind) {
        Also::Reenter => reenter(hold).await,
        Also::Downgrade => downgrade(&hold, kind).await,
        Also::Refused => Err(LockError::KindMismatch {
            key: hold.key().clone(),
            held: hold.kind(),
            asked: kind,
        }),
    }
}

/// A hold of `kind` (the shared side) for the owner of the write hold `hold` (a
/// downgrade): one attempt, which the backend grants to the writer whoever waits.
async fn downgrade(hold: &Arc<Hold>, kind: LockKind) -> Result<LockGuard, LockError> {
    if hold.loss().is_lost() {
        return Err(LockError::Lost {
            key: hold.key().clone(),
        });
    }
    let want = Want {
        key: hold.key().clone(),
        kind,
        owner: hold.owner().clone(),
        lease: hold.lease(),
        renewed: hold.is_renewed(),
        unless_recorded: false,
        work: None,
    };
    let manager = hold.manager().clone();
    let span = telemetry::acquire_span(&want.key, kind, Duration::ZERO);
    let started = Instant::now();
    let granted = Acquisition::new(&manager, &want, Duration::ZERO)
        .try_now()
        .instrument(span.clone())
        .await;
    let answer = granted.as_ref().map(|_| ());
    telemetry::acquired(&span, kind, Duration::ZERO, started.elapsed(), answer);
    let grant = granted?;
    let (guard, _) = want.hold(
        manager,
        grant.lease_from,
        Some(grant.claim),
        grant.token,
        true,
    );
    Ok(guard)
}

/// Acquires `hold` once more for its owner. Shared with the HTTP layer's lock handle.
pub(in crate::engine) async fn reenter(hold: Arc<Hold>) -> Result<LockGuard, LockError> {
    let kind = hold.kind();
    let span = telemetry::acquire_span(hold.key(), kind, Duration::ZERO);
    let started = Instant::now();
    let result = reenter_once(hold).instrument(span.clone()).await;
    let answer = result.as_ref().map(|_| ());
    telemetry::acquired(&span, kind, Duration::ZERO, started.elapsed(), answer);
    result
}

async fn reenter_once(hold: Arc<Hold>) -> Result<LockGuard, LockError> {
    let lost = || LockError::Lost {
        key: hold.key().clone(),
    };
    let count = Counted::lock(hold.clone()).await;
    if *count == 0 || (hold.loss().is_lost() && hold.is_renewed()) {
        return Err(lost());
    }
    let expected = *count;
    // The count lock travels with the attempt: if this future is dropped, the background
    // undo still holds it, so no other change is sent with a stale count meanwhile.
    let count = Arc::new(Mutex::new(Some(count)));
    let undo_count = count.clone();
    let args = hold.acquire_args(expected);
    let sent = Instant::now();
    let attempt = DropSafe::new(checked(hold.manager(), args), move |result| {
        let count = undo_count
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        match result {
            Ok(attempt) if attempt.is_acquired() => {
                let mut count = count;
                *count += 1;
                Some(Box::pin(async move {
                    let _ = Hold::release(count).await;
                }) as BoxFuture<()>)
            }
            _ => None,
        }
    });
    // Not waiting on a lost connection: dropped, the attempt finishes in the background,
    // where its undo keeps the count lock until it is over.
    let result = match answer_within(attempt, None, hold.manager()).await {
        Ok(result) => result,
        Err(_) => {
            return Err(LockError::Unavailable(
                hold.manager().store().unavailable_reason(),
            ))
        }
    };
    let mut count = count
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .expect("the count lock is only taken by the undo of a dropped attempt");
    match result? {
        attempt @ (Attempt::Acquired | Attempt::Fenced(_)) => {
            *count += 1;
            hold.loss().extend(sent + hold.lease());
            drop(count);
            Ok(LockGuard::new(hold, attempt.fencing_token()))
        }
        // (A reentry never asks for a record.)
        Attempt::Busy(_)
        | Attempt::HeldBack(_)
        | Attempt::HeldForOtherWork
        | Attempt::Queued { .. }
        | Attempt::Lost
        | Attempt::Recorded(_) => {
            hold.mark_lost();
            Err(lost())
        }
    }
}
