//! The MySQL / MariaDB backend: locks on the server's named locks (`GET_LOCK`), on
//! connections of its own opened with the settings of a pool the application has (sqlx's
//! [`MySqlPool`]). See `docs/mysql.md`.
//!
//! A lock is a named lock taken on one of the backend's sessions: the grant is the
//! server's answer, the server queues waiters itself (a waiting `GET_LOCK` is granted the
//! moment the name is released, or its holder's session ends), and the lock lasts as long
//! as the session or until released. Only the first waiter of a name in this process waits
//! in the server, on a session of its own; the others wait in the process's queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sqlx::mysql::MySqlPool;
use tokio::sync::{Notify, OnceCell};

mod acquire;
mod expiry;
mod inspect;
mod lock_name;
mod records;
mod release;
mod session;
mod sessions;
mod sql;
mod watch;

pub use lock_name::{server_lock_name as mysql_lock_name, MAX_LOCK_NAME as MYSQL_MAX_LOCK_NAME};

use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, ForceUnlocked, LeaveArgs, LockInfo,
    Notices, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::BackendError;
use crate::key::{LockKey, OwnerId};
use crate::kind::{KindSet, LockKind};
use sessions::Sessions;

/// How many sessions (connections) a backend opens at most, by default.
pub const DEFAULT_MAX_SESSIONS: usize = 16;

/// Locks on MySQL's or MariaDB's named locks (`GET_LOCK`), on connections of its own opened
/// with the settings of a pool the application has (sqlx's [`MySqlPool`]): every grant is
/// the server's answer, a waiter waits in the server and sends nothing meanwhile, and a lock
/// lasts as long as the session that holds it. Plain, fenced and multi-locks, and records
/// for the idempotency layer; names mapped as DistributedLock (.NET) maps them. No read-write or fair locks or semaphores (see
/// [`Capabilities::why_missing`]). See `docs/mysql.md`. Cheap to clone; clones share the
/// sessions.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use sqlx::mysql::MySqlPool;
/// use tower_lock::backend::MySqlBackend;
/// use tower_lock::LockManager;
///
/// let pool = MySqlPool::connect("mysql://app:secret@localhost/app").await?;
/// let locks = LockManager::builder().backend(MySqlBackend::new(&pool));
/// let guard = locks.lock("orders:42").acquire().await?;
/// // ... the order's work ...
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct MySqlBackend {
    inner: Arc<Inner>,
}

/// What the backend's operations share.
pub(super) struct Inner {
    pool: MySqlPool,
    sessions: Sessions,
    /// Waiting acquisitions on their way, for their acquirers to call them off.
    waits: Mutex<HashMap<(LockKey, OwnerId), Arc<Notify>>>,
    tokens_table: OnceCell<()>,
    records_table: OnceCell<()>,
    /// Records stored so far (every so many, the expired ones are swept).
    records_stored: std::sync::atomic::AtomicU64,
}

impl Inner {
    /// The server's name of a lock.
    fn server_name(&self, key: &LockKey) -> String {
        lock_name::server_lock_name(key.as_str())
    }

    fn check_kind(&self, kind: LockKind) -> Result<(), BackendError> {
        match why_missing(kind) {
            None => Ok(()),
            Some(why) => Err(BackendError::new(format!(
                "the MySQL backend has no {} lock: {why}",
                kind.name()
            ))),
        }
    }

    /// Makes the fencing tokens' table on first use.
    async fn ensure_tokens_table(&self) -> Result<(), BackendError> {
        self.ensure_table(
            &self.tokens_table,
            sql::TOKENS_TABLE,
            "make the fencing tokens' table",
        )
        .await
    }

    /// Makes the records' table on first use.
    async fn ensure_records_table(&self) -> Result<(), BackendError> {
        self.ensure_table(
            &self.records_table,
            sql::RECORDS_TABLE,
            "make the records' table",
        )
        .await
    }

    async fn ensure_table(
        &self,
        made: &OnceCell<()>,
        statement: &'static str,
        what: &'static str,
    ) -> Result<(), BackendError> {
        made.get_or_try_init(|| async {
            self.sessions
                .control(what, move |conn| {
                    Box::pin(
                        async move { sqlx::query(statement).execute(&mut *conn).await.map(|_| ()) },
                    )
                })
                .await
        })
        .await
        .map(|_| ())
    }

