//! Locks taken in a name that no holder will release: an abandoned attempt that may have
//! landed, or a hand-over to a waiter that left. They are released in the background.

use std::sync::Arc;
use std::time::Duration;

use super::acquire::Want;
use super::manager::ManagerInner;
use crate::backend::{BoxFuture, LeaveArgs, ReleaseArgs};
use crate::error::Released;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;
use crate::telemetry::TARGET;
use crate::wait::{Ticket, Wake};

/// Releases a lock taken in `owner`'s name that no holder will release: an abandoned
/// attempt that may have landed, or a hand-over to a waiter that had left. Releasing what
/// was never taken changes nothing.
pub(super) fn release_unowned(
    inner: Arc<ManagerInner>,
    key: LockKey,
    kind: LockKind,
    owner: OwnerId,
    lease: Duration,
) -> BoxFuture<()> {
    Box::pin(async move {
        let undo = ReleaseArgs {
            key: key.clone(),
            kind,
            owner,
            lease,
            expected: 1,
            successor: None,
            announce_run: None,
            record: None,
        };
        let result = inner.store().release(undo).await;
        if matches!(result, Ok(reply) if reply.released == Released::Unlocked) {
            inner.queues().released_locally(&key, Wake::Now);
        }
    })
}

/// Tells the backend that `owner`, a waiter of `key`, stopped waiting (a writer takes back
/// the mark of its wait; see [`Backend::leave_queue`]). Failing, the mark runs out with
/// its lease.
///
/// [`Backend::leave_queue`]: crate::backend::Backend::leave_queue
pub(super) fn stop_waiting(
    inner: Arc<ManagerInner>,
    key: LockKey,
    kind: LockKind,
    owner: OwnerId,
) -> BoxFuture<()> {
    Box::pin(async move {
        let args = LeaveArgs {
            key,
            kind,
            owner,
            queue_timeout: Duration::ZERO,
        };
        if let Err(error) = inner.store().leave_queue(args).await {
            tracing::debug!(target: TARGET, %error, "tower-lock: a waiting writer could not take back its mark; it runs out with its lease");
        }
    })
}

/// A waiter's place in the queue, which releases a lock handed to it if it leaves without
/// taking it (its acquisition was dropped, or its wait ran out, just as a release handed
/// it the lock).
pub(super) struct QueuedWaiter<'a> {
    ticket: Option<Ticket>,
    inner: &'a Arc<ManagerInner>,
    want: &'a Want,
}

impl<'a> QueuedWaiter<'a> {
    pub(super) fn new(ticket: Ticket, inner: &'a Arc<ManagerInner>, want: &'a Want) -> Self {
        QueuedWaiter {
            ticket: Some(ticket),
            inner,
            want,
        }
    }

    pub(super) fn ticket(&self) -> &Ticket {
        self.ticket
            .as_ref()
            .expect("the ticket is kept until acquired")
    }

    /// The waiter has the lock: it leaves the queue as its holder.
    pub(super) fn acquired(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            ticket.acquired(self.want.lease);
        }
    }
}

impl Drop for QueuedWaiter<'_> {
    fn drop(&mut self) {
        let Some(mut ticket) = self.ticket.take() else {
            return;
        };
        let orphaned = ticket.leave();
        let want = self.want;
        // A writer that waited behind readers marked its wait in the backend.
        let marked = want.kind.rules().marks_waiting;
        if orphaned.is_none() && !marked {
            return;
        }
        let Some(runtime) = self.inner.runtime() else {
            tracing::warn!(target: TARGET, key = %want.key, "tower-lock: a waiter left outside a Tokio runtime; what it holds or marked ends with its lease");
            return;
        };
        if let Some(owner) = orphaned {
            let release = release_unowned(
                self.inner.clone(),
                want.key.clone(),
                want.kind,
                owner,
                want.lease,
            );
            drop(runtime.spawn(release));
        }
        if marked {
            let leave = stop_waiting(
                self.inner.clone(),
                want.key.clone(),
                want.kind,
                want.owner.clone(),
            );
            drop(runtime.spawn(leave));
        }
    }
}
