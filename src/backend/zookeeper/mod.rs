//! The ZooKeeper backend: locks on ephemeral sequential nodes, in Apache Curator's layout,
//! so that Rust services and Java services on Curator's recipes take the same locks and
//! wake each other. See `docs/zookeeper.md`.
//!
//! A lock is a directory (`{root}/{name}`); an acquisition makes a node in it, and the
//! node's place in the sequence says whether it holds (Curator's `InterProcessMutex` and
//! `InterProcessReadWriteLock` rules). A waiter watches only the node before it: the
//! server tells it when that one goes (no polling, no herd). The session is the lease:
//! no watchdog write is needed while it lives, and a dead process's nodes go with its
//! session.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

mod acquire;
mod connection;
mod create;
mod events;
mod expiry;
mod holds;
mod inspect;
mod nodes;
mod release;

use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, ForceUnlocked, LeaveArgs, LockInfo,
    Notices, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::BackendError;
use crate::key::{LockKey, OwnerId};
use crate::kind::{KindSet, LockKind};
use connection::Connection;
use holds::Holds;

/// The root under which lock names are directories, by default.
pub const DEFAULT_ROOT: &str = "/tower-lock";

/// The session timeout asked of the server, by default (the server bounds it between 2
/// and 20 ticks: 4 s and 40 s at its default tick of 2 s).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest lock name, in bytes (a node name; ZooKeeper itself bounds a request by
/// `jute.maxbuffer`, 1 MiB by default).
pub const MAX_NAME_LEN: usize = 512;

/// Locks on ZooKeeper, in Apache Curator's layout: plain, fair (the same FIFO queue:
/// `InterProcessMutex`), fenced (the token is the holder node's `czxid`), read-write
/// (`InterProcessReadWriteLock`) and multi-locks. A waiter waits in the directory's queue,
/// watching the node before it. No semaphores and no records (see
/// [`Capabilities::why_missing`]). See `docs/zookeeper.md`. Cheap to clone.
///
/// # Examples
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tower_lock::backend::ZooKeeperBackend;
/// use tower_lock::LockManager;
///
/// // Curator's InterProcessMutex on "/locks/order-42" is this manager's "order-42".
/// let backend = ZooKeeperBackend::builder("10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181")
///     .root("/locks")
///     .connect()
///     .await?;
/// let locks = LockManager::builder().backend(backend);
/// let guard = locks.lock("order-42").acquire().await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ZooKeeperBackend {
    inner: Arc<Inner>,
}

/// What the backend's operations share.
pub(super) struct Inner {
    connection: Arc<Connection>,
    holds: Holds,
    root: String,
    /// Waiting acquisitions on their way, for their acquirers to call them off.
    waits: Mutex<HashMap<(LockKey, OwnerId), Arc<Notify>>>,
    /// Ends the session's watching task with the backend.
    closed: Arc<Notify>,
    /// Watches that fired for waiters (see [`ZooKeeperBackend::watches_fired`]).
    watches_fired: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.closed.notify_one();
    }
}

