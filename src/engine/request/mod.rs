//! A lock request: which lock, how long to wait, which lease; then the acquisition.

pub(in crate::engine) mod acquire;
pub(in crate::engine) mod multi;
mod records;
pub(in crate::engine) mod semaphore;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{Instrument, Span};

use crate::backend::Attempt;
use crate::engine::hold::guard::LockGuard;
use crate::engine::manager::settings::bounded_lease;
use crate::engine::manager::shared::ManagerInner;
use crate::engine::request::acquire::{Acquired, Acquisition, FairAcquisition, Grant, Want};
use crate::error::{BackendError, LockError};
use crate::key::LockKey;
use crate::kind::{LockKind, WaitsIn};
use crate::telemetry;

/// A lock request: set how long to wait and the lease, then `acquire`. For one lock
/// (`LockRequest`, from [`LockManager::lock`](crate::LockManager::lock) and the other kinds'
/// constructors) or several held together ([`MultiLockRequest`], from
/// [`LockManager::multi_lock`](crate::LockManager::multi_lock)): the settings are the same,
/// the acquisition and its guard differ.
#[must_use = "nothing happens until `acquire` is awaited"]
pub struct LockRequest<Names = OneName> {
    pub(in crate::engine) manager: Arc<ManagerInner>,
    pub(in crate::engine) names: Names,
    pub(in crate::engine) kind: LockKind,
    pub(in crate::engine) wait: Duration,
    pub(in crate::engine) fixed_lease: Option<Duration>,
    /// The caller already waits (a multi-lock's parts after the first busy one): no
    /// failing fast while the backend cannot be reached; an outage is ridden out while the
    /// wait lasts, as by a waiter already queued.
    waiting_already: bool,
    /// `Some`: take the lock only if it has no record (see
    /// [`unless_recorded`](Self::unless_recorded)), for the work it names, if any
    /// ([`unless_recorded_for`](Self::unless_recorded_for)). Boxed: most requests ask for
    /// neither, and every request is moved about.
    unless_recorded: Option<Box<Option<bytes::Bytes>>>,
}

/// What a [`LockRequest`] for one lock names: its key, or why the name is invalid.
#[derive(Debug)]
pub struct OneName(pub(in crate::engine) Result<LockKey, LockError>);

/// What a [`MultiLockRequest`] names: its keys (sorted, each once), or why a name is
/// invalid.
#[derive(Debug)]
pub struct ManyNames(pub(in crate::engine) Result<Vec<LockKey>, LockError>);

/// A request for several locks held together, all or nothing (see
/// [`LockManager::multi_lock`](crate::LockManager::multi_lock)).
pub type MultiLockRequest = LockRequest<ManyNames>;

impl<Names: std::fmt::Debug> std::fmt::Debug for LockRequest<Names> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockRequest")
            .field("names", &self.names)
            .field("kind", &self.kind)
            .field("wait", &self.wait)
            .field("fixed_lease", &self.fixed_lease)
            .finish()
    }
}

impl<Names> LockRequest<Names> {
    pub(in crate::engine) fn with_names(
        manager: Arc<ManagerInner>,
        names: Names,
        kind: LockKind,
    ) -> Self {
        let wait = manager.settings().wait;
        LockRequest {
            manager,
            names,
            kind,
            wait,
            fixed_lease: None,
            waiting_already: false,
            unless_recorded: None,
        }
    }

    /// How long `acquire` waits before it fails with [`LockError::TimedOut`] (for a
    /// multi-lock, in all, for every part). `Duration::ZERO` tries once.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// A fixed lease: the lock ends after `lease` unless released, and no watchdog renews
    /// it (without this, the manager's [lease](crate::manager::LockManagerBuilder::lease) is renewed
    /// every third of it while the guard lives; for a multi-lock, each part's lease runs
    /// from its own acquisition). Values under 1 ms are raised to 1 ms, values over
    /// [`MAX_LEASE`](crate::manager::MAX_LEASE) (about 100 years) lowered to it.
    pub fn fixed_lease(mut self, lease: Duration) -> Self {
        self.fixed_lease = Some(bounded_lease(lease));
        self
    }

    /// The caller already waits: see the field `waiting_already`.
    pub(in crate::engine) fn waiting_already(mut self) -> Self {
        self.waiting_already = true;
        self
    }
}

