//! The Redis backend (via [fred]): Redisson's lock layout and scripts, one subscriber
//! connection per manager for unlock notices. Everything Redis is in this folder:
//!
//! - each kind's script and operations: `plain.rs` with `batch/` (group commit: many plain
//!   lock operations in one call of `batch.lua`; locks with a record too),
//!   `read_write.rs`, `fair.rs` with `waiter_channels.rs` (a channel per fair waiter),
//!   `fenced.rs`, `semaphore.rs`, `inspect.rs` (inspection, listing, force-unlock);
//! - `operations`: the [`Backend`](super::Backend) implementation, one exhaustive `match`
//!   per operation into the kinds' code;
//! - `commands`: where commands go (a client or a pool) and the script call;
//! - `scripts`: what the scripts share (reply codes, messages, sharded `SPUBLISH`);
//! - `channels`, `subscriptions`, `messages` and `echoes`: listening for unlocks, telling
//!   our own apart;
//! - `names`: Redisson's key and channel names;
//! - `connect` and `replicas`: connections, reconnects, replica acknowledgement.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use fred::clients::{Pool, SubscriberClient};
use fred::prelude::*;
use fred::types::scripts::Script;
use tokio::task::JoinHandle;

use super::Notices;
use crate::error::BackendError;

mod batch;
mod channel_use;
mod channels;
mod commands;
mod connect;
mod echoes;
mod fair;
mod fenced;
mod inspect;
mod messages;
mod names;
mod operations;
mod plain;
mod read_write;
mod replicas;
#[cfg(test)]
mod script_constants;
mod scripts;
mod semaphore;
mod subscriptions;
mod waiter_channels;

use batch::Batcher;
use commands::Commands;
use connect::{build, servers};
use echoes::Echoes;
pub use names::unlock_channel;
pub use replicas::{MissingAck, ReplicaAck};

/// Default time limit for one Redis command.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(3);

/// Locks in Redis, in Redisson's formats.
///
/// Build it with [`LockManager::redis`](crate::LockManager::redis) or
/// [`RedisBackend::connect`]. Every command has a time limit
/// ([`DEFAULT_COMMAND_TIMEOUT`]) and fails at once while the client knows its connection
/// is down, so a request is answered promptly (fail closed) instead of queuing behind a
/// reconnect.
#[derive(Clone)]
pub struct RedisBackend {
    pub(in crate::backend) inner: Arc<BackendInner>,
}

pub(in crate::backend) struct BackendInner {
    pub(in crate::backend) commands: Commands,
    pub(in crate::backend) subscriber: SubscriberClient,
    pub(in crate::backend) options: Options,
    /// Sharded pub/sub (Redis Cluster on Redis 7+): SSUBSCRIBE / SPUBLISH per slot.
    pub(in crate::backend) sharded: bool,
    /// WAIT for replicas after each acquisition.
    pub(in crate::backend) replica_ack: Option<ReplicaAck>,
    /// Acquisitions kept although too few replicas acknowledged them.
    pub(in crate::backend) unacknowledged: AtomicU64,
    /// The lock script (see `batch.lua`).
    pub(in crate::backend) batch: Script,
    /// The read-write lock's script (one operation per call).
    pub(in crate::backend) read_write: Script,
    /// The fair lock's script (one operation per call).
    pub(in crate::backend) fair: Script,
    /// The fenced lock's acquisition (one per call).
    pub(in crate::backend) fenced: Script,
    /// The semaphore's operations (one per call).
    pub(in crate::backend) semaphore: Script,
    /// An inspection of one name (read only).
    pub(in crate::backend) inspect: Script,
    /// A force-unlock of one name.
    pub(in crate::backend) force_unlock: Script,
    pub(in crate::backend) batcher: Batcher,
    /// Our own unlock notices, expected back on our subscriptions.
    pub(in crate::backend) echoes: Arc<Echoes>,
    /// The manager's waiters, once it listens.
    pub(in crate::backend) notices: OnceLock<Notices>,
    pub(in crate::backend) tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The clients were made here (and are closed with the backend), not given.
    pub(in crate::backend) owns_clients: bool,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("client", &self.inner.commands.first().id())
            .field("sharded", &self.inner.sharded)
            .finish()
    }
}

