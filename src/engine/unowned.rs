//! Locks taken in a name that no holder will release: an abandoned attempt that may have
//! landed, or a hand-over to a waiter that left. They are released in the background.

use std::sync::Arc;
use std::time::Duration;

use super::acquire::Want;
use super::manager::ManagerInner;
use crate::backend::{BoxFuture, ReleaseArgs};
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
        };
        let result = inner.store().release(undo).await;
        if matches!(result, Ok(reply) if reply.released == Released::Unlocked) {
            inner.queues().released_locally(&key, Wake::Now);
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
        let Some(owner) = ticket.leave() else {
            return;
        };
        let want = self.want;
        let release = release_unowned(
            self.inner.clone(),
            want.key.clone(),
            want.kind,
            owner,
            want.lease,
        );
        match self.inner.runtime() {
            Some(runtime) => drop(runtime.spawn(release)),
            None => {
                tracing::warn!(target: TARGET, key = %want.key, "tower-lock: a lock handed to a waiter that left outside a Tokio runtime ends with its lease")
            }
        }
    }
}