    /// A waiting acquisition of `owner` begins: its acquirer may call it off.
    fn waiting(&self, key: &LockKey, owner: &OwnerId) -> Arc<Notify> {
        let cancel = Arc::new(Notify::new());
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        waits.insert((key.clone(), owner.clone()), cancel.clone());
        cancel
    }

    fn done_waiting(&self, key: &LockKey, owner: &OwnerId) {
        let mut waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        waits.remove(&(key.clone(), owner.clone()));
    }

    /// Calls off `owner`'s waiting acquisition, if one is on its way.
    fn cancel_wait(&self, key: &LockKey, owner: &OwnerId) {
        let waits = self.waits.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cancel) = waits.get(&(key.clone(), owner.clone())) {
            cancel.notify_one();
        }
    }
}

fn why_missing(kind: LockKind) -> Option<&'static str> {
    match kind {
        LockKind::Plain | LockKind::Fenced => None,
        LockKind::Read | LockKind::Write => Some(
            "MySQL's named locks are exclusive only; readers sharing one would need a table \
             of readers, and waiting for it to empty would mean polling",
        ),
        LockKind::Fair => Some(
            "the server does not promise the order in which it grants a named lock to its \
             waiters",
        ),
        LockKind::Semaphore(_) => {
            Some("named locks cannot count permits, and waiting for one to free would mean polling")
        }
    }
}

/// Settings for a [`MySqlBackend`].
#[derive(Debug, Clone)]
pub struct MySqlBackendBuilder {
    pool: MySqlPool,
    max_sessions: usize,
}

impl MySqlBackendBuilder {
    /// The most sessions (connections of the backend's own, opened with the pool's
    /// settings) open at once; default [`DEFAULT_MAX_SESSIONS`], at least 2. Each waiting
    /// name takes one while it waits; the holds of many names share a session. Each session
    /// has a second connection that waits for it to end (so that its holders are told at
    /// once), and one more connection serves kills and inspection.
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(2);
        self
    }

    /// The backend. It opens its first session when first asked (no I/O here).
    pub fn build(self) -> MySqlBackend {
        let options = (*self.pool.connect_options()).clone();
        MySqlBackend {
            inner: Arc::new(Inner {
                pool: self.pool,
                sessions: Sessions::new(options, self.max_sessions),
                waits: Mutex::default(),
                tokens_table: OnceCell::new(),
                records_table: OnceCell::new(),
                records_stored: std::sync::atomic::AtomicU64::new(0),
            }),
        }
    }
}

impl MySqlBackend {
    /// A backend that opens its sessions with `pool`'s settings (its own connections: the
    /// pool's are not held), with default settings.
    pub fn new(pool: &MySqlPool) -> MySqlBackend {
        Self::builder(pool).build()
    }

    /// Settings for a backend on `pool`'s server.
    pub fn builder(pool: &MySqlPool) -> MySqlBackendBuilder {
        MySqlBackendBuilder {
            pool: pool.clone(),
            max_sessions: DEFAULT_MAX_SESSIONS,
        }
    }

    /// A backend on the server at `url`, once it answers.
    ///
    /// # Errors
    /// When the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<MySqlBackend, BackendError> {
        let pool = MySqlPool::connect(url)
            .await
            .map_err(|error| BackendError::with_source("could not connect to MySQL", error))?;
        Ok(Self::new(&pool))
    }

    /// Statements sent on the backend's connections so far (a waiting acquisition sends
    /// one, then nothing until it ends).
    pub fn statements_sent(&self) -> u64 {
        self.inner.sessions.statements()
    }

    /// Sessions open now.
    pub fn open_sessions(&self) -> usize {
        self.inner.sessions.open_sessions()
    }

    /// The application's pool the backend was made with.
    pub fn pool(&self) -> &MySqlPool {
        &self.inner.pool
    }
}

impl std::fmt::Debug for MySqlBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySqlBackend")
            .field("open_sessions", &self.open_sessions())
            .finish()
    }
}

impl Backend for MySqlBackend {
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
        let _ = self.inner.sessions.shared.notices.set(notices);
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new()
            .kinds(KindSet::PLAIN.with(LockKind::Fenced))
            .records(true)
            .inspects(true)
            .waits_in_store(true)
            .reports_holder_lease(false)
            .why_missing(why_missing)
    }

    fn is_available(&self) -> bool {
        self.inner.sessions.is_available()
    }

    fn unavailable_reason(&self) -> BackendError {
        BackendError::new("MySQL cannot be reached (the last connection attempt failed)")
    }

    fn name(&self) -> &'static str {
        "mysql"
    }
}