impl RedisBackend {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host:port[/db]`),
    /// opening a command connection and a subscriber connection.
    ///
    /// # Errors
    /// When the URL is invalid or the server cannot be reached.
    ///
    /// # Cancel safety
    /// Not cancel safe: if the future is dropped while the first connection is being made,
    /// fred's connection task keeps trying in the background (until the runtime shuts
    /// down). To bound start-up time, use [`connect_lazy`](Self::connect_lazy), which
    /// returns at once, rather than a timeout around this.
    pub async fn connect(url: &str) -> Result<Self, BackendError> {
        let config = Config::from_url(url)
            .map_err(|e| BackendError::with_source(format!("invalid Redis URL `{url}`"), e))?;
        Self::from_config(config).await
    }

    /// Connects with a fred [`Config`] (Sentinel, TLS, credentials…).
    ///
    /// # Errors
    /// When the server cannot be reached.
    ///
    /// # Cancel safety
    /// As [`connect`](Self::connect).
    pub async fn from_config(config: Config) -> Result<Self, BackendError> {
        let (client, subscriber) = build(config.clone())?;
        let connect_error = |e| {
            BackendError::with_source(
                format!("cannot connect to Redis at {}", servers(&config)),
                e,
            )
        };
        client.init().await.map_err(connect_error)?;
        if let Err(e) = subscriber.init().await {
            let _ = client.quit().await;
            return Err(connect_error(e));
        }
        Ok(Self::owning(client, subscriber))
    }

    /// Like [`connect`](Self::connect), but does not wait for Redis: the connections are
    /// made in the background (retried with backoff), and until Redis answers every
    /// acquisition fails with [`LockError::Unavailable`](crate::LockError::Unavailable)
    /// (the HTTP layer's 503). Call it inside a Tokio runtime.
    ///
    /// # Errors
    /// Only for an invalid URL.
    ///
    /// # Cancel safety
    /// Cancel safe: it does not wait (the connections are made by background tasks, which
    /// end with the backend).
    pub async fn connect_lazy(url: &str) -> Result<Self, BackendError> {
        let mut config = Config::from_url(url)
            .map_err(|e| BackendError::with_source(format!("invalid Redis URL `{url}`"), e))?;
        // Keep retrying the first connection instead of giving up.
        config.fail_fast = false;
        let (client, subscriber) = build(config)?;
        // The connection tasks run on their own; their handles are not needed.
        drop(client.connect());
        drop(subscriber.connect());
        Ok(Self::owning(client, subscriber))
    }

    /// A backend on clients made here: closed when it is dropped.
    fn owning(client: Client, subscriber: SubscriberClient) -> Self {
        let mut backend = Self::from_clients(client, subscriber);
        if let Some(inner) = Arc::get_mut(&mut backend.inner) {
            inner.owns_clients = true;
        }
        backend
    }

    /// Uses clients the caller built and connected (their reconnect policy and default
    /// settings stay theirs; each lock command still gets this backend's time limit, and
    /// they are not closed with the backend). `subscriber` must be dedicated to this
    /// backend (it subscribes and unsubscribes lock channels). On Redis Cluster with Redis 7
    /// or later (or a version not yet known), waiting uses sharded pub/sub.
    pub fn from_clients(client: Client, subscriber: SubscriberClient) -> Self {
        Self::with_commands(Commands::Client(client), subscriber)
    }

    /// Like [`from_clients`](Self::from_clients), with lock commands spread over a
    /// [`Pool`] of clients (round robin). With [replica
    /// acknowledgement](Self::replica_ack), they all go through the pool's first client:
    /// `WAIT` counts the writes of one connection.
    pub fn from_pool(pool: Pool, subscriber: SubscriberClient) -> Self {
        Self::with_commands(Commands::Pool(pool), subscriber)
    }

    fn with_commands(commands: Commands, subscriber: SubscriberClient) -> Self {
        let first = commands.first();
        let sharded = first.is_clustered() && first.server_version().is_none_or(|v| v.major >= 7);
        RedisBackend {
            inner: Arc::new(BackendInner {
                sharded,
                replica_ack: None,
                unacknowledged: AtomicU64::new(0),
                commands,
                subscriber,
                options: Options {
                    timeout: Some(DEFAULT_COMMAND_TIMEOUT),
                    // Fail at once while the connection is down, and never queue a command
                    // for a later reconnect (fred's retry of a write that found no
                    // connection does not look at `fail_fast`, only at the attempts left).
                    fail_fast: true,
                    max_attempts: Some(1),
                    ..Default::default()
                },
                batch: Script::from_lua(batch::script(sharded)),
                read_write: Script::from_lua(read_write::script(sharded)),
                fair: Script::from_lua(fair::script(sharded)),
                fenced: Script::from_lua(fenced::script(sharded)),
                semaphore: Script::from_lua(semaphore::script(sharded)),
                inspect: Script::from_lua(inspect::inspect_script()),
                force_unlock: Script::from_lua(inspect::force_unlock_script(sharded)),
                batcher: Batcher::new(),
                echoes: Arc::default(),
                notices: OnceLock::new(),
                tasks: Mutex::new(Vec::new()),
                owns_clients: false,
            }),
        }
    }

    /// Changes the time limit of each lock command (default [`DEFAULT_COMMAND_TIMEOUT`]).
    /// Only effective before the backend is shared with a manager.
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.options.timeout = Some(timeout);
        }
        self
    }

    /// After each acquisition, WAIT until `ack.replicas` replicas have it (Redisson's
    /// `checkLockSyncedSlaves`), so that a failover is less likely to lose it. Costs one
    /// round trip plus the replication delay per acquisition. Only effective before the
    /// backend is shared with a manager.
    pub fn replica_ack(mut self, ack: ReplicaAck) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.replica_ack = Some(ack);
        }
        self
    }

    /// How many acquisitions were kept without enough replica acknowledgements
    /// ([`MissingAck::Proceed`]).
    pub fn unacknowledged_acquisitions(&self) -> u64 {
        self.inner.unacknowledged.load(Ordering::Relaxed)
    }

    /// Whether waiting uses sharded pub/sub (SSUBSCRIBE / SPUBLISH).
    pub fn is_sharded(&self) -> bool {
        self.inner.sharded
    }

    /// The command client (the pool's first, for a pooled backend): for your own
    /// commands on the same connection.
    pub fn client(&self) -> &Client {
        self.inner.commands.first()
    }

    /// How many lock operations were sent together with others (group commit under
    /// load).
    pub fn batched_operations(&self) -> u64 {
        self.inner.batcher.batched()
    }

    /// How many lock operations wait for a send slot now (two sends are on their way
    /// at most; the next operations go together when one returns).
    pub fn queued_operations(&self) -> usize {
        self.inner.batcher.queued()
    }
}

impl BackendInner {
    /// The client the next lock command goes through (always the first with replica
    /// acknowledgement: see [`RedisBackend::from_pool`]).
    pub(in crate::backend) fn next_client(&self) -> &Client {
        match self.replica_ack {
            Some(_) => self.commands.first(),
            None => self.commands.next(),
        }
    }
}

impl Drop for BackendInner {
    fn drop(&mut self) {
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
        // Clients given by the caller are the caller's to close.
        if !self.owns_clients {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (client, subscriber) = (self.commands.first().clone(), self.subscriber.clone());
            runtime.spawn(async move {
                let _ = subscriber.quit().await;
                let _ = client.quit().await;
            });
        }
    }
}
