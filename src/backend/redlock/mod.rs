//! RedLock: a lock held on a majority of independent Redis masters.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, Notices, RedisBackend, ReleaseArgs,
    ReleaseReply, RenewArgs,
};
use crate::error::{BackendError, Released};
use crate::key::LockKey;
use crate::kind::LockKind;
use crate::lease::LossMargin;

/// How long one node may take to answer one operation, by default.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(200);

/// A [`Backend`] for RedLock: a lock held on a majority of independent Redis masters (no replication between
/// them), as the seed articles and Redisson's deprecated `RedissonRedLock` describe.
///
/// Each node is an ordinary [`RedisBackend`] with Redisson's `RLock` layout. An
/// acquisition asks every node at once, each bounded by the [node time
/// limit](RedLockBackend::node_timeout); it holds when `N/2 + 1` nodes granted it and time
/// is left of the lease after subtracting the time spent and a clock-drift margin
/// (1 % of the lease + 2 ms). Otherwise every node is released (one whose answer did not
/// arrive may have granted it). The manager's watchdog renews on every node; the lock is
/// lost when fewer than a majority still hold it. Waiters listen on every node and try
/// again when any publishes an unlock: no polling.
///
/// Read `docs/redlock.md` before choosing it: its safety is contested, and a plain lock
/// with replica acknowledgement or a fenced lock is usually the better choice.
///
/// ```no_run
/// # #[tokio::main] async fn main() -> Result<(), tower_lock::backend::BackendError> {
/// use tower_lock::backend::RedLockBackend;
/// use tower_lock::LockManager;
///
/// let nodes = ["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"];
/// let locks = LockManager::builder().backend(RedLockBackend::connect(&nodes).await?);
/// let guard = locks.lock("order:42").acquire().await.unwrap();
/// guard.release().await.unwrap();
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct RedLockBackend {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    nodes: Vec<RedisBackend>,
    node_timeout: Duration,
}

/// One node's answer: `None` when it failed or did not answer in time.
type Answers<T> = Vec<Option<T>>;

impl RedLockBackend {
    /// Connects to the masters at `urls`, in the background: a node that is down now is
    /// counted out until it answers (see [`RedisBackend::connect_lazy`]).
    ///
    /// # Errors
    /// Fewer than three URLs (one or two nodes cannot outvote a failure: use
    /// [`RedisBackend`]), or an invalid URL.
    pub async fn connect(urls: &[&str]) -> Result<Self, BackendError> {
        let mut nodes = Vec::with_capacity(urls.len());
        for url in urls {
            nodes.push(RedisBackend::connect_lazy(url).await?);
        }
        Self::from_nodes(nodes)
    }

    /// A RedLock over backends already made (one per master, each with its own
    /// connection).
    ///
    /// # Errors
    /// Fewer than three nodes.
    pub fn from_nodes(nodes: Vec<RedisBackend>) -> Result<Self, BackendError> {
        if nodes.len() < 3 {
            return Err(BackendError::new(format!(
                "RedLock needs at least 3 independent masters (5 tolerate two failures); {} \
                 given: use RedisBackend for one",
                nodes.len()
            )));
        }
        Ok(RedLockBackend {
            inner: Arc::new(Inner {
                nodes,
                node_timeout: DEFAULT_NODE_TIMEOUT,
            }),
        })
    }

    /// How long one node may take to answer (default [`DEFAULT_NODE_TIMEOUT`]): a node that
    /// is slower counts as failed for that operation. Keep it well below the lease: the
    /// time an acquisition takes is subtracted from the lease's validity.
    pub fn node_timeout(self, timeout: Duration) -> Self {
        let nodes = self.inner.nodes.clone();
        RedLockBackend {
            inner: Arc::new(Inner {
                nodes,
                node_timeout: timeout.max(Duration::from_millis(1)),
            }),
        }
    }

