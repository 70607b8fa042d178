//! One owner's hold on a lock, shared by the guards of its reentrant acquisitions: what
//! it is (key, kind, owner, lease) and its state (count, loss, renewal gate, claim), each
//! behind methods.

pub(in crate::engine) mod count_lock;
pub(in crate::engine) mod guard;
pub(in crate::engine) mod loss;
pub(in crate::engine) mod multi_guard;
pub(in crate::engine) mod reentry;
pub(in crate::engine) mod release;
#[cfg(feature = "axum")]
pub(in crate::engine) mod view;

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Span;

use crate::backend::BoxFuture;
use crate::backend::{AcquireArgs, LockRecord, ReleaseArgs, RenewArgs, Successor};
use crate::engine::background::renewal::{RenewGate, Renewable};
use crate::engine::hold::count_lock::{Count, Counts};
use crate::engine::hold::loss::Loss;
use crate::engine::manager::registry::Listed;
use crate::engine::manager::shared::ManagerInner;
use crate::error::BackendError;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;
use crate::telemetry;
use crate::wait::Claim;

/// One owner's hold on a lock.
pub(crate) struct Hold {
    manager: Arc<ManagerInner>,
    key: LockKey,
    kind: LockKind,
    owner: OwnerId,
    lease: Duration,
    /// Whether a watchdog renews the lease (no fixed lease).
    renewed: bool,
    /// The owner's count in the backend; locked around every change so that each change
    /// is sent with the count it expects.
    count: Count,
    /// When the lease may end, and whether the lock was found lost.
    loss: Loss,
    /// Closed before the last release: no renewal after it. Also keeps the hold's place in
    /// the manager's renewal schedule.
    gate: RenewGate,
    /// This process's claim on the name, ended by the last release (`None` from the
    /// start for a hold that the in-process backend granted without one).
    claim: Mutex<Option<Claim>>,
    /// When the acquisition that took the lock was sent (for the hold time).
    acquired_at: Instant,
    /// The span open while the lock is held, closed by the last release; `None` when
    /// nobody listens (no lock to take on each release then).
    span: Option<Mutex<Option<Span>>>,
    /// The request it was taken for (set by the HTTP layer).
    label: OnceLock<crate::engine::manager::registry::RequestLabel>,
    /// Its place in the manager's list of live holds (`None`: holds are not listed).
    listed: Option<usize>,
}

/// What a new hold is made of.
pub(in crate::engine) struct NewHold {
    pub(in crate::engine) manager: Arc<ManagerInner>,
    pub(in crate::engine) key: LockKey,
    pub(in crate::engine) kind: LockKind,
    pub(in crate::engine) owner: OwnerId,
    pub(in crate::engine) lease: Duration,
    pub(in crate::engine) renewed: bool,
    /// When the acquisition that took it was sent: the lease runs from there.
    pub(in crate::engine) acquired_at: Instant,
    pub(in crate::engine) claim: Option<Claim>,
}

impl Hold {
    /// A hold with one count, its lease running from `acquired_at`.
    #[inline]
    pub(in crate::engine) fn new(new: NewHold) -> Arc<Hold> {
        let margin = new.manager.loss_margin(new.lease);
        let span = telemetry::hold_span(&new.key, new.kind, &new.owner);
        let track = new.manager.settings().track_holds;
        Arc::new_cyclic(|hold| {
            // Listed before it can be seen: `local_holds` skips a hold it cannot upgrade.
            let listed = track.then(|| {
                let hold: std::sync::Weak<dyn Listed> = hold.clone() as _;
                new.manager.registry().add(&new.key, hold)
            });
            Hold {
                loss: Loss::new(new.acquired_at + new.lease, margin),
                manager: new.manager,
                key: new.key,
                kind: new.kind,
                owner: new.owner,
                lease: new.lease,
                renewed: new.renewed,
                count: Count::new(1),
                gate: RenewGate::default(),
                claim: Mutex::new(new.claim),
                acquired_at: new.acquired_at,
                span: (!span.is_disabled()).then(|| Mutex::new(Some(span))),
                label: OnceLock::new(),
                listed,
            }
        })
    }

    /// Records the request it was taken for (the first one recorded stays).
    #[cfg(feature = "axum")]
    pub(crate) fn set_label(&self, label: crate::engine::manager::registry::RequestLabel) {
        let _ = self.label.set(label);
    }

    pub(crate) fn manager(&self) -> &Arc<ManagerInner> {
        &self.manager
    }

