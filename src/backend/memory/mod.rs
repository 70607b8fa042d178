//! The in-process backend ([`MemoryBackend`], `backend.rs`): its lock table here, one entry
//! per held name, and the tables that some kinds keep beside it (fair queues, waiting
//! writers' marks, records, fencing tokens); each kind's rules in a file of its own
//! (`plain.rs`, `fair.rs`, `read_write.rs`, `fenced.rs`, `semaphore.rs`), the operators'
//! views in `inspect.rs`.

mod backend;
mod fair;
mod fenced;
mod inspect;
mod plain;
mod read_write;
mod semaphore;

pub use backend::MemoryBackend;

use tokio::time::Instant;

use crate::key::{KeyMap, LockKey, OwnerId};
use fair::FairQueue;
use read_write::SharedHold;
use semaphore::Semaphore;

/// One part of the lock table (one shard's).
#[derive(Default, Debug)]
pub(in crate::backend) struct Locks {
    pub(in crate::backend) held: KeyMap<Entry>,
    /// Fair locks' queues of waiters.
    pub(in crate::backend) fair: KeyMap<FairQueue>,
    /// Read-write locks' writers waiting behind readers, each with when its mark runs out
    /// (see `read_write`).
    pub(in crate::backend) waiting_writers: KeyMap<Vec<(OwnerId, Instant)>>,
    /// Records left by releases (see `ReleaseArgs::record`), with when they expire.
    pub(in crate::backend) records: KeyMap<(bytes::Bytes, Instant)>,
    /// The work locks with a record were taken for (see `AcquireArgs::work`), with the
    /// owner that took each: one whose owner no longer holds the lock is stale, ignored and
    /// swept. Beside `held` rather than in its entries, which every lock moves about.
    pub(in crate::backend) works: KeyMap<(OwnerId, bytes::Bytes)>,
    /// Fenced locks' last tokens. Never removed, like Redisson's token keys (a token must
    /// never be given twice): one entry per name ever locked fenced.
    pub(in crate::backend) tokens: KeyMap<u64>,
    /// Semaphores: each one's limit and holders. Kept once used, like Redis's count key
    /// (the limit in force stays).
    pub(in crate::backend) semaphores: KeyMap<Semaphore>,
    /// Size of `held` and `records` after the last sweep of expired entries.
    swept_at: usize,
}

/// A held lock.
#[derive(Debug)]
pub(in crate::backend) enum Entry {
    /// A plain lock's (also a fair or fenced lock's: the same lock).
    Plain(PlainHolder),
    /// A read-write lock's (boxed: the plain lock's entries stay small).
    Shared(Box<SharedHold>),
}

/// A plain lock's holder: its owner, the owner's count, and when its lease ends.
#[derive(Debug)]
pub(in crate::backend) struct PlainHolder {
    pub(in crate::backend) owner: OwnerId,
    pub(in crate::backend) count: u32,
    pub(in crate::backend) expires: Instant,
    /// An acquisition unless recorded found it held by this hold: a record stored
    /// [only if awaited](crate::backend::LockRecord::only_if_awaited) is stored.
    pub(in crate::backend) awaited: bool,
}

impl Entry {
    /// When the lock's lease (Redis: the key's PEXPIRE) ends.
    pub(in crate::backend) fn expires(&self) -> Instant {
        match self {
            Entry::Plain(holder) => holder.expires,
            Entry::Shared(shared) => shared.expires,
        }
    }
}

impl Locks {
    /// The live hold of `key`, dropping it first if its lease ran out (for a read-write
    /// lock: the read holds whose leases ran out, and the lock once nobody holds it).
    pub(in crate::backend) fn live(&mut self, key: &LockKey, now: Instant) -> Option<&mut Entry> {
        // A free name (the common case) costs one look.
        let entry = self.held.get_mut(key)?;
        let expired = match entry {
            Entry::Plain(holder) => holder.expires <= now,
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
    pub(in crate::backend) fn sweep(&mut self, now: Instant) {
        if self.held.len() + self.records.len() >= 2 * self.swept_at.max(64) {
            self.held.retain(|_, entry| entry.expires() > now);
            self.records.retain(|_, (_, expires)| *expires > now);
            let held = &self.held;
            self.works.retain(|key, (owner, _)| {
                matches!(held.get(key), Some(Entry::Plain(holder)) if holder.owner == *owner)
            });
            self.swept_at = self.held.len() + self.records.len();
        }
    }
}