    /// How many nodes must agree: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.inner.nodes.len() / 2 + 1
    }

    /// The nodes, in the order given.
    pub fn nodes(&self) -> &[RedisBackend] {
        &self.inner.nodes
    }

    /// Runs `op` on every node at once, each within the node time limit.
    async fn on_all<T, F>(inner: &Inner, op: F) -> Answers<T>
    where
        F: Fn(&RedisBackend) -> BoxFuture<Result<T, BackendError>>,
    {
        let limit = inner.node_timeout;
        let asks = inner.nodes.iter().map(|node| {
            let ask = op(node);
            async move {
                tokio::time::timeout(limit, ask)
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
        });
        crate::join::join_all(asks).await
    }

    /// Releases `args`, as an undo, on every node where the attempt may have landed: not
    /// where it was answered busy (the lock is someone else's there, and a release of it
    /// would only cross its holder's). Outcomes do not matter: a node that misses it lets
    /// the lease run out.
    async fn undo(inner: &Inner, args: ReleaseArgs, answers: &Answers<Attempt>) {
        let limit = inner.node_timeout;
        let undos = inner
            .nodes
            .iter()
            .zip(answers)
            .filter(|(_, answer)| !matches!(answer, Some(Attempt::Busy(_))))
            .map(|(node, _)| tokio::time::timeout(limit, node.release(args.clone())));
        crate::join::join_all(undos).await;
    }
}

/// The error of an operation that fewer than a majority of nodes answered.
fn too_few(what: &str, answered: usize, quorum: usize, nodes: usize) -> BackendError {
    BackendError::new(format!(
        "RedLock: only {answered} of {nodes} nodes answered {what}; {quorum} are needed"
    ))
}

/// A lock with a record (the idempotency layer's) needs its record stored atomically with
/// the release on one store: a majority of nodes cannot give that.
fn no_records() -> BackendError {
    BackendError::new("RedLock has no locks with records (the idempotency layer needs one Redis)")
}

/// The error for a kind RedLock does not have (the manager refuses them first, from its
/// capabilities): its algorithm is the plain lock's.
fn only_plain(kind: LockKind) -> Option<BackendError> {
    (kind != LockKind::Plain).then(|| {
        BackendError::new(format!(
            "RedLock has the plain lock only, not the {} lock",
            kind.name()
        ))
    })
}

