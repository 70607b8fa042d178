//! What an acquisition asks for, what it is granted, and the hold and guard made of it.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::AcquireArgs;
use crate::engine::background::renewal::Keeper;
use crate::engine::hold::guard::LockGuard;
use crate::engine::hold::{Hold, NewHold};
use crate::engine::manager::shared::ManagerInner;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;
use crate::wait::Claim;

/// A watchdog not started yet: the HTTP layer starts it only for a handler that does not
/// finish at once (see [`LockGuard::keep_alive`]).
pub(crate) type PendingWatchdog = Keeper;

/// A held lock, with its watchdog when the caller drives it itself.
pub(crate) type Acquired = (LockGuard, Option<PendingWatchdog>);

/// What is asked for: a lock, its kind, by whom, and for how long.
#[derive(Clone)]
pub(in crate::engine) struct Want {
    pub(in crate::engine) key: LockKey,
    pub(in crate::engine) kind: LockKind,
    pub(in crate::engine) owner: OwnerId,
    pub(in crate::engine) lease: Duration,
    /// Whether a watchdog renews the lease (no fixed lease).
    pub(in crate::engine) renewed: bool,
    /// Take the lock only if it has no record (else the acquisition ends with
    /// [`LockError::Recorded`]).
    pub(in crate::engine) unless_recorded: bool,
    /// The work it is taken for (with `unless_recorded`; boxed, as most acquisitions name
    /// none and this is moved about).
    pub(in crate::engine) work: Option<Box<bytes::Bytes>>,
}

impl Want {
    /// The backend arguments of a first acquisition; `wait_left`: how long the acquirer
    /// goes on waiting if it finds the lock busy (`None`: a single try).
    #[inline]
    pub(in crate::engine) fn args(&self, wait_left: Option<Duration>) -> AcquireArgs {
        AcquireArgs {
            key: self.key.clone(),
            kind: self.kind,
            owner: self.owner.clone(),
            lease: self.lease,
            expected: 0,
            waits: wait_left.is_some(),
            unless_recorded: self.unless_recorded,
            work: self.work.as_deref().cloned(),
            queue_timeout: Duration::ZERO,
            was_head: false,
            wait_left: wait_left.unwrap_or_default(),
        }
    }

    /// The hold of this owner, its lease running from `acquired_at`, with the watchdog
    /// scheduled (`spawn_watchdog`) or handed back unstarted.
    #[inline]
    pub(in crate::engine) fn hold(
        self,
        manager: Arc<ManagerInner>,
        acquired_at: Instant,
        claim: Option<Claim>,
        token: Option<u64>,
        spawn_watchdog: bool,
    ) -> Acquired {
        let renewed = self.renewed;
        let lease = self.lease;
        let hold = Hold::new(NewHold {
            manager,
            key: self.key,
            kind: self.kind,
            owner: self.owner,
            lease,
            renewed,
            acquired_at,
            claim,
        });
        if !renewed {
            return (LockGuard::new(hold, token), None);
        }
        let keeper = Keeper::new(lease);
        if spawn_watchdog {
            // The hold was just made: its lease runs from `acquired_at`.
            let due = keeper.due_after(acquired_at);
            hold.manager()
                .renewals()
                .schedule(hold.clone(), keeper, due);
            (LockGuard::new(hold, token), None)
        } else {
            (LockGuard::new(hold, token), Some(keeper))
        }
    }
}

/// The lock, granted: when its lease started (the attempt or the release that handed it
/// over was sent), this process's claim on the name, and a fenced lock's token.
pub(in crate::engine) struct Grant {
    pub(in crate::engine) lease_from: Instant,
    pub(in crate::engine) claim: Claim,
    pub(in crate::engine) token: Option<u64>,
}
