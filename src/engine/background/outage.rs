//! Waiting on a backend operation without waiting on a lost connection.
//!
//! While the Redis client knows its connection is down, operations fail at once. But one
//! sent in the instant between the connection dropping and the client noticing waits in
//! fred's queue behind its reconnect, until Redis is back or the command time limit runs
//! out (measured: a request per client held for the whole 30 s limit when Redis was
//! killed under load). So a pending operation is given up once the backend reports its
//! connection lost ([`Notices::connection_lost`]) and says it cannot be reached.
//! Giving up drops the operation's future, which is safe: backend operations are
//! [`DropSafe`], so one that still lands later is finished in the background and undone
//! there.
//!
//! A waiter already queued is different: it waits anyway, so its attempts wait for their
//! answer (an attempt held behind a reconnect is sent once Redis is back) until the
//! waiter's own deadline, with [`answer_by`].
//!
//! [`Notices::connection_lost`]: crate::backend::Notices::connection_lost
//! [`DropSafe`]: crate::engine::background::drop_safe::DropSafe

use std::future::Future;
use std::pin::pin;
use std::task::Poll;

use tokio::time::Instant;

use crate::engine::manager::shared::ManagerInner;

/// Why a pending operation was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GaveUp {
    /// The caller's deadline passed.
    Deadline,
    /// The backend cannot be reached.
    Unreachable,
}

/// Awaits `operation` until `deadline` (`None`: none of its own), giving up early when the
/// backend cannot be reached. `operation` must be safe to drop at any point.
///
/// One poll of `operation` per wake-up (a poll goes through the settle, the batch and
/// fred: polling it twice per wake-up cost some 1,300 instructions per lock).
pub(crate) async fn answer_within<F: Future>(
    operation: F,
    deadline: Option<Instant>,
    inner: &ManagerInner,
) -> Result<F::Output, GaveUp> {
    let mut operation = pin!(operation);
    if inner.store().answers_at_once() {
        // In-process: nothing to lose a connection to; only the deadline counts.
        return match deadline {
            None => Ok(operation.await),
            Some(deadline) => tokio::time::timeout_at(deadline, operation)
                .await
                .map_err(|_| GaveUp::Deadline),
        };
    }
    // Listening before the first poll sends anything: an operation that can be held up by
    // a connection lost later is always woken then.
    let mut outage = pin!(inner.queues().outage());
    outage.as_mut().enable();
    let mut timer = pin!(deadline.map(tokio::time::sleep_until));
    let mut first = true;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = operation.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        // Sent while the connection was already known lost (a release re-sent after an
        // error, say), or woken by its loss.
        let mut look = std::mem::take(&mut first);
        while outage.as_mut().poll(cx).is_ready() {
            look = true;
            outage.set(inner.queues().outage());
        }
        if look && !inner.store().is_available() {
            return Poll::Ready(Err(GaveUp::Unreachable));
        }
        let expired = timer
            .as_mut()
            .as_pin_mut()
            .is_some_and(|timer| timer.poll(cx).is_ready());
        if expired {
            return Poll::Ready(Err(GaveUp::Deadline));
        }
        Poll::Pending
    })
    .await
}

/// Awaits a queued waiter's `operation` until `deadline`, whether or not the backend can be
/// reached meanwhile: the waiter waits anyway, and an attempt held behind a reconnect is
/// answered once the backend is back (or fails by itself, and the waiter tries again).
/// `operation` must be safe to drop at any point.
pub(crate) async fn answer_by<F: Future>(
    operation: F,
    deadline: Instant,
) -> Result<F::Output, GaveUp> {
    tokio::time::timeout_at(deadline, operation)
        .await
        .map_err(|_| GaveUp::Deadline)
}
