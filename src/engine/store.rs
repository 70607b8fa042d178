//! The engine's view of its backend: the public [`Backend`] trait, and the in-process fast
//! path of the memory backend behind this one seam.
//!
//! The memory backend answers at once, so for it the engine takes and frees locks without
//! a future, its allocation or the background undo a future needs (the HTTP layer takes
//! the lock inside `Lock::call`). Any other backend goes through the trait's futures.

use std::any::Any;
use std::sync::Arc;

use tokio::time::Instant;

use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, FairArgs, FairAttempt, ForceUnlocked,
    LeaveArgs, LockInfo, MemoryBackend, Notices, PermitUsage, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::BackendError;
use crate::key::LockKey;

/// A manager's backend.
pub(crate) enum Store {
    /// The memory backend: answers at once.
    InProcess(MemoryBackend),
    /// Any other.
    Backend(Arc<dyn Backend>),
}

impl Store {
    pub(crate) fn new<B: Backend>(backend: B) -> Store {
        let backend: Box<dyn Any> = Box::new(backend);
        match backend.downcast::<MemoryBackend>() {
            Ok(memory) => Store::InProcess(*memory),
            Err(other) => {
                let backend = other
                    .downcast::<B>()
                    .unwrap_or_else(|_| unreachable!("the box holds a `B`"));
                Store::Backend(Arc::new(*backend))
            }
        }
    }

    fn backend(&self) -> &dyn Backend {
        match self {
            Store::InProcess(memory) => memory,
            Store::Backend(backend) => &**backend,
        }
    }

    /// Whether [`acquire_now`](Self::acquire_now) and [`release_now`](Self::release_now)
    /// answer. The memory backend applies the operations on one name one at a time (a
    /// mutex per shard of names): a hold it grants while no waiter is queued near the name
    /// takes no claim in the wait queues, and its release relies on that order to see a
    /// waiter that queued meanwhile (see `WaitQueues::may_be_queued`).
    pub(crate) fn answers_at_once(&self) -> bool {
        matches!(self, Store::InProcess(_))
    }

    /// An acquisition answered at once by an in-process backend (`None`: use
    /// [`acquire`](Self::acquire)). An answer is final: an error means nothing was taken.
    /// `sent`: the time read just before, from which the caller counts the lease (the
    /// table's lease runs from the same instant).
    pub(crate) fn acquire_now(
        &self,
        args: &AcquireArgs,
        sent: Instant,
    ) -> Option<Result<Attempt, BackendError>> {
        match self {
            Store::InProcess(memory) => Some(memory.take(args, sent)),
            Store::Backend(_) => None,
        }
    }

    /// A release answered at once, like [`acquire_now`](Self::acquire_now).
    pub(crate) fn release_now(
        &self,
        args: &ReleaseArgs,
    ) -> Option<Result<ReleaseReply, BackendError>> {
        match self {
            Store::InProcess(memory) => Some(memory.drop_one(args)),
            Store::Backend(_) => None,
        }
    }

    pub(crate) fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        self.backend().acquire(args)
    }

    pub(crate) fn release(
        &self,
        args: ReleaseArgs,
    ) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        self.backend().release(args)
    }

    pub(crate) fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        self.backend().renew(args)
    }

    pub(crate) fn fair_acquire(
        &self,
        args: FairArgs,
    ) -> BoxFuture<Result<FairAttempt, BackendError>> {
        self.backend().fair_acquire(args)
    }

    pub(crate) fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        self.backend().leave_queue(args)
    }

    pub(crate) fn set_semaphore_limit(
        &self,
        key: LockKey,
        limit: u32,
    ) -> BoxFuture<Result<(), BackendError>> {
        self.backend().set_semaphore_limit(key, limit)
    }

    pub(crate) fn semaphore_usage(
        &self,
        key: LockKey,
    ) -> BoxFuture<Result<PermitUsage, BackendError>> {
        self.backend().semaphore_usage(key)
    }

    pub(crate) fn inspect(&self, key: LockKey) -> BoxFuture<Result<LockInfo, BackendError>> {
        self.backend().inspect(key)
    }

    pub(crate) fn force_unlock(
        &self,
        key: LockKey,
    ) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        self.backend().force_unlock(key)
    }

    pub(crate) fn list_names(
        &self,
        pattern: String,
        limit: usize,
    ) -> BoxFuture<Result<Vec<LockKey>, BackendError>> {
        self.backend().list_names(pattern, limit)
    }

    pub(crate) fn listen(&self, notices: Notices) {
        self.backend().listen(notices)
    }

    pub(crate) fn capabilities(&self) -> Capabilities {
        self.backend().capabilities()
    }

    pub(crate) fn is_available(&self) -> bool {
        self.backend().is_available()
    }

    pub(crate) fn unavailable_reason(&self) -> BackendError {
        self.backend().unavailable_reason()
    }

    pub(crate) fn check_key(&self, key: &LockKey) -> Result<(), String> {
        self.backend().check_key(key)
    }

    pub(crate) fn name(&self) -> &'static str {
        self.backend().name()
    }
}