impl LockRequest {
    pub(in crate::engine) fn new(
        manager: Arc<ManagerInner>,
        key: Result<LockKey, LockError>,
        kind: LockKind,
    ) -> Self {
        // A kind the backend does not store is refused with the request's name error.
        Self::with_names(manager, OneName(key), kind)
    }

    /// Tries once, without waiting: [`acquire`](Self::acquire) with a zero wait.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); [`LockError::TimedOut`] when the lock is busy.
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub fn try_acquire(self) -> impl Future<Output = Result<LockGuard, LockError>> + Send {
        self.wait(Duration::ZERO).acquire()
    }

    /// Acquires the lock, waiting up to the wait time.
    ///
    /// # Errors
    /// - [`LockError::TimedOut`]: another owner held the lock for the whole wait.
    /// - [`LockError::Unavailable`]: the backend could not be reached or failed (at once
    ///   while it knows its connection is down), also when the wait ended during an outage.
    /// - [`LockError::InvalidName`]: the name given to [`LockManager::lock`] was invalid.
    ///
    /// [`LockManager::lock`]: crate::LockManager::lock
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future at any point leaves no lock behind. An attempt
    /// already sent is finished in the background and released if it succeeded, and a
    /// lock handed to this request as it is dropped is released for it.
    pub fn acquire(self) -> impl Future<Output = Result<LockGuard, LockError>> + Send {
        self.acquire_with(true, |(guard, watchdog)| {
            debug_assert!(watchdog.is_none());
            guard
        })
    }

    /// Acquires, with the watchdog (if any) handed back unstarted: the caller starts it
    /// (with [`LockGuard::keep_alive`]) only if the work under the lock has to wait, and
    /// drops it before releasing.
    #[cfg(feature = "idempotency")]
    pub(crate) fn acquire_unwatched(self) -> impl Future<Output = Result<Acquired, LockError>> {
        self.acquire_with(false, |acquired| acquired)
    }

    /// Acquires (see [`acquire_parts`](Self::acquire_parts) for `spawn_watchdog`), the
    /// acquisition handed to `finish`. Kept small, as callers hold it in their own futures:
    /// an async block keeps the request once (an async fn's argument is kept twice), and
    /// the waiting path, which an acquisition answered at once never takes, is boxed apart
    /// (2 KiB of state).
    #[allow(clippy::manual_async_fn)]
    fn acquire_with<T>(
        self,
        spawn_watchdog: bool,
        finish: impl FnOnce(Acquired) -> T + Send,
    ) -> impl Future<Output = Result<T, LockError>> + Send {
        async move {
            let acquired = match self.acquire_now(spawn_watchdog) {
                Ok(acquired) => acquired,
                Err(request) => Box::pin(request.acquire_parts(spawn_watchdog)).await,
            };
            acquired.map(finish)
        }
    }

    /// What this request asks for, by a new owner.
    fn want(&self, key: LockKey) -> Want {
        let (lease, renewed) = match self.fixed_lease {
            Some(lease) => (lease, false),
            None => (self.manager.settings().lease, true),
        };
        Want {
            key,
            kind: self.kind,
            owner: self.manager.next_owner(),
            lease,
            renewed,
            unless_recorded: self.unless_recorded.is_some(),
            work: self
                .unless_recorded
                .as_deref()
                .and_then(|work| work.clone().map(Box::new)),
        }
    }

    /// Acquires without a future when that needs no waiting: the backend answers at once
    /// (in-process) and nobody in this process holds or waits for the name. `Err(self)`:
    /// not so (or the lock is busy); go through [`acquire_parts`](Self::acquire_parts).
    // The request comes back whole for the waiting path: moving its 128 bytes once costs
    // less than boxing it or its name's error (measured: 3,352 instructions per uncontended
    // acquire + release in memory, against 3,591 with the error boxed; tools/memory-probe).
    #[allow(clippy::result_large_err)]
    pub(crate) fn acquire_now(
        self,
        spawn_watchdog: bool,
    ) -> Result<Result<Acquired, LockError>, Self> {
        let key = match self.names.0 {
            Ok(ref key) => key,
            Err(error) => return Ok(Err(invalid_name(error))),
        };
        let inner = &self.manager;
        // Other kinds always claim the name (readers share a claim); what the backend does
        // not have is refused on the waiting path.
        if !inner.store().answers_at_once()
            || !inner.has_runtime()
            || !self.kind.rules().taken_in_process
            || !inner
                .store()
                .supports(self.kind, self.unless_recorded.is_some())
        {
            return Err(self);
        }
        // With no waiter queued near the name, the backend's own table keeps newcomers in
        // order and the hold needs no claim (see `WaitQueues::may_be_queued`); otherwise
        // claim the name, if it is free here.
        let claim = if inner.queues().may_be_queued(key) {
            let Some(claim) = inner.queues().claim_if_free(key) else {
                return Err(self);
            };
            Some(claim)
        } else {
            None
        };
        let want = self.want(key.clone());
        let sent = Instant::now();
        match inner.store().acquire_now(&want.args(None), sent) {
            Some(Ok(Attempt::Acquired)) => {}
            // Busy, an error or no answer: the waiting path tries again (and queues).
            _ => return Err(self),
        }
        let span = telemetry::acquire_span(key, self.kind, self.wait);
        telemetry::acquired(&span, self.kind, self.wait, Duration::ZERO, Ok(()));
        // The request's handle on the manager moves into the hold (no count change on
        // the manager shared by every request).
        Ok(Ok(want.hold(
            self.manager,
            sent,
            claim,
            None,
            spawn_watchdog,
        )))
    }

