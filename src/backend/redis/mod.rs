//! The Redis backend (via [fred]): Redisson's `RLock` layout and scripts, one subscriber
//! connection per manager for unlock notifications.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::types::scripts::Script;
use tokio::task::JoinHandle;

use super::{AcquireArgs, Attempt, Backend, BoxFuture, ReleaseArgs, ReleaseReply};
use crate::error::{BackendError, Released};
use crate::key::{LockKey, OwnerId};
use crate::wait::WaitQueues;

mod batch;
mod connect;
mod layout;
mod replicas;
mod scripts;
mod subscriptions;

use batch::{Batcher, Kind, Operation};
use connect::{build, servers};
pub use replicas::{MissingAck, ReplicaAck};

/// Default time limit for one Redis command.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(3);

/// Locks in Redis, in Redisson's `RLock` format.
///
/// Build it with [`LockManager::redis`](crate::LockManager::redis) or
/// [`RedisBackend::connect`]. Every command has a time limit
/// ([`DEFAULT_COMMAND_TIMEOUT`]) and fails at once while the connection is down, so a
/// request is answered promptly (fail closed) instead of queuing behind a reconnect.
#[derive(Clone)]
pub struct RedisBackend {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    subscriber: SubscriberClient,
    options: Options,
    /// Sharded pub/sub (Redis Cluster on Redis 7+): SSUBSCRIBE / SPUBLISH per slot.
    sharded: bool,
    /// WAIT for replicas after each acquisition.
    replica_ack: Option<ReplicaAck>,
    /// Acquisitions kept although too few replicas acknowledged them.
    unacknowledged: std::sync::atomic::AtomicU64,
    /// The lock script (see `scripts::batch`).
    batch: Script,
    batcher: Batcher,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for RedisBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBackend")
            .field("client", &self.inner.client.id())
            .finish()
    }
}

