//! The plain lock in memory, with the rules of `batch.lua`: one owner, its count of holds
//! and its lease; and locks with a record (`batch.lua`'s claim): an acquisition that finds a
//! record takes nothing, a last release may leave one.

use tokio::time::Instant;

use crate::backend::memory::{Entry, Locks, PlainHolder};
use crate::backend::{AcquireArgs, Attempt, ReleaseArgs, RenewArgs};
use crate::error::Released;

/// An acquisition; `Ok(counted)`: the owner holds the lock (`counted`: this attempt
/// counted a hold; `false` for a re-sent one that already had).
pub(in crate::backend) fn take(
    locks: &mut Locks,
    args: &AcquireArgs,
    now: Instant,
) -> Result<bool, Attempt> {
    let expires = now + args.lease;
    match locks.live(&args.key, now) {
        None if args.expected == 0 => {
            let holder = PlainHolder {
                owner: args.owner.clone(),
                count: 1,
                expires,
                awaited: false,
            };
            locks.held.insert(args.key.clone(), Entry::Plain(holder));
            Ok(true)
        }
        Some(Entry::Plain(holder)) if holder.owner == args.owner => {
            let counted = holder.count == args.expected;
            if counted {
                holder.count += 1;
            } else if holder.count != args.expected + 1 {
                return Err(Attempt::Lost);
            }
            holder.expires = expires;
            Ok(counted)
        }
        None => Err(Attempt::Lost),
        Some(_) if args.expected > 0 => Err(Attempt::Lost),
        Some(entry) => Err(Attempt::Busy(Some(entry.expires() - now))),
    }
}

/// An acquisition unless the lock has a record: looked at in the same step as the lock,
/// so that a record stored meanwhile is seen.
pub(in crate::backend) fn take_unless_recorded(
    locks: &mut Locks,
    args: &AcquireArgs,
    now: Instant,
) -> Attempt {
    if let Some(record) = record(locks, &args.key, now) {
        return Attempt::Recorded(record);
    }
    match (take(locks, args, now), &args.work) {
        (Ok(_), None) => Attempt::Acquired,
        (Ok(_), Some(work)) => {
            let taken_for = (args.owner.clone(), work.clone());
            locks.works.insert(args.key.clone(), taken_for);
            Attempt::Acquired
        }
        (Err(Attempt::Busy(busy)), work) => {
            // `take` found it live: held, not expired.
            let Some(Entry::Plain(holder)) = locks.held.get_mut(&args.key) else {
                return Attempt::Busy(busy);
            };
            if let (Some(work), Some((owner, held_for))) = (work, locks.works.get(&args.key)) {
                if holder.owner == *owner && held_for != work {
                    return Attempt::HeldForOtherWork;
                }
            }
            // Someone waits for what this hold leaves.
            holder.awaited = true;
            Attempt::Busy(busy)
        }
        (Err(attempt), _) => attempt,
    }
}

/// A release (also a fair or fenced lock's).
pub(in crate::backend) fn release(locks: &mut Locks, args: &ReleaseArgs, now: Instant) -> Released {
    // Looked up once here (`live` looks twice to hand out a live entry): this runs for
    // every release.
    let holder = match locks.held.get_mut(&args.key) {
        Some(Entry::Plain(holder)) if holder.expires > now => holder,
        Some(Entry::Plain(_)) => {
            // Its lease ran out: gone, as on Redis.
            locks.held.remove(&args.key);
            return Released::NotHeld;
        }
        Some(Entry::Shared(_)) => {
            // Another kind's lock (`live` drops it if it expired).
            let _ = locks.live(&args.key, now);
            return Released::NotHeld;
        }
        None => return Released::NotHeld,
    };
    if holder.owner != args.owner {
        return Released::NotHeld;
    }
    if holder.count + 1 == args.expected {
        // A re-sent release that already counted.
        return Released::StillHeld;
    }
    holder.count -= 1;
    if holder.count > 0 {
        holder.expires = now + args.lease;
        Released::StillHeld
    } else {
        locks.held.remove(&args.key);
        if !locks.works.is_empty() {
            locks.works.remove(&args.key);
        }
        Released::Unlocked
    }
}

/// A last release that leaves `args.record` (given) with the name, only if the owner
/// still held the lock.
pub(in crate::backend) fn release_recording(
    locks: &mut Locks,
    args: &ReleaseArgs,
    now: Instant,
) -> Released {
    let awaited = match locks.held.get(&args.key) {
        Some(Entry::Plain(holder)) => holder.awaited,
        _ => false,
    };
    let released = release(locks, args, now);
    let record = args
        .record
        .as_ref()
        .filter(|record| awaited || !record.only_if_awaited);
    if let (Released::Unlocked, Some(record)) = (released, record) {
        locks.records.insert(
            args.key.clone(),
            (record.value.clone(), now + record.retention),
        );
    }
    released
}

/// A renewal (also a fair or fenced lock's).
pub(in crate::backend) fn renew(locks: &mut Locks, args: &RenewArgs, now: Instant) -> bool {
    match locks.live(&args.key, now) {
        Some(Entry::Plain(holder)) if holder.owner == args.owner => {
            holder.expires = now + args.lease;
            true
        }
        _ => false,
    }
}

/// The record of `key`, unless its retention ran out (then it is dropped).
fn record(locks: &mut Locks, key: &crate::key::LockKey, now: Instant) -> Option<bytes::Bytes> {
    let (record, expires) = locks.records.get(key)?;
    if *expires > now {
        return Some(record.clone());
    }
    locks.records.remove(key);
    None
}