    pub(crate) fn key(&self) -> &LockKey {
        &self.key
    }

    pub(crate) fn kind(&self) -> LockKind {
        self.kind
    }

    pub(crate) fn owner(&self) -> &OwnerId {
        &self.owner
    }

    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    /// Whether a watchdog renews the lease.
    pub(crate) fn is_renewed(&self) -> bool {
        self.renewed
    }

    pub(crate) fn loss(&self) -> &Loss {
        &self.loss
    }

    /// The lock was found lost: fires the loss signal (counted once per hold).
    pub(crate) fn mark_lost(&self) {
        self.loss.fire(|| telemetry::lost(self.kind));
    }

    /// The span open while the lock is held (none once it was released).
    pub(in crate::engine) fn span(&self) -> Span {
        let Some(span) = &self.span else {
            return Span::none();
        };
        let span = span.lock().unwrap_or_else(|e| e.into_inner());
        span.clone().unwrap_or_else(Span::none)
    }

    /// Closes the hold's span: the last release was answered.
    pub(in crate::engine) fn end_span(&self) {
        if let Some(span) = &self.span {
            drop(span.lock().unwrap_or_else(|e| e.into_inner()).take());
        }
    }

    /// How long the lock has been held (since its acquisition was sent).
    pub(in crate::engine) fn held_for(&self) -> Duration {
        self.acquired_at.elapsed()
    }

    pub(in crate::engine) fn gate(&self) -> &RenewGate {
        &self.gate
    }

    /// The claim, taken by the last release.
    pub(in crate::engine) fn take_claim(&self) -> Option<Claim> {
        self.claim.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// One more hold for this owner, which has `expected` already.
    pub(in crate::engine) fn acquire_args(&self, expected: u32) -> AcquireArgs {
        AcquireArgs {
            key: self.key.clone(),
            kind: self.kind,
            owner: self.owner.clone(),
            lease: self.lease,
            expected,
            waits: false,
            unless_recorded: false,
            work: None,
            queue_timeout: Duration::ZERO,
            was_head: false,
            wait_left: Duration::ZERO,
        }
    }

    /// One hold fewer for this owner, which has `expected`; the last may go to `successor`
    /// (or, freeing the lock, announce the run it ends, or store a record).
    pub(in crate::engine) fn release_args(
        &self,
        expected: u32,
        successor: Option<Successor>,
        announce_run: Option<u32>,
        record: Option<LockRecord>,
    ) -> ReleaseArgs {
        ReleaseArgs {
            key: self.key.clone(),
            kind: self.kind,
            owner: self.owner.clone(),
            lease: self.lease,
            expected,
            successor,
            announce_run,
            record,
        }
    }

    /// The lease set again.
    pub(in crate::engine) fn renew_args(&self) -> RenewArgs {
        RenewArgs {
            key: self.key.clone(),
            kind: self.kind,
            owner: self.owner.clone(),
            lease: self.lease,
        }
    }
}

impl Renewable for Hold {
    fn key(&self) -> &LockKey {
        &self.key
    }

    fn owner(&self) -> &OwnerId {
        &self.owner
    }

    fn kind(&self) -> LockKind {
        self.kind
    }

    fn loss(&self) -> &Loss {
        &self.loss
    }

    fn gate(&self) -> &RenewGate {
        &self.gate
    }

    fn renew(&self) -> BoxFuture<Result<bool, BackendError>> {
        self.manager.store().renew(self.renew_args())
    }

    fn mark_lost(&self) {
        Hold::mark_lost(self);
    }

    fn runtime(&self) -> Option<tokio::runtime::Handle> {
        self.manager.runtime()
    }
}

impl Counts for Hold {
    fn count(&self) -> &Count {
        &self.count
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(place) = self.listed {
            self.manager.registry().remove(&self.key, place);
        }
    }
}

impl Listed for Hold {
    fn is_held_by(&self, key: &LockKey, owner: &OwnerId) -> bool {
        self.key == *key && self.owner == *owner
    }

    fn mark_lost(&self) {
        Hold::mark_lost(self);
    }

    fn local_view(&self) -> crate::engine::manager::registry::LocalHold {
        crate::engine::manager::registry::LocalHold {
            key: self.key.clone(),
            kind: self.kind,
            owner: self.owner.clone(),
            held_for: self.acquired_at.elapsed(),
            renewed: self.renewed,
            lost: self.loss.is_lost(),
            request: self.label.get().cloned(),
        }
    }
}
