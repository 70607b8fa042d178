//! One attempt at the backend, made safe to drop: an attempt that may have landed is
//! undone in the background.

use std::sync::Arc;

use tokio::time::Instant;

use crate::backend::{AcquireArgs, Attempt, BoxFuture, ReleaseArgs};
use crate::engine::background::drop_safe::DropSafe;
use crate::engine::background::unowned::{release_unowned, stop_waiting};
use crate::engine::manager::shared::ManagerInner;
use crate::engine::request::acquire::want::Want;
use crate::error::BackendError;

/// One attempt, finished and undone in the background if it is dropped after it was sent
/// (and a waiting writer's mark taken back). `deadline`: when the acquirer stops waiting
/// if the lock is busy (`None`: a single try). On a backend whose store queues waiters, an
/// attempt dropped while it may still wait there is taken out of the store's queue at once.
pub(in crate::engine) fn attempt(
    inner: &Arc<ManagerInner>,
    want: &Want,
    deadline: Option<Instant>,
) -> DropSafe<Result<Attempt, BackendError>> {
    let waits = deadline.is_some();
    let wait_left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
    let undo_inner = inner.clone();
    let (undo_key, undo_kind, undo_owner, lease) =
        (want.key.clone(), want.kind, want.owner.clone(), want.lease);
    let in_store = waits && inner.store().capabilities().waits_in_store;
    let abandon = in_store.then(|| {
        let (inner, key, kind, owner) = (
            inner.clone(),
            want.key.clone(),
            want.kind,
            want.owner.clone(),
        );
        move || stop_waiting(inner, key, kind, owner)
    });
    let operation = DropSafe::new(checked(inner, want.args(wait_left)), move |result| {
        let marked = waits && undo_kind.rules().marks_waiting;
        // Busy or held back: nothing was taken (but a waiting writer may have marked its
        // wait).
        // Acquired, or an error (the attempt may have landed): release; releasing what was
        // never taken changes nothing.
        let took = !matches!(
            result,
            Ok(Attempt::Busy(_) | Attempt::HeldBack(_) | Attempt::HeldForOtherWork)
        );
        if !took && !marked {
            return None;
        }
        Some(Box::pin(async move {
            if took {
                let (key, owner) = (undo_key.clone(), undo_owner.clone());
                release_unowned(undo_inner.clone(), key, undo_kind, owner, lease).await;
            }
            if marked {
                stop_waiting(undo_inner, undo_key, undo_kind, undo_owner).await;
            }
        }))
    });
    match abandon {
        Some(abandon) => operation.on_abandon(abandon),
        None => operation,
    }
}

/// The backend's attempt; for a fenced lock, an error if the backend took the lock without
/// a token (it has no fenced locks): what it took is given back at once.
pub(in crate::engine) fn checked(
    inner: &Arc<ManagerInner>,
    args: AcquireArgs,
) -> BoxFuture<Result<Attempt, BackendError>> {
    if !args.kind.rules().fenced {
        return inner.store().acquire(args);
    }
    let attempt = inner.store().acquire(args.clone());
    let inner = inner.clone();
    Box::pin(async move {
        match attempt.await? {
            Attempt::Acquired => {
                let undo = ReleaseArgs {
                    key: args.key,
                    kind: args.kind,
                    owner: args.owner,
                    lease: args.lease,
                    expected: args.expected + 1,
                    successor: None,
                    announce_run: None,
                    record: None,
                };
                let _ = inner.store().release(undo).await;
                Err(BackendError::new(format!(
                    "the {} lock backend gave no fencing token (it has no fenced locks)",
                    inner.store().name()
                )))
            }
            attempt => Ok(attempt),
        }
    })
}

/// The error of a backend that knows it cannot be reached now (the backend says why).
pub(in crate::engine) fn backend_down(inner: &ManagerInner) -> BackendError {
    inner.store().unavailable_reason()
}
