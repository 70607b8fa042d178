//! Locks taken in a name that no holder will release: an abandoned attempt that may have
//! landed, or a hand-over to a waiter that left. They are released in the background.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{BoxFuture, ReleaseArgs};
use crate::key::{LockKey, OwnerId};
use crate::manager::ManagerInner;
use crate::wait::{Ticket, Wake};

/// Releases a lock taken in `owner`'s name that no holder will release: an abandoned
/// attempt that may have landed, or a hand-over to a waiter that had left. Releasing what
/// was never taken changes nothing.
pub(crate) fn release_unowned(
    inner: Arc<ManagerInner>,
    key: LockKey,
    owner: OwnerId,
    lease: Duration,
) -> BoxFuture<()> {
    Box::pin(async move {
        let undo = ReleaseArgs {
            key: key.clone(),
            owner,
            lease,
            expected: 1,
            successor: None,
        };
        let unlock_expected = inner.queues.expect_unlock(&key);
        let result = inner.backend.release(undo).await;
        let unlocked = matches!(result, Ok(reply) if reply.released == crate::Released::Unlocked);
        if unlock_expected {
            inner.queues.unlock_settled(&key, unlocked);
        }
        if unlocked {
            inner.queues.released_locally(&key, Wake::Now);
        }
    })
}

/// A waiter's place in the queue, which releases a lock handed to it if it leaves without
/// taking it (its acquisition was dropped, or its wait ran out, just as a release handed
/// it the lock).
pub(crate) struct Queued<'a> {
    pub(crate) ticket: Option<Ticket>,
    pub(crate) inner: &'a Arc<ManagerInner>,
    pub(crate) key: &'a LockKey,
    pub(crate) lease: Duration,
}

impl Queued<'_> {
    pub(crate) fn get(&self) -> &Ticket {
        self.ticket
            .as_ref()
            .expect("the ticket is kept until acquired")
    }

    /// The waiter has the lock: it leaves the queue as its holder.
    pub(crate) fn acquired(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            ticket.acquired(self.lease);
        }
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        let Some(mut ticket) = self.ticket.take() else {
            return;
        };
        let Some(owner) = ticket.leave() else {
            return;
        };
        let release = release_unowned(self.inner.clone(), self.key.clone(), owner, self.lease);
        match self.inner.runtime() {
            Some(runtime) => drop(runtime.spawn(release)),
            None => {
                tracing::warn!(key = %self.key, "tower-lock: a lock handed to a waiter that left outside a Tokio runtime ends with its lease")
            }
        }
    }
}
