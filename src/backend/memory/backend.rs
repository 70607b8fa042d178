//! An in-process backend with the same semantics as Redis: reentrant holds, leases that
//! expire, FIFO wake-one waiting and a loss signal, and every lock kind with the rules of
//! its scripts (each kind's in its own file beside this one). The embedded default for
//! examples, tests and single-process services.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::fair::{self, NextTurn};
use super::{fenced, inspect, plain, read_write, semaphore, Locks};
use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, ForceUnlocked, KindSet, LeaveArgs,
    LockInfo, Notices, PermitUsage, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::{BackendError, Released};
use crate::key::LockKey;
use crate::kind::LockKind;

/// Locks held in this process's memory.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use tower_lock::LockManager;
///
/// let locks = LockManager::memory();
/// let guard = locks.lock("order:42").acquire().await.unwrap();
/// assert!(locks.lock("order:42").try_acquire().await.is_err());
/// guard.release().await.unwrap();
/// # }
/// ```
#[derive(Clone, Default, Debug)]
pub struct MemoryBackend {
    shards: Arc<[LockShard; SHARDS]>,
    /// The managers on this backend: a fair lock's head is told its turn through them.
    listeners: Arc<Mutex<Vec<Notices>>>,
}

/// The lock table is split by name, so that requests for different names on different
/// threads seldom take the same mutex (or pass its cache line back and forth).
const SHARDS: usize = 16;

/// One part of the lock table, on a cache line of its own.
#[derive(Default, Debug)]
#[repr(align(64))]
struct LockShard(Mutex<Locks>);

impl MemoryBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// Deletes a lock whoever holds it, like `DEL <key>` on Redis (for administration and
    /// tests); for a semaphore, its permits and limit (its next acquisition sets the limit
    /// again). The holders' next renewal finds their hold gone and fires their loss signal.
    /// Returns whether a live lock or permit was deleted.
    pub fn force_unlock(&self, key: &LockKey) -> bool {
        self.with_locks(key, |locks, now| {
            let live = locks.live(key, now).is_some();
            locks.held.remove(key);
            let permits = locks
                .semaphores
                .remove(key)
                .is_some_and(|semaphore| semaphore.holders() > 0);
            live || permits
        })
    }

    /// Entries in the lock table: held locks and records, and those whose lease or
    /// retention ran out that were not swept yet (for administration and leak checks: 0
    /// once nothing is held or recorded and every expired entry was swept or looked at).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let locks = shard.0.lock().unwrap_or_else(|e| e.into_inner());
                let holders: usize = locks.semaphores.values().map(|s| s.holders()).sum();
                locks.held.len() + locks.records.len() + holders
            })
            .sum()
    }

    /// Whether the lock table is empty (see [`len`](Self::len)).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fair waiters queued now, of every name (for administration and leak checks: 0 once
    /// nobody waits for a fair lock).
    pub fn queued(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| {
                let locks = shard.0.lock().unwrap_or_else(|e| e.into_inner());
                locks.fair.values().map(fair::FairQueue::len).sum::<usize>()
            })
            .sum()
    }

    /// Tells a fair waiter that its turn came (through every manager on this backend; the
    /// one that has the waiter wakes it).
    fn tell_turn(&self, turn: NextTurn) {
        let Some((key, owner)) = turn else { return };
        let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        for notices in listeners.iter() {
            notices.turn(&key, &owner);
        }
    }

    /// Tells every manager's waiters of `key` to look at the lock now.
    fn tell_unlocked(&self, key: &LockKey, all: bool) {
        let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        for notices in listeners.iter() {
            if all {
                notices.unlocked_all(key);
            } else if notices.may_be_watched(key) {
                notices.unlocked(key);
            }
        }
    }

    /// An acquisition, answered at once: each kind by its own rules.
    fn take(&self, args: &AcquireArgs, now: Instant) -> Result<Attempt, BackendError> {
        if args.unless_recorded && !(args.kind.rules().records && args.expected == 0) {
            return Err(BackendError::new(format!(
                "a lock with a record is a plain lock taken once (not a {} lock, not a reentry)",
                args.kind.name()
            )));
        }
        let mut locks = self.locks(&args.key);
        let locks_now = &mut *locks;
        // Expired holds are swept when the table has grown (a semaphore reclaims its own
        // expired permits when it needs them).
        if !matches!(args.kind, LockKind::Semaphore(_)) {
            locks_now.sweep(now);
        }
        let attempt = match args.kind {
            LockKind::Plain if args.unless_recorded => {
                plain::take_unless_recorded(locks_now, args, now)
            }
            LockKind::Plain => match plain::take(locks_now, args, now) {
                Ok(_) => Attempt::Acquired,
                Err(attempt) => attempt,
            },
            LockKind::Fenced => fenced::take(locks_now, args, now),
            LockKind::Read | LockKind::Write => read_write::take(locks_now, args, now),
            LockKind::Semaphore(_) => semaphore::take(locks_now, args, now),
            LockKind::Fair => {
                let (attempt, turn) = fair::take(locks_now, args, now);
                // Outside the table's mutex: it reaches other managers.
                drop(locks);
                self.tell_turn(turn);
                attempt
            }
        };
        Ok(attempt)
    }

    /// A release, answered at once: each kind by its own rules.
    fn drop_one(&self, args: &ReleaseArgs) -> Result<ReleaseReply, BackendError> {
        let released = match args.kind {
            LockKind::Plain if args.record.is_some() => {
                let released = self.with_locks(&args.key, |locks, now| {
                    plain::release_recording(locks, args, now)
                });
                if released == Released::Unlocked {
                    // Every manager's waiters find the record now (not at the holder's
                    // lease).
                    self.tell_unlocked(&args.key, false);
                }
                released
            }
            _ if args.record.is_some() => {
                return Err(BackendError::new(format!(
                    "a {} lock leaves no record",
                    args.kind.name()
                )))
            }
            // One process: every other release goes through a manager, which wakes its
            // local waiters itself.
            LockKind::Plain | LockKind::Fenced => {
                self.with_locks(&args.key, |locks, now| plain::release(locks, args, now))
            }
            LockKind::Read | LockKind::Write => self.with_locks(&args.key, |locks, now| {
                read_write::release(locks, args, now)
            }),
            LockKind::Fair => {
                let (released, turn) =
                    self.with_locks(&args.key, |locks, now| fair::release(locks, args, now));
                self.tell_turn(turn);
                released
            }
            LockKind::Semaphore(_) => {
                let released =
                    self.with_locks(&args.key, |locks, now| semaphore::release(locks, args, now));
                if released == Released::Unlocked {
                    // Waiters of other managers on this backend may take the permits now.
                    self.tell_unlocked(&args.key, false);
                }
                released
            }
        };
        Ok(ReleaseReply::new(released))
    }

    /// Runs `f` on the part of the table that holds `key`, now.
    fn with_locks<T>(&self, key: &LockKey, f: impl FnOnce(&mut Locks, Instant) -> T) -> T {
        f(&mut self.locks(key), Instant::now())
    }

    /// The part of the table that holds `key`.
    fn locks(&self, key: &LockKey) -> std::sync::MutexGuard<'_, Locks> {
        let shard = &self.shards[key.shard(SHARDS)];
        shard.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn ready<T: Send + 'static>(value: T) -> BoxFuture<T> {
    Box::pin(std::future::ready(value))
}

