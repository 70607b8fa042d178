//! The PostgreSQL backend: locks on the server's advisory locks, on the connections of a
//! pool the application already has (sqlx's [`PgPool`]). See `docs/postgres.md`.
//!
//! A lock is a session-level advisory lock taken on one of the backend's own sessions
//! (connections it opens with the pool's settings, at most `max_sessions`): the grant is
//! the server's answer, and the lock lasts as long as the session or until released. A
//! waiting acquisition waits in the server's own lock queue (`pg_advisory_lock` under a
//! lock timeout), so the server hands it the lock the moment it is free — released, or
//! freed with a session that ended — and nothing is sent while it waits. Only the first
//! waiter of a name in this process waits there; the others wait in the process's queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sqlx::postgres::PgPool;

mod acquire;
mod advisory_key;
mod cancel;
mod choose;
mod inspect;
mod mode;
mod records;
mod release;
mod session;
mod session_state;
mod sessions;
mod sql;
mod tables;
mod take;
mod wait;

pub use advisory_key::AdvisoryKey;
pub use tables::{schema_sql, DEFAULT_SCHEMA};

use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, ForceUnlocked, LeaveArgs, LockInfo,
    Notices, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::BackendError;
use crate::key::LockKey;
use crate::kind::{KindSet, LockKind};
use session::{Holder, WaitCtl};
use sessions::Sessions;
use tables::Tables;

/// How many sessions (connections) a backend opens at most, by default.
pub const DEFAULT_MAX_SESSIONS: usize = 16;

/// Locks on PostgreSQL's advisory locks, on connections of its own opened with the settings
/// of a pool the application has (sqlx's [`PgPool`]): every grant is the server's answer, a
/// waiter waits in the server's own lock queue and sends nothing meanwhile, and a lock lasts
/// as long as the session that holds it — a session the server ends tells its holders at
/// once. Plain, read-write, fenced and multi-locks, and records for the idempotency layer
/// (with exactly-once effects: `idempotency::IdempotentTransaction`); no fair locks or
/// semaphores. See `docs/postgres.md`. Cheap to clone; clones share the sessions.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use sqlx::postgres::PgPool;
/// use tower_lock::backend::PostgresBackend;
/// use tower_lock::LockManager;
///
/// let pool = PgPool::connect("postgres://app@localhost/app").await?;
/// let locks = LockManager::builder().backend(PostgresBackend::new(&pool));
/// let guard = locks.lock("orders:42").acquire().await?;
/// // ... the order's work ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresBackend {
    inner: Arc<Inner>,
}

/// What the backend's operations share.
pub(super) struct Inner {
    /// The application's pool (its settings make the sessions; handlers' transactions).
    pool: PgPool,
    sessions: Arc<Sessions>,
    tables: Arc<Tables>,
    /// Waiting acquisitions, for their acquirers to take them out of the server's queue.
    waits: Mutex<HashMap<(AdvisoryKey, Holder), Arc<WaitCtl>>>,
}

/// Settings for a [`PostgresBackend`].
#[derive(Debug, Clone)]
pub struct PostgresBackendBuilder {
    pool: PgPool,
    max_sessions: usize,
    schema: String,
}

impl PostgresBackendBuilder {
    /// The most sessions (connections of the backend's own, opened with the pool's
    /// settings) open at once; default [`DEFAULT_MAX_SESSIONS`], at least 2. All but one
    /// may wait in the server's queue, one wait each; the holds of many names share a
    /// session. Two more connections serve cancels, inspection and the tables.
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(2);
        self
    }

    /// The schema of the backend's tables (fencing tokens, records); default
    /// [`DEFAULT_SCHEMA`]. Made on first use when absent (see [`schema_sql`]).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// The backend. It opens its first session when first asked (no I/O here).
    pub fn build(self) -> PostgresBackend {
        let options = (*self.pool.connect_options()).clone();
        let tables = Arc::new(Tables::new(&self.schema));
        PostgresBackend {
            inner: Arc::new(Inner {
                pool: self.pool,
                sessions: Sessions::new(options, self.max_sessions),
                tables,
                waits: Mutex::default(),
            }),
        }
    }
}