impl RedisBackend {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host:port[/db]`),
    /// opening a command connection and a subscriber connection.
    ///
    /// Fails with a clear error when the URL is invalid or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, BackendError> {
        let config = Config::from_url(url)
            .map_err(|e| BackendError::with_source(format!("invalid Redis URL `{url}`"), e))?;
        Self::from_config(config).await
    }

    /// Connects with a fred [`Config`] (Sentinel, TLS, credentials…).
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
        Ok(Self::from_clients(client, subscriber))
    }

    /// Like [`connect`](Self::connect), but does not wait for Redis: the connections are
    /// made in the background (retried with backoff), and until Redis answers every
    /// acquisition fails with [`LockError::Unavailable`](crate::LockError::Unavailable)
    /// (the HTTP layer's 503). Fails only for an invalid URL. Call it inside a Tokio
    /// runtime.
    pub async fn connect_lazy(url: &str) -> Result<Self, BackendError> {
        let mut config = Config::from_url(url)
            .map_err(|e| BackendError::with_source(format!("invalid Redis URL `{url}`"), e))?;
        // Keep retrying the first connection instead of giving up.
        config.fail_fast = false;
        let (client, subscriber) = build(config)?;
        // The connection tasks run on their own; their handles are not needed.
        drop(client.connect());
        drop(subscriber.connect());
        Ok(Self::from_clients(client, subscriber))
    }

    /// Uses clients the caller built and connected. `subscriber` must be dedicated to this
    /// backend (it subscribes and unsubscribes lock channels). On Redis Cluster with Redis 7
    /// or later (or a version not yet known), waiting uses sharded pub/sub.
    pub fn from_clients(client: Client, subscriber: SubscriberClient) -> Self {
        let sharded = client.is_clustered() && client.server_version().is_none_or(|v| v.major >= 7);
        RedisBackend {
            inner: Arc::new(Inner {
                sharded,
                replica_ack: None,
                unacknowledged: Default::default(),
                client,
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
                batch: Script::from_lua(scripts::batch(if sharded {
                    "spublish"
                } else {
                    "publish"
                })),
                batcher: Batcher::new(),
                tasks: Mutex::new(Vec::new()),
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
        self.inner
            .unacknowledged
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether waiting uses sharded pub/sub (SSUBSCRIBE / SPUBLISH).
    pub fn is_sharded(&self) -> bool {
        self.inner.sharded
    }

    /// The command client (for your own commands on the same connection).
    pub fn client(&self) -> &Client {
        &self.inner.client
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

    fn submit(&self, operation: Operation) -> batch::Submitted {
        batch::submit(&self.inner, operation)
    }
}

impl Inner {
    /// Runs the batch script by EVALSHA; loads it and runs it again when the server does
    /// not know it (after a restart or `SCRIPT FLUSH`). `args` builds EVALSHA's arguments
    /// (twice only in that case).
    ///
    /// Sent with `custom` rather than fred's `evalsha`: fred's `WithOptions` does not
    /// implement its script interface, so `with_options(..).evalsha(..)` runs on the bare
    /// client, and neither the command's time limit nor failing fast while disconnected
    /// would apply.
    async fn eval_batch<A>(&self, key: &LockKey, args: A) -> Result<Value, BackendError>
    where
        A: Fn() -> Vec<Value>,
    {
        let client = self.client.with_options(&self.options);
        // All keys of one call share a slot (the batch groups them so).
        let evalsha = evalsha(key);
        let result = match client.custom::<Value, _>(evalsha.clone(), args()).await {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                // Boxed: the rare path does not weigh on every operation's future.
                Box::pin(self.reload_and_eval(&client, evalsha, args())).await
            }
            other => other,
        };
        result.map_err(|e| BackendError::with_source("Redis command failed", e))
    }

    /// Loads the script again (after a restart or `SCRIPT FLUSH`) and runs it.
    async fn reload_and_eval(
        &self,
        client: &fred::clients::WithOptions<Client>,
        evalsha: fred::types::CustomCommand,
        arguments: Vec<Value>,
    ) -> Result<Value, Error> {
        tracing::debug!("Redis lost the lock script (restart or SCRIPT FLUSH); reloading");
        let lua = self.batch.lua().cloned().unwrap_or_default();
        // On a cluster, load it on every primary (the key's node may change).
        if self.client.is_clustered() {
            self.client.script_load_cluster::<(), _>(lua).await?;
        } else {
            self.client.script_load::<(), _>(lua).await?;
        }
        client.custom(evalsha, arguments).await
    }
}

/// Tells the wait queues when the client loses its connection. fred reports the loss
/// (its error broadcast) before it says so in its state, which changes only when its first
/// reconnect attempt starts (at once, see `connect`): operations pending on the lost
/// connection are told once the state has changed, so that they find the backend
/// unavailable (see `crate::outage`).
async fn notice_outages(client: Client, queues: WaitQueues) {
    use tokio::sync::broadcast::error::RecvError;
    let mut errors = client.error_rx();
    loop {
        match errors.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {}
            Err(RecvError::Closed) => return,
        }
        for _ in 0..100 {
            if !client.is_connected() {
                queues.connection_lost();
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// An error for a reply code the lock script never gives (a script of another version
/// answered, or the reply was garbled): never guessed into an outcome.
fn unknown_reply(operation: &str, code: i64) -> BackendError {
    BackendError::new(format!(
        "Redis answered {code} to {operation}, which the lock script never answers"
    ))
}

/// `EVALSHA`, routed on a cluster to the slot of `key` (fred hashes a custom command's
/// first string argument otherwise: the SHA).
fn evalsha(key: &LockKey) -> fred::types::CustomCommand {
    let slot = fred::util::redis_keyslot(key.as_str().as_bytes());
    fred::types::CustomCommand::new_static("EVALSHA", fred::types::ClusterHash::Custom(slot), false)
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in self
            .tasks
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            task.abort();
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (client, subscriber) = (self.client.clone(), self.subscriber.clone());
            runtime.spawn(async move {
                let _ = subscriber.quit().await;
                let _ = client.quit().await;
            });
        }
    }
}

impl Backend for RedisBackend {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        // Replica acknowledgement concerns new holders only (a reentry changes no owner).
        let ack = self
            .inner
            .replica_ack
            .filter(|_| args.expected == 0)
            .map(|ack| {
                (
                    ack,
                    self.clone(),
                    args.key.clone(),
                    args.owner.clone(),
                    args.lease,
                )
            });
        let reply = self.submit(Operation {
            kind: Kind::Acquire,
            key: args.key,
            owner: args.owner,
            lease: args.lease,
            expected: args.expected,
            successor: None,
        });
        Box::pin(async move {
            Ok(match reply.await? {
                scripts::ACQUIRED => match ack {
                    // Boxed: only configured managers pay for its future's size.
                    Some((ack, backend, key, owner, lease)) => {
                        Box::pin(backend.await_replicas(ack, key, owner, lease)).await?
                    }
                    None => Attempt::Acquired,
                },
                scripts::LOST => Attempt::Lost,
                scripts::BUSY_FOREVER => Attempt::Busy(None),
                pttl if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
                other => return Err(unknown_reply("an acquisition", other)),
            })
        })
    }

    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        // Only an owner's last hold is handed over (the script checks it too).
        let (kind, lease, successor) = match args.successor {
            Some(successor) if args.expected <= 1 => {
                (Kind::HandOver, successor.lease, Some(successor.owner))
            }
            _ => (Kind::Release, args.lease, None),
        };
        let reply = self.submit(Operation {
            kind,
            key: args.key,
            owner: args.owner,
            lease,
            expected: args.expected,
            successor,
        });
        Box::pin(async move {
            let code = reply.await?;
            let released = match (kind, code) {
                (_, scripts::NOT_HELD) => Released::NotHeld,
                (_, 0) => Released::StillHeld,
                (Kind::HandOver, scripts::HANDED_OVER) => Released::HandedOver,
                (Kind::Release, reached) if reached >= scripts::UNLOCKED => {
                    let listeners = u32::try_from(reached - scripts::UNLOCKED).ok();
                    return Ok(ReleaseReply {
                        released: Released::Unlocked,
                        listeners,
                    });
                }
                (_, other) => return Err(unknown_reply("a release", other)),
            };
            Ok(ReleaseReply::new(released))
        })
    }

    fn is_available(&self) -> bool {
        self.inner.client.is_connected()
    }

    fn hands_over(&self) -> bool {
        // A successor's acquisition would skip the replica acknowledgement.
        self.inner.replica_ack.is_none()
    }

    fn acquire_time_limit(&self) -> Option<Duration> {
        // Queued behind sends on their way (each bounded by the time limit), then sent.
        // Waiting for replicas (and undoing on too few) adds more: no bound given then.
        if self.inner.replica_ack.is_some() {
            return None;
        }
        self.inner.options.timeout.map(|limit| limit * 2)
    }

    fn renew(
        &self,
        key: LockKey,
        owner: OwnerId,
        lease: Duration,
    ) -> BoxFuture<Result<bool, BackendError>> {
        let reply = self.submit(Operation {
            kind: Kind::Renew,
            key,
            owner,
            lease,
            expected: 0,
            successor: None,
        });
        Box::pin(async move {
            match reply.await? {
                1 => Ok(true),
                0 => Ok(false),
                other => Err(unknown_reply("a renewal", other)),
            }
        })
    }

    fn attach(&self, queues: WaitQueues) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let task = runtime.spawn(notice_outages(self.inner.client.clone(), queues.clone()));
            self.inner
                .tasks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(task);
        }
        let tasks = subscriptions::spawn(
            self.inner.client.clone(),
            self.inner.subscriber.clone(),
            self.inner.sharded,
            queues,
        );
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(tasks);
    }

    fn check_key(&self, key: &LockKey) -> Result<(), String> {
        if !self.inner.client.is_clustered() {
            return Ok(());
        }
        let slot = fred::util::redis_keyslot(key.as_str().as_bytes());
        let same = |derived: String| fred::util::redis_keyslot(derived.as_bytes()) == slot;
        if same(key.channel()) {
            Ok(())
        } else {
            Err(format!(
                "on Redis Cluster the braces in `{key}` must form a hash tag such as `{{order:42}}`; \
                 as they are, the lock and its unlock channel would land in different slots"
            ))
        }
    }

    fn kind(&self) -> &'static str {
        "redis"
    }
}
