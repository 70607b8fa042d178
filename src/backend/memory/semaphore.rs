//! The semaphore in memory, with the rules of `semaphore.lua`: a limit per name, and the
//! holders of permits, each with its count and the end of its lease. Permits whose lease
//! ended are taken back by the next acquisition (or look) of the name.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::backend::memory::Locks;
use crate::backend::{permit_ids_hex, PermitUsage};
use crate::backend::{AcquireArgs, Attempt, ReleaseArgs, RenewArgs};
use crate::error::Released;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// One semaphore: its limit (set by its first acquisition, or explicitly) and its holders.
#[derive(Debug, Default)]
pub(in crate::backend) struct Semaphore {
    limit: u32,
    holders: HashMap<OwnerId, (u32, Instant)>,
}

impl Semaphore {
    /// Drops the holders whose lease ended; the permits held now.
    fn in_use(&mut self, now: Instant) -> u32 {
        self.holders.retain(|_, (_, expires)| *expires > now);
        self.holders.values().map(|(count, _)| count).sum()
    }

    /// Holders of permits now (for the table's size).
    pub(in crate::backend) fn holders(&self) -> usize {
        self.holders.len()
    }

    /// Its limit and live permits as an inspection shows them (one entry per permit, by
    /// its id, as on Redis).
    pub(in crate::backend) fn inspected(
        &mut self,
        now: Instant,
    ) -> (PermitUsage, Vec<crate::backend::info::HolderInfo>) {
        use crate::backend::info::{HolderInfo, HolderSide};
        let in_use = self.in_use(now);
        let permits = self
            .holders
            .iter()
            .flat_map(|(owner, (count, expires))| {
                let lease = Some(expires.saturating_duration_since(now));
                permit_ids_hex(owner, *count)
                    .into_iter()
                    .map(move |id| HolderInfo {
                        owner: id,
                        side: HolderSide::Permit,
                        holds: 1,
                        lease,
                    })
            })
            .collect();
        (PermitUsage::new(Some(self.limit), in_use), permits)
    }

    /// Takes every permit back (a force-unlock); how many there were.
    pub(in crate::backend) fn free_all(&mut self, now: Instant) -> u32 {
        let in_use = self.in_use(now);
        self.holders.clear();
        in_use
    }

    fn live(&mut self, owner: &OwnerId, now: Instant) -> Option<&mut (u32, Instant)> {
        self.holders
            .get_mut(owner)
            .filter(|(_, expires)| *expires > now)
    }
}

/// An acquisition of `args.kind`'s permits.
pub(in crate::backend) fn take(locks: &mut Locks, args: &AcquireArgs, now: Instant) -> Attempt {
    let LockKind::Semaphore(permits) = args.kind else {
        return Attempt::Lost;
    };
    let semaphore = locks
        .semaphores
        .entry(args.key.clone())
        .or_insert_with(|| Semaphore {
            limit: permits.limit(),
            holders: HashMap::new(),
        });
    let expires = now + args.lease;
    if let Some(held) = semaphore.live(&args.owner, now) {
        // A reentry, or a re-sent acquisition that already took effect.
        held.1 = expires;
        return Attempt::Acquired;
    }
    if args.expected > 0 {
        return Attempt::Lost;
    }
    let in_use = semaphore.in_use(now);
    if in_use + permits.count() <= semaphore.limit {
        semaphore
            .holders
            .insert(args.owner.clone(), (permits.count(), expires));
        return Attempt::Acquired;
    }
    let first_end = semaphore
        .holders
        .values()
        .map(|(_, expires)| *expires)
        .min();
    Attempt::Busy(first_end.map(|end| end.saturating_duration_since(now)))
}

/// A release: the last hold gives the permits back; `Unlocked` tells the caller to wake
/// waiters.
pub(in crate::backend) fn release(locks: &mut Locks, args: &ReleaseArgs, now: Instant) -> Released {
    let Some(semaphore) = locks.semaphores.get_mut(&args.key) else {
        return Released::NotHeld;
    };
    if args.expected > 1 {
        return match semaphore.live(&args.owner, now) {
            Some(held) => {
                held.1 = now + args.lease;
                Released::StillHeld
            }
            None => Released::NotHeld,
        };
    }
    match semaphore.holders.remove(&args.owner) {
        Some((_, expires)) if expires > now => Released::Unlocked,
        _ => Released::NotHeld,
    }
}

/// A renewal: only of permits whose lease has not ended.
pub(in crate::backend) fn renew(locks: &mut Locks, args: &RenewArgs, now: Instant) -> bool {
    let held = locks
        .semaphores
        .get_mut(&args.key)
        .and_then(|semaphore| semaphore.live(&args.owner, now));
    match held {
        Some(held) => {
            held.1 = now + args.lease;
            true
        }
        None => false,
    }
}

/// Sets the limit of `key`'s semaphore; `true` when permits became available.
pub(in crate::backend) fn set_limit(
    locks: &mut Locks,
    key: &LockKey,
    limit: u32,
    now: Instant,
) -> bool {
    let semaphore = locks.semaphores.entry(key.clone()).or_default();
    let raised = limit > semaphore.limit;
    semaphore.limit = limit;
    raised && semaphore.in_use(now) < limit
}

/// The permits of `key`'s semaphore now.
pub(in crate::backend) fn usage(locks: &mut Locks, key: &LockKey, now: Instant) -> PermitUsage {
    match locks.semaphores.get_mut(key) {
        Some(semaphore) => {
            let in_use = semaphore.in_use(now);
            PermitUsage::new(Some(semaphore.limit), in_use)
        }
        None => PermitUsage::new(None, 0),
    }
}