    /// Acquires; with `spawn_watchdog == false` the watchdog (if any) is returned for the
    /// caller to start, and the caller must drop it before releasing.
    pub(crate) async fn acquire_parts(self, spawn_watchdog: bool) -> Result<Acquired, LockError> {
        let key = match self.names.0 {
            Ok(ref key) => key.clone(),
            Err(error) => return Err(invalid_name(error)),
        };
        let (kind, wait) = (self.kind, self.wait);
        let span = telemetry::acquire_span(&key, kind, wait);
        let mut record = CancelRecord::new(&span);
        let want = self.want(key);
        let granted = self.grant(&want).instrument(span.clone()).await;
        let waited = record.done();
        telemetry::acquired(&span, kind, wait, waited, granted.as_ref().map(|_| ()));
        let grant = granted?;
        Ok(want.hold(
            self.manager,
            grant.lease_from,
            Some(grant.claim),
            grant.token,
            spawn_watchdog,
        ))
    }

    /// Waits for the lock as `want` says.
    async fn grant(&self, want: &Want) -> Result<Grant, LockError> {
        let inner = &self.manager;
        // What the backend does not have is refused before anything reaches it.
        inner.store().check(want.kind, want.unless_recorded)?;
        // Waiting needs the current runtime's timers (one remembered from before will not
        // do); a backend acquisition always comes here, and a round trip dwarfs the check.
        if tokio::runtime::Handle::try_current().is_err() || !inner.has_runtime() {
            return Err(BackendError::new("tower-lock needs a Tokio runtime").into());
        }
        // The backend knows it cannot be reached: say so now rather than queue behind a
        // reconnect (a waiter already queued rides the outage out while its wait lasts).
        if !inner.store().is_available() && !self.waiting_already {
            return Err(LockError::Unavailable(
                crate::engine::request::acquire::backend_down(inner),
            ));
        }
        match want.kind.rules().waits_in {
            WaitsIn::BackendQueue => FairAcquisition::new(inner, want, self.wait).run().await,
            WaitsIn::LocalQueue => {
                Acquisition::new(inner, want, self.wait)
                    .waiting_already(self.waiting_already)
                    .run()
                    .await
            }
        }
    }
}

/// An invalid name's error, traced.
fn invalid_name(error: LockError) -> LockError {
    tracing::debug!(target: telemetry::TARGET, %error, "tower-lock: invalid lock name");
    error
}

/// Records `cancelled` in the acquisition's span if it is dropped before [`done`].
///
/// [`done`]: CancelRecord::done
struct CancelRecord<'a> {
    span: &'a Span,
    started: Instant,
    done: bool,
}

impl<'a> CancelRecord<'a> {
    fn new(span: &'a Span) -> Self {
        CancelRecord {
            span,
            started: Instant::now(),
            done: false,
        }
    }

    /// The acquisition was answered: how long it took.
    fn done(&mut self) -> Duration {
        self.done = true;
        self.started.elapsed()
    }
}

impl Drop for CancelRecord<'_> {
    fn drop(&mut self) {
        if !self.done {
            telemetry::cancelled(self.span, self.started.elapsed());
        }
    }
}

#[cfg(test)]
mod tests;

#[cfg(feature = "axum")]
impl LockRequest {
    /// The key to lock, unless the name was invalid.
    pub(crate) fn key(&self) -> Option<&LockKey> {
        self.names.0.as_ref().ok()
    }
}