impl Backend for MemoryBackend {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        ready(self.take(&args, Instant::now()))
    }

    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        ready(self.drop_one(&args))
    }

    #[inline]
    fn acquire_now(
        &self,
        args: &AcquireArgs,
        now: Instant,
    ) -> Option<Result<Attempt, BackendError>> {
        Some(self.take(args, now))
    }

    #[inline]
    fn release_now(&self, args: &ReleaseArgs) -> Option<Result<ReleaseReply, BackendError>> {
        Some(self.drop_one(args))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::new()
            .kinds(KindSet::ALL)
            .records(true)
            .inspects(true)
            .answers_at_once(true)
    }

    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        let renewed = self.with_locks(&args.key, |locks, now| match args.kind {
            LockKind::Plain | LockKind::Fair | LockKind::Fenced => plain::renew(locks, &args, now),
            LockKind::Read | LockKind::Write => read_write::renew(locks, &args, now),
            LockKind::Semaphore(_) => semaphore::renew(locks, &args, now),
        });
        ready(Ok(renewed))
    }

    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        match args.kind {
            LockKind::Fair => {
                let turn = self.with_locks(&args.key, |locks, now| fair::leave(locks, &args, now));
                self.tell_turn(turn);
            }
            LockKind::Write => {
                let readers_may_go =
                    self.with_locks(&args.key, |locks, now| read_write::leave(locks, &args, now));
                if readers_may_go {
                    self.tell_unlocked(&args.key, true);
                }
            }
            // No place or mark to take back.
            LockKind::Plain | LockKind::Read | LockKind::Fenced | LockKind::Semaphore(_) => {}
        }
        ready(Ok(()))
    }

    fn set_semaphore_limit(&self, key: LockKey, limit: u32) -> BoxFuture<Result<(), BackendError>> {
        let raised = self.with_locks(&key, |locks, now| {
            semaphore::set_limit(locks, &key, limit, now)
        });
        if raised {
            self.tell_unlocked(&key, false);
        }
        ready(Ok(()))
    }

    fn inspect(&self, key: LockKey) -> BoxFuture<Result<LockInfo, BackendError>> {
        ready(Ok(self.with_locks(&key, |locks, now| {
            inspect::inspect(locks, &key, now)
        })))
    }

    fn force_unlock(&self, key: LockKey) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        let freed = self.with_locks(&key, |locks, now| inspect::force_unlock(locks, &key, now));
        if freed.kind.is_some() {
            // Waiters of every manager look at once (the holders' next renewal fails).
            self.tell_unlocked(&key, true);
            let turn = self.with_locks(&key, |locks, _| {
                locks
                    .fair
                    .get(&key)
                    .and_then(|queue| queue.head())
                    .map(|owner| (key.clone(), owner))
            });
            self.tell_turn(turn);
        }
        ready(Ok(freed))
    }

    fn list_names(
        &self,
        pattern: String,
        limit: usize,
    ) -> BoxFuture<Result<Vec<LockKey>, BackendError>> {
        let mut found = crate::key::KeySet::default();
        for shard in self.shards.iter() {
            let locks = shard.0.lock().unwrap_or_else(|e| e.into_inner());
            inspect::list(&locks, &pattern, limit, &mut found);
        }
        ready(Ok(found.into_iter().take(limit + 1).collect()))
    }

    fn semaphore_usage(&self, key: LockKey) -> BoxFuture<Result<PermitUsage, BackendError>> {
        ready(Ok(self.with_locks(&key, |locks, now| {
            semaphore::usage(locks, &key, now)
        })))
    }

    // One process: every release goes through a manager, which wakes its local waiters
    // itself, and expiries are covered by the waiters' lease timers. Only a fair lock's
    // head is told its turn, through the manager that has it (several managers may share
    // this backend).
    fn listen(&self, notices: Notices) {
        let mut listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        listeners.retain(|notices| !notices.is_orphaned());
        listeners.push(notices);
    }

    fn name(&self) -> &'static str {
        "memory"
    }
}
