//! An in-process backend with the same semantics as Redis: reentrant holds, leases that
//! expire, FIFO wake-one waiting and a loss signal; read-write locks with Redisson's rules
//! (`read_write`). The embedded default for examples, tests and single-process services.

mod fair;
mod read_write;

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

use super::{
    AcquireArgs, Attempt, Backend, BoxFuture, FairArgs, FairAttempt, LeaveArgs, Notices,
    ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::{BackendError, Released};
use crate::key::{KeyMap, LockKey, OwnerId};
use crate::kind::LockKind;
use read_write::SharedHold;

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

#[derive(Default, Debug)]
struct Locks {
    held: KeyMap<Entry>,
    /// Fair locks' queues of waiters.
    fair: KeyMap<fair::FairQueue>,
    /// Read-write locks' writers waiting behind readers, each with when its mark runs out
    /// (see `read_write`).
    waiting_writers: KeyMap<Vec<(OwnerId, Instant)>>,
    /// Records left by releases (see `ReleaseArgs::record`), with when they expire.
    records: KeyMap<(bytes::Bytes, Instant)>,
    /// Fenced locks' last tokens. Never removed, like Redisson's token keys (a token must
    /// never be given twice): one entry per name ever locked fenced.
    tokens: KeyMap<u64>,
    /// Size of `held` after the last sweep of expired entries.
    swept_at: usize,
}

/// A held lock.
#[derive(Debug)]
enum Entry {
    /// A plain lock.
    Exclusive(Hold),
    /// A read-write lock (boxed: the plain lock's entries stay small).
    Shared(Box<SharedHold>),
}

/// A plain lock's holder: its owner, the owner's count, and when its lease ends.
#[derive(Debug)]
struct Hold {
    owner: OwnerId,
    count: u32,
    expires: Instant,
}

impl Entry {
    /// When the lock's lease (Redis: the key's PEXPIRE) ends.
    fn expires(&self) -> Instant {
        match self {
            Entry::Exclusive(hold) => hold.expires,
            Entry::Shared(shared) => shared.expires,
        }
    }
}

impl MemoryBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// Deletes a lock whoever holds it, like `DEL <key>` on Redis (for administration and
    /// tests). Its holder's next renewal finds it gone and fires its loss signal. Returns
    /// whether a live lock was deleted.
    pub fn force_unlock(&self, key: &LockKey) -> bool {
        self.with_locks(key, |locks, now| {
            let live = locks.live(key, now).is_some();
            locks.held.remove(key);
            live
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
                locks.held.len() + locks.records.len()
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

    /// Tells a fair waiter that it may take the lock (through every manager on this
    /// backend; the one that has the waiter wakes it).
    fn wake(&self, wake: fair::Wake) {
        let Some((key, owner)) = wake else { return };
        let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
        for notices in listeners.iter() {
            notices.turn(&key, &owner);
        }
    }

    /// An acquisition, answered at once.
    pub(crate) fn take(&self, args: &AcquireArgs) -> Result<Attempt, BackendError> {
        if args.unless_recorded && (args.kind != LockKind::Exclusive || args.expected != 0) {
            return Err(BackendError::new(format!(
                "a lock with a record is a plain lock taken once (not a {} lock, not a reentry)",
                args.kind.name()
            )));
        }
        if args.kind == LockKind::Fair && args.expected == 0 {
            let (attempt, wake) = self.with_locks(&args.key, |locks, now| {
                locks.sweep(now);
                fair::try_take(locks, args, now)
            });
            self.wake(wake);
            return Ok(attempt);
        }
        let attempt = self.with_locks(&args.key, |locks, now| {
            locks.sweep(now);
            // Looked at in the same step as the lock: a record stored meanwhile is seen.
            if args.unless_recorded {
                if let Some(record) = locks.record(&args.key, now) {
                    return Attempt::Recorded(record);
                }
            }
            if args.kind.is_read_write() {
                return read_write::take(locks, args, now);
            }
            let expires = now + args.lease;
            let counted = match locks.live(&args.key, now) {
                None if args.expected == 0 => {
                    locks.held.insert(
                        args.key.clone(),
                        Entry::Exclusive(Hold {
                            owner: args.owner.clone(),
                            count: 1,
                            expires,
                        }),
                    );
                    true
                }
                Some(Entry::Exclusive(entry)) if entry.owner == args.owner => {
                    let counted = entry.count == args.expected;
                    if counted {
                        entry.count += 1;
                    } else if entry.count != args.expected + 1 {
                        return Attempt::Lost;
                    }
                    entry.expires = expires;
                    counted
                }
                None => return Attempt::Lost,
                Some(_) if args.expected > 0 => return Attempt::Lost,
                Some(entry) => return Attempt::Busy(Some(entry.expires() - now)),
            };
            if args.kind != LockKind::Fenced {
                return Attempt::Acquired;
            }
            // A re-sent acquisition that already counted answers the token as it is.
            let token = locks.tokens.entry(args.key.clone()).or_insert(0);
            *token += u64::from(counted);
            Attempt::Fenced(*token)
        });
        Ok(attempt)
    }

    /// A release, answered at once. One process: nobody else listens.
    pub(crate) fn drop_one(&self, args: &ReleaseArgs) -> Result<ReleaseReply, BackendError> {
        if let Some(record) = &args.record {
            let released = self.with_locks(&args.key, |locks, now| {
                let released = locks.release_exclusive(args, now);
                if released == Released::Unlocked {
                    locks.records.insert(
                        args.key.clone(),
                        (record.value.clone(), now + record.retention),
                    );
                }
                released
            });
            if released == Released::Unlocked {
                // Every manager's waiters find the record now (not at the holder's lease).
                let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
                for notices in listeners.iter() {
                    if notices.may_be_watched(&args.key) {
                        notices.unlocked(&args.key);
                    }
                }
            }
            return Ok(ReleaseReply::new(released));
        }
        let (released, wake) = self.with_locks(&args.key, |locks, now| {
            if args.kind.is_read_write() {
                return (read_write::release(locks, args, now), None);
            }
            let released = locks.release_exclusive(args, now);
            let wake = (args.kind == LockKind::Fair)
                .then(|| fair::release(locks, args, now, released))
                .flatten();
            (released, wake)
        });
        self.wake(wake);
        Ok(ReleaseReply::new(released))
    }

    /// Runs `f` on the part of the table that holds `key`.
    fn with_locks<T>(&self, key: &LockKey, f: impl FnOnce(&mut Locks, Instant) -> T) -> T {
        let shard = &self.shards[key.shard(SHARDS)];
        let mut locks = shard.0.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut locks, Instant::now())
    }
}

impl Locks {
    /// A plain (or fair) lock's release.
    fn release_exclusive(&mut self, args: &ReleaseArgs, now: Instant) -> Released {
        let Some(Entry::Exclusive(entry)) = self.live(&args.key, now) else {
            return Released::NotHeld;
        };
        if entry.owner != args.owner {
            return Released::NotHeld;
        }
        if entry.count + 1 == args.expected {
            // A re-sent release that already counted.
            return Released::StillHeld;
        }
        entry.count -= 1;
        if entry.count > 0 {
            entry.expires = now + args.lease;
            Released::StillHeld
        } else {
            self.held.remove(&args.key);
            Released::Unlocked
        }
    }

    /// The live hold of `key`, dropping it first if its lease ran out (for a read-write
    /// lock: the read holds whose leases ran out, and the lock once nobody holds it).
    fn live(&mut self, key: &LockKey, now: Instant) -> Option<&mut Entry> {
        // A free name (the common case) costs one look.
        let entry = self.held.get_mut(key)?;
        let expired = match entry {
            Entry::Exclusive(hold) => hold.expires <= now,
            Entry::Shared(shared) => !shared.keep_live(now),
        };
        if expired {
            self.held.remove(key);
            return None;
        }
        self.held.get_mut(key)
    }

    /// Expired holds (and records) are removed lazily; sweep them all when the tables have
    /// doubled, so that names nobody touches again do not pile up.
    fn sweep(&mut self, now: Instant) {
        if self.held.len() + self.records.len() >= 2 * self.swept_at.max(64) {
            self.held.retain(|_, entry| entry.expires() > now);
            self.records.retain(|_, (_, expires)| *expires > now);
            self.swept_at = self.held.len() + self.records.len();
        }
    }

    /// The record of `key`, unless its retention ran out (then it is dropped).
    fn record(&mut self, key: &LockKey, now: Instant) -> Option<bytes::Bytes> {
        let (record, expires) = self.records.get(key)?;
        if *expires > now {
            return Some(record.clone());
        }
        self.records.remove(key);
        None
    }
}

fn ready<T: Send + 'static>(value: T) -> BoxFuture<T> {
    Box::pin(std::future::ready(value))
}

impl Backend for MemoryBackend {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        ready(self.take(&args))
    }

    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        ready(self.drop_one(&args))
    }

    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        let renewed = self.with_locks(&args.key, |locks, now| match locks.live(&args.key, now) {
            Some(Entry::Exclusive(entry)) if entry.owner == args.owner => {
                entry.expires = now + args.lease;
                true
            }
            Some(Entry::Shared(shared)) if args.kind.is_read_write() => shared.renew(&args, now),
            _ => false,
        });
        ready(Ok(renewed))
    }

    fn fair_acquire(&self, args: FairArgs) -> BoxFuture<Result<FairAttempt, BackendError>> {
        let (attempt, wake) =
            self.with_locks(&args.key, |locks, now| fair::queue(locks, &args, now));
        self.wake(wake);
        ready(Ok(attempt))
    }

    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        match args.kind {
            LockKind::Fair => {
                let wake = self.with_locks(&args.key, |locks, now| fair::leave(locks, &args, now));
                self.wake(wake);
            }
            LockKind::Write => {
                let readers_may_go =
                    self.with_locks(&args.key, |locks, now| read_write::leave(locks, &args, now));
                if readers_may_go {
                    let listeners = self.listeners.lock().unwrap_or_else(|e| e.into_inner());
                    for notices in listeners.iter() {
                        notices.unlocked_all(&args.key);
                    }
                }
            }
            _ => {}
        }
        ready(Ok(()))
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