impl PostgresBackend {
    /// A backend that opens its sessions with `pool`'s settings (its own connections:
    /// the pool's are not held), with default settings.
    pub fn new(pool: &PgPool) -> PostgresBackend {
        Self::builder(pool).build()
    }

    /// Settings for a backend on `pool`'s server.
    pub fn builder(pool: &PgPool) -> PostgresBackendBuilder {
        PostgresBackendBuilder {
            pool: pool.clone(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            schema: DEFAULT_SCHEMA.to_owned(),
        }
    }

    /// A backend on the server at `url`, once it answers.
    ///
    /// # Errors
    /// When the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<PostgresBackend, BackendError> {
        let pool = PgPool::connect(url)
            .await
            .map_err(|error| BackendError::with_source("could not connect to PostgreSQL", error))?;
        Ok(Self::new(&pool))
    }

    /// Statements sent on the backend's sessions so far (a waiting acquisition sends one,
    /// then nothing until it ends).
    pub fn statements_sent(&self) -> u64 {
        self.inner.sessions.statements()
    }

    /// Sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.inner.sessions.open_sessions()
    }

    /// The schema of the backend's tables.
    pub fn schema(&self) -> &str {
        self.inner.tables.schema()
    }

    /// The application's pool the backend was made with.
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    #[cfg(feature = "idempotency")]
    /// In a handler's transaction: the statement that stores its response as the key's
    /// record unless one is in force (`$1` the lock key, `$2` the record, `$3` its
    /// retention in ms; one row affected when stored).
    pub(crate) fn record_in_transaction_sql(&self) -> &str {
        &self.inner.tables.record_in_transaction
    }

    /// The statement that reads a key's record in force (`$1` the lock key).
    #[cfg(feature = "idempotency")]
    pub(crate) fn record_of_sql(&self) -> &str {
        &self.inner.tables.record_of
    }
}

impl std::fmt::Debug for PostgresBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresBackend")
            .field("open_sessions", &self.open_sessions())
            .field("schema", &self.schema())
            .finish()
    }
}

impl Backend for PostgresBackend {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        Box::pin(acquire::acquire(self.inner.clone(), args))
    }

    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        Box::pin(release::release(self.inner.clone(), args))
    }

    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        Box::pin(release::renew(self.inner.clone(), args))
    }

    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        Box::pin(release::leave_queue(self.inner.clone(), args))
    }

    fn inspect(&self, key: LockKey) -> BoxFuture<Result<LockInfo, BackendError>> {
        Box::pin(inspect::inspect(self.inner.clone(), key))
    }

    fn force_unlock(&self, key: LockKey) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        Box::pin(inspect::force_unlock(self.inner.clone(), key))
    }

    fn list_names(
        &self,
        pattern: String,
        limit: usize,
    ) -> BoxFuture<Result<Vec<LockKey>, BackendError>> {
        Box::pin(inspect::list_names(self.inner.clone(), pattern, limit))
    }

    fn listen(&self, notices: Notices) {
        self.inner.sessions.listen(notices);
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new()
            .kinds(
                KindSet::PLAIN
                    .with(LockKind::Read)
                    .with(LockKind::Write)
                    .with(LockKind::Fenced),
            )
            .records(true)
            .inspects(true)
            .waits_in_store(true)
            .reports_holder_lease(false)
            .why_missing(|kind| match kind {
                LockKind::Fair => Some(
                    "an order across processes would need a connection for every waiting \
                     acquisition; a plain lock's waiters queue in the server first come, first served",
                ),
                LockKind::Semaphore(_) => Some(
                    "advisory locks cannot count permits, and waiting for one to free would \
                     mean polling",
                ),
                _ => None,
            })
    }

    fn is_available(&self) -> bool {
        self.inner.sessions.is_available()
    }

    fn unavailable_reason(&self) -> BackendError {
        BackendError::new("PostgreSQL cannot be reached (the last connection attempt failed)")
    }

    fn name(&self) -> &'static str {
        "postgres"
    }
}