impl Backend for RedLockBackend {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        let inner = self.inner.clone();
        let quorum = self.quorum();
        Box::pin(async move {
            if let Some(error) = only_plain(args.kind) {
                return Err(error);
            }
            if args.unless_recorded {
                return Err(no_records());
            }
            let started = Instant::now();
            let answers = Self::on_all(&inner, |node| node.acquire(args.clone())).await;
            let taken = answers.iter().flatten().filter(|a| a.is_acquired()).count();
            let answered = answers.iter().flatten().count();
            let spent = started.elapsed();
            let drift = LossMargin::DEFAULT.for_lease(args.lease);
            let valid = args
                .lease
                .checked_sub(spent + drift)
                .is_some_and(|v| !v.is_zero());
            if taken >= quorum && valid {
                return Ok(Attempt::Acquired);
            }
            // Not held: undo everywhere it may have landed (a reentry's extra count too).
            let undo = ReleaseArgs {
                key: args.key.clone(),
                kind: args.kind,
                owner: args.owner.clone(),
                lease: args.lease,
                expected: args.expected + 1,
                successor: None,
                announce_run: None,
                record: None,
            };
            if taken > 0 || answered < inner.nodes.len() {
                Self::undo(&inner, undo, &answers).await;
            }
            if taken >= quorum {
                return Err(BackendError::new(format!(
                    "RedLock: {taken} nodes granted `{}` but that took {spent:?}, which leaves \
                     no validity of the {:?} lease (set a longer lease or a shorter node \
                     time limit)",
                    args.key, args.lease
                )));
            }
            if answered < quorum {
                return Err(too_few(
                    "the acquisition",
                    answered,
                    quorum,
                    inner.nodes.len(),
                ));
            }
            if args.expected > 0 {
                return Ok(Attempt::Lost);
            }
            // Busy: look again when the shortest of the busy nodes' leases ends at the
            // latest (an unlock on any node wakes the waiter before).
            let mut leases: Vec<Option<Duration>> = answers
                .iter()
                .flatten()
                .filter_map(|a| match a {
                    Attempt::Busy(pttl) => Some(*pttl),
                    _ => None,
                })
                .collect();
            leases.sort_by_key(|lease| lease.unwrap_or(Duration::MAX));
            Ok(Attempt::Busy(leases.first().copied().flatten()))
        })
    }

    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        let inner = self.inner.clone();
        let quorum = self.quorum();
        Box::pin(async move {
            if args.record.is_some() {
                return Err(no_records());
            }
            let args = ReleaseArgs {
                successor: None,
                announce_run: None,
                ..args
            };
            let answers = Self::on_all(&inner, |node| node.release(args.clone())).await;
            let answered = answers.iter().flatten().count();
            let count = |released| {
                answers
                    .iter()
                    .flatten()
                    .filter(|reply| reply.released == released)
                    .count()
            };
            let (unlocked, still) = (count(Released::Unlocked), count(Released::StillHeld));
            let released = if unlocked + still >= quorum {
                if still >= unlocked {
                    Released::StillHeld
                } else {
                    Released::Unlocked
                }
            } else if answered >= quorum {
                // Fewer than a majority held it: it had ended before this release.
                Released::NotHeld
            } else {
                return Err(too_few("the release", answered, quorum, inner.nodes.len()));
            };
            let listeners = answers
                .iter()
                .flatten()
                .filter_map(|reply| reply.other_listeners)
                .max();
            Ok(ReleaseReply {
                released,
                other_listeners: listeners,
            })
        })
    }

    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        let inner = self.inner.clone();
        let quorum = self.quorum();
        Box::pin(async move {
            let answers = Self::on_all(&inner, |node| node.renew(args.clone())).await;
            let renewed = answers.iter().flatten().filter(|held| **held).count();
            let answered = answers.iter().flatten().count();
            if renewed >= quorum {
                Ok(true)
            } else if answered >= quorum && answered - renewed > inner.nodes.len() - quorum {
                // A majority cannot hold it any more: lost.
                Ok(false)
            } else {
                Err(too_few("the renewal", answered, quorum, inner.nodes.len()))
            }
        })
    }

    fn listen(&self, notices: Notices) {
        for (node, notices) in self
            .inner
            .nodes
            .iter()
            .zip(notices.split(self.inner.nodes.len()))
        {
            node.listen(notices);
        }
    }

    fn capabilities(&self) -> Capabilities {
        // No hand-over: a release cannot hand a lock over on a majority in one step.
        Capabilities::new()
            .attempt_time_limit(Some(self.inner.node_timeout * 2))
            .subscribes(true)
    }

    fn is_available(&self) -> bool {
        let up = self
            .inner
            .nodes
            .iter()
            .filter(|node| node.is_available())
            .count();
        up >= self.quorum()
    }

    fn unavailable_reason(&self) -> BackendError {
        let nodes = &self.inner.nodes;
        let down: Vec<String> = nodes
            .iter()
            .filter(|node| !node.is_available())
            .map(|node| node.unavailable_reason().to_string())
            .collect();
        BackendError::new(format!(
            "RedLock: only {} of {} nodes can be reached now; {} are needed ({})",
            nodes.len() - down.len(),
            nodes.len(),
            self.quorum(),
            down.join("; ")
        ))
    }

    fn check_key(&self, key: &LockKey) -> Result<(), String> {
        self.inner
            .nodes
            .iter()
            .try_for_each(|node| node.check_key(key))
    }

    fn name(&self) -> &'static str {
        "redlock"
    }
}
