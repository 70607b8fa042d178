//! A waiter's place in this process's queue, as the acquisition holds it.

use std::sync::Arc;

use crate::engine::background::unowned::{release_unowned, stop_waiting};
use crate::engine::manager::shared::ManagerInner;
use crate::engine::request::acquire::want::Want;
use crate::telemetry::TARGET;
use crate::wait::Ticket;

/// A waiter's place in the queue, which releases a lock handed to it if it leaves without
/// taking it (its acquisition was dropped, or its wait ran out, just as a release handed
/// it the lock).
pub(in crate::engine) struct QueuedWaiter<'a> {
    ticket: Option<Ticket>,
    inner: &'a Arc<ManagerInner>,
    want: &'a Want,
}

impl<'a> QueuedWaiter<'a> {
    pub(in crate::engine) fn new(
        ticket: Ticket,
        inner: &'a Arc<ManagerInner>,
        want: &'a Want,
    ) -> Self {
        QueuedWaiter {
            ticket: Some(ticket),
            inner,
            want,
        }
    }

    pub(in crate::engine) fn ticket(&self) -> &Ticket {
        self.ticket
            .as_ref()
            .expect("the ticket is kept until acquired")
    }

    /// The waiter has the lock: it leaves the queue as its holder.
    pub(in crate::engine) fn acquired(&mut self) {
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
