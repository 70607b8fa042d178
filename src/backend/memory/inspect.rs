//! Inspection, listing and force-unlock on the memory backend, by the same rules as on
//! Redis.

use crate::backend::glob::glob;
use crate::backend::memory::{Entry, Locks};
use crate::backend::{ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, LISTED_MAX};
use crate::key::{KeySet, LockKey};

/// What `key` holds now.
pub(in crate::backend) fn inspect(
    locks: &mut Locks,
    key: &LockKey,
    now: tokio::time::Instant,
) -> LockInfo {
    let mut info = LockInfo::free(key.clone());
    match locks.live(key, now) {
        Some(Entry::Plain(holder)) => {
            info.kind = Some(InspectedKind::Lock);
            info.holders.push(HolderInfo {
                owner: holder.owner.as_str().to_owned(),
                side: HolderSide::Exclusive,
                holds: holder.count,
                lease: Some(holder.expires.saturating_duration_since(now)),
            });
        }
        Some(Entry::Shared(shared)) => {
            info.kind = Some(InspectedKind::ReadWrite);
            info.holders = shared.inspected(now);
        }
        None => {}
    }
    if let Some(queue) = locks.fair.get(key) {
        info.queue = queue.inspected(now, LISTED_MAX);
        info.queued = queue.len();
    }
    info.fencing_token = locks.tokens.get(key).copied();
    if let Some(semaphore) = locks.semaphores.get_mut(key) {
        let (usage, permits) = semaphore.inspected(now);
        info.kind = info.kind.or(Some(InspectedKind::Semaphore));
        info.permits = Some(usage);
        info.holders.extend(permits.into_iter().take(LISTED_MAX));
    }
    info
}

/// Frees `key` whatever holds it; `None` when it needs waking nobody (nothing was held).
pub(in crate::backend) fn force_unlock(
    locks: &mut Locks,
    key: &LockKey,
    now: tokio::time::Instant,
) -> ForceUnlocked {
    let held = match locks.live(key, now) {
        Some(Entry::Plain(holder)) => Some((InspectedKind::Lock, holder.count)),
        Some(Entry::Shared(shared)) => Some((
            InspectedKind::ReadWrite,
            shared.inspected(now).iter().map(|h| h.holds).sum(),
        )),
        None => None,
    };
    if let Some((kind, freed)) = held {
        locks.held.remove(key);
        return ForceUnlocked {
            kind: Some(kind),
            freed,
            left_alone: None,
        };
    }
    match locks.semaphores.get_mut(key) {
        Some(semaphore) => ForceUnlocked {
            kind: Some(InspectedKind::Semaphore),
            freed: semaphore.free_all(now),
            left_alone: None,
        },
        None => ForceUnlocked {
            kind: None,
            freed: 0,
            left_alone: None,
        },
    }
}

/// Adds to `found` the names of the table that match `pattern` (Redis's glob syntax), until
/// it holds `limit + 1`.
pub(in crate::backend) fn list(locks: &Locks, pattern: &str, limit: usize, found: &mut KeySet) {
    let names = locks
        .held
        .keys()
        .chain(locks.semaphores.keys())
        .chain(locks.fair.keys());
    for key in names {
        if found.len() > limit {
            return;
        }
        if glob(pattern.as_bytes(), key.as_str().as_bytes()) {
            found.insert(key.clone());
        }
    }
}
