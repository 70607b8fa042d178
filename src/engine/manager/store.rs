//! The engine's view of its backend: the public [`Backend`] trait, what the backend has
//! ([`Capabilities`], asked once), and the in-process fast path.
//!
//! A backend that answers at once (the memory backend) takes and frees locks without a
//! future, its allocation or the background undo a future needs (the HTTP layer takes the
//! lock inside `Lock::call`). Any other backend goes through the trait's futures.

use std::any::Any;
use std::sync::Arc;

use tokio::time::Instant;

use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, ForceUnlocked, LeaveArgs, LockInfo,
    MemoryBackend, Notices, PermitUsage, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::{BackendError, LockError};
use crate::key::LockKey;
use crate::kind::LockKind;

/// A manager's backend, with what it has (asked once, when the manager is built).
pub(crate) struct Store {
    backend: Backend_,
    capabilities: Capabilities,
}

/// The backend itself: the memory backend is called directly (its calls inline on the
/// uncontended path), any other through the trait object.
enum Backend_ {
    InProcess(MemoryBackend),
    Other(Arc<dyn Backend>),
}

impl Store {
    pub(crate) fn new<B: Backend>(backend: B) -> Store {
        let capabilities = backend.capabilities();
        let backend: Box<dyn Any> = Box::new(backend);
        let backend = match backend.downcast::<MemoryBackend>() {
            Ok(memory) => Backend_::InProcess(*memory),
            Err(other) => {
                let backend = other
                    .downcast::<B>()
                    .unwrap_or_else(|_| unreachable!("the box holds a `B`"));
                Backend_::Other(Arc::new(*backend))
            }
        };
        Store {
            backend,
            capabilities,
        }
    }

    fn backend(&self) -> &dyn Backend {
        match &self.backend {
            Backend_::InProcess(memory) => memory,
            Backend_::Other(backend) => &**backend,
        }
    }

    /// Whether [`acquire_now`](Self::acquire_now) and [`release_now`](Self::release_now)
    /// answer (see [`Capabilities::answers_at_once`]): a hold granted while no waiter is
    /// queued near the name takes no claim in the wait queues, and its release relies on
    /// the backend's order to see a waiter that queued meanwhile (see
    /// `WaitQueues::may_be_queued`).
    pub(crate) fn answers_at_once(&self) -> bool {
        self.capabilities.answers_at_once
    }

    /// An acquisition answered at once by an in-process backend (`None`: use
    /// [`acquire`](Self::acquire)). An answer is final: an error means nothing was taken.
    /// `sent`: the time read just before, from which the caller counts the lease (the
    /// table's lease runs from the same instant).
    #[inline]
    pub(crate) fn acquire_now(
        &self,
        args: &AcquireArgs,
        sent: Instant,
    ) -> Option<Result<Attempt, BackendError>> {
        match &self.backend {
            Backend_::InProcess(memory) => memory.acquire_now(args, sent),
            Backend_::Other(backend) => backend.acquire_now(args, sent),
        }
    }

    /// A release answered at once, like [`acquire_now`](Self::acquire_now).
    #[inline]
    pub(crate) fn release_now(
        &self,
        args: &ReleaseArgs,
    ) -> Option<Result<ReleaseReply, BackendError>> {
        match &self.backend {
            Backend_::InProcess(memory) => memory.release_now(args),
            Backend_::Other(backend) => backend.release_now(args),
        }
    }

    /// Refuses what the backend does not have before anything reaches it: a kind it does
    /// not store, a lock with a record without records.
    #[inline]
    pub(crate) fn check(&self, kind: LockKind, records: bool) -> Result<(), LockError> {
        if self.supports(kind, records) {
            Ok(())
        } else {
            Err(self.unsupported(kind, records))
        }
    }

    /// Whether the backend has `kind` (and records, when asked for).
    #[inline]
    pub(crate) fn supports(&self, kind: LockKind, records: bool) -> bool {
        self.capabilities.kinds.contains(kind) && (!records || self.capabilities.records)
    }

    /// The error for what [`supports`](Self::supports) says the backend lacks.
    #[cold]
    pub(crate) fn unsupported(&self, kind: LockKind, records: bool) -> LockError {
        let what = if self.capabilities.kinds.contains(kind) && records {
            "locks with a record".to_owned()
        } else {
            match (self.capabilities.why_missing)(kind) {
                Some(why) => format!("{} locks ({why})", kind.name()),
                None => format!("{} locks", kind.name()),
            }
        };
        LockError::Unsupported {
            backend: self.name(),
            what,
        }
    }

    /// Refuses an operator's request (inspect, force-unlock, list) of a backend that does
    /// not answer them.
    pub(crate) fn check_inspects(&self) -> Result<(), LockError> {
        if self.capabilities.inspects {
            return Ok(());
        }
        Err(LockError::Unsupported {
            backend: self.name(),
            what: "inspection, force-unlock and listing".to_owned(),
        })
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
        self.capabilities
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