impl Inner {
    /// The directory of a lock.
    fn dir(&self, key: &LockKey) -> String {
        format!("{}/{}", self.root, key.as_str())
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

/// Settings for a [`ZooKeeperBackend`].
#[derive(Debug, Clone)]
pub struct ZooKeeperBackendBuilder {
    hosts: String,
    root: String,
    session_timeout: Duration,
}

impl ZooKeeperBackendBuilder {
    /// The node under which lock names are directories (default [`DEFAULT_ROOT`]): the
    /// parent of the paths Curator's recipes are given, for both to meet (`/locks` for
    /// `new InterProcessMutex(client, "/locks/order-42")` and the name `order-42`). An
    /// absolute path without a trailing slash; a chroot in the host string applies first.
    pub fn root(mut self, root: impl Into<String>) -> Self {
        self.root = root.into();
        self
    }

    /// The session timeout asked of the server (default [`DEFAULT_SESSION_TIMEOUT`]):
    /// how long after its process died a holder's locks stay held, and how long an
    /// outage the session outlives.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Connects (the session is made here).
    ///
    /// # Errors
    /// A root that is not an absolute path, or the servers cannot be reached.
    pub async fn connect(self) -> Result<ZooKeeperBackend, BackendError> {
        check_root(&self.root)?;
        let connection = Connection::open(&self.hosts, self.session_timeout).await?;
        let closed = Arc::new(Notify::new());
        let inner = Arc::new(Inner {
            connection,
            holds: Holds::default(),
            root: self.root,
            waits: Mutex::default(),
            closed: closed.clone(),
            watches_fired: AtomicU64::new(0),
        });
        events::watch(&inner, closed);
        Ok(ZooKeeperBackend { inner })
    }
}

fn check_root(root: &str) -> Result<(), BackendError> {
    let bad = !root.starts_with('/')
        || root.len() == 1
        || root.ends_with('/')
        || root
            .split('/')
            .skip(1)
            .any(|part| check_name(part).is_err());
    if bad {
        return Err(BackendError::new(format!(
            "ZooKeeper root {root:?} is not an absolute path of valid node names (like \
             \"/tower-lock\" or \"/locks\")"
        )));
    }
    Ok(())
}

/// Whether `name` can be one node's name (ZooKeeper's rules).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a ZooKeeper node name cannot be empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("{name:?} cannot be a ZooKeeper node name"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "the lock name is {} bytes long; ZooKeeper names here are at most {MAX_NAME_LEN}",
            name.len()
        ));
    }
    if let Some(bad) = name.chars().find(|c| {
        *c == '/'
            || c.is_control()
            || ('\u{e000}'..='\u{f8ff}').contains(c)
            || ('\u{fff0}'..='\u{ffff}').contains(c)
    }) {
        return Err(format!(
            "the lock name has {bad:?}, which a ZooKeeper node name cannot have (a slash \
             would make a path: set the backend's root for Curator's parent path instead)"
        ));
    }
    Ok(())
}

/// The error for a kind this backend does not have (the manager refuses it first).
fn missing(kind: LockKind) -> BackendError {
    BackendError::new(format!(
        "the ZooKeeper backend has no {} lock{}",
        kind.name(),
        why_missing(kind)
            .map(|why| format!(": {why}"))
            .unwrap_or_default()
    ))
}

fn why_missing(kind: LockKind) -> Option<&'static str> {
    match kind {
        LockKind::Semaphore(_) => Some(
            "Curator's semaphore (InterProcessSemaphoreV2) keeps no limit in ZooKeeper (each \
             client passes its own), so the two sides could disagree on it",
        ),
        _ => None,
    }
}

impl ZooKeeperBackend {
    /// Settings for a backend on the servers in `hosts` (`host:port,host:port`, optionally
    /// with a chroot: `host:port/path`).
    pub fn builder(hosts: impl Into<String>) -> ZooKeeperBackendBuilder {
        ZooKeeperBackendBuilder {
            hosts: hosts.into(),
            root: DEFAULT_ROOT.to_owned(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
        }
    }

    /// A backend on the servers in `hosts`, with default settings.
    ///
    /// # Errors
    /// The servers cannot be reached.
    pub async fn connect(hosts: &str) -> Result<ZooKeeperBackend, BackendError> {
        Self::builder(hosts).connect().await
    }

    /// The root under which lock names are directories.
    pub fn root(&self) -> &str {
        &self.inner.root
    }

    /// How many watches set by waiters have fired so far: each waiter watches only the node
    /// before it, so a hand-over wakes one waiter (no herd), and this grows by about one
    /// per waiter that got its turn.
    pub fn watches_fired(&self) -> u64 {
        self.inner.watches_fired.load(Ordering::Relaxed)
    }

    /// The session's id now (a new one after an expiry).
    pub fn session_id(&self) -> i64 {
        self.inner.connection.client().0.session_id().0
    }
}

impl std::fmt::Debug for ZooKeeperBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZooKeeperBackend")
            .field("root", &self.inner.root)
            .field("connected", &self.inner.connection.is_connected())
            .finish()
    }
}

impl Backend for ZooKeeperBackend {
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
        let _ = self.inner.connection.notices.set(notices);
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new()
            .kinds(
                KindSet::PLAIN
                    .with(LockKind::Fair)
                    .with(LockKind::Read)
                    .with(LockKind::Write)
                    .with(LockKind::Fenced),
            )
            .inspects(true)
            .waits_in_store(true)
            .reports_holder_lease(false)
            .why_missing(why_missing)
    }

    fn is_available(&self) -> bool {
        self.inner.connection.is_connected()
    }

    fn unavailable_reason(&self) -> BackendError {
        self.inner.connection.unavailable_reason()
    }

    fn check_key(&self, key: &LockKey) -> Result<(), String> {
        check_name(key.as_str())
    }

    fn name(&self) -> &'static str {
        "zookeeper"
    }
}
