//! Locks taken in a name that no holder will release: an abandoned attempt that may have
//! landed, or a hand-over to a waiter that left. They are released in the background.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{BoxFuture, LeaveArgs, ReleaseArgs};
use crate::engine::manager::shared::ManagerInner;
use crate::error::Released;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;
use crate::telemetry::TARGET;
use crate::wait::Wake;

/// Releases a lock taken in `owner`'s name that no holder will release: an abandoned
/// attempt that may have landed, or a hand-over to a waiter that had left. Releasing what
/// was never taken changes nothing.
pub(in crate::engine) fn release_unowned(
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
pub(in crate::engine) fn stop_waiting(
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
