//! Read-write locks in memory, with the rules of Redisson's `RReadWriteLock` (and of
//! `read_write.lua`): readers share; a writer excludes everyone but
//! itself; the writer may also read (a downgrade); a reader cannot also write. Each
//! reader's holds have their own lease (Redis: one timeout key per hold), so the holds of a
//! reader that stopped renewing expire while the others read on.

use std::time::Duration;

use tokio::time::Instant;

use crate::backend::memory::{Entry, Locks};
use crate::backend::WRITER_MARK_LEASE;
use crate::backend::{AcquireArgs, Attempt, LeaveArgs, ReleaseArgs, RenewArgs};
use crate::error::Released;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// A read-write lock's holders.
#[derive(Debug)]
pub(in crate::backend) struct SharedHold {
    /// The writer and its count (Redis: mode `write`).
    writer: Option<(OwnerId, u32)>,
    readers: Vec<ReadHolder>,
    /// The lock's lease: the writer's, or the longest reader's (Redis: the hash's PEXPIRE).
    pub(in crate::backend) expires: Instant,
}

#[derive(Debug)]
struct ReadHolder {
    owner: OwnerId,
    count: u32,
    expires: Instant,
}

impl SharedHold {
    /// Its holders as an inspection shows them (the writer first).
    pub(in crate::backend) fn inspected(
        &self,
        now: Instant,
    ) -> Vec<crate::backend::info::HolderInfo> {
        use crate::backend::info::{HolderInfo, HolderSide};
        let left = |expires: Instant| Some(expires.saturating_duration_since(now));
        let writer = self.writer.iter().map(|(owner, count)| HolderInfo {
            owner: owner.as_str().to_owned(),
            side: HolderSide::Write,
            holds: *count,
            lease: left(self.expires),
        });
        let readers = self.readers.iter().map(|reader| HolderInfo {
            owner: reader.owner.as_str().to_owned(),
            side: HolderSide::Read,
            holds: reader.count,
            lease: left(reader.expires),
        });
        writer.chain(readers).collect()
    }

    /// Drops read holds whose lease ran out; `false` when the lock is over (its lease ran
    /// out, or nobody holds it any more).
    pub(in crate::backend) fn keep_live(&mut self, now: Instant) -> bool {
        if self.expires <= now {
            return false;
        }
        self.readers.retain(|reader| reader.expires > now);
        self.writer.is_some() || !self.readers.is_empty()
    }

    fn reader(&mut self, owner: &OwnerId) -> Option<&mut ReadHolder> {
        self.readers
            .iter_mut()
            .find(|reader| reader.owner == *owner)
    }

    fn count(&self, kind: LockKind, owner: &OwnerId) -> u32 {
        match kind {
            LockKind::Read => self
                .readers
                .iter()
                .find(|reader| reader.owner == *owner)
                .map_or(0, |reader| reader.count),
            _ => match &self.writer {
                Some((writer, count)) if writer == owner => *count,
                _ => 0,
            },
        }
    }

    /// Renews `args.owner`'s holds of `args.kind`; `false` when it has none.
    pub(in crate::backend) fn renew(&mut self, args: &RenewArgs, now: Instant) -> bool {
        let until = now + args.lease;
        let renewed = match args.kind {
            LockKind::Read => match self.reader(&args.owner) {
                Some(reader) => {
                    reader.expires = until;
                    true
                }
                None => false,
            },
            _ => self.count(args.kind, &args.owner) > 0,
        };
        if renewed {
            self.expires = self.expires.max(until);
        }
        renewed
    }
}

impl Locks {
    /// How long until the last live mark of a writer waiting for `key` runs out (`None`:
    /// no writer waits). Marks that ran out are dropped.
    fn writer_waits(&mut self, key: &LockKey, now: Instant) -> Option<Duration> {
        let marks = self.waiting_writers.get_mut(key)?;
        marks.retain(|(_, until)| *until > now);
        let last = marks.iter().map(|(_, until)| *until).max();
        if last.is_none() {
            self.waiting_writers.remove(key);
        }
        last.map(|until| until - now)
    }

    /// `owner` marks its wait for `key` until `until`.
    fn mark_writer(&mut self, key: &LockKey, owner: &OwnerId, until: Instant) {
        let marks = self.waiting_writers.entry(key.clone()).or_default();
        match marks.iter_mut().find(|(writer, _)| writer == owner) {
            Some(mark) => mark.1 = until,
            None => marks.push((owner.clone(), until)),
        }
    }

    /// `owner` takes back its mark; whether it had one.
    fn unmark_writer(&mut self, key: &LockKey, owner: &OwnerId) -> bool {
        let Some(marks) = self.waiting_writers.get_mut(key) else {
            return false;
        };
        let before = marks.len();
        marks.retain(|(writer, _)| writer != owner);
        let had = marks.len() < before;
        if marks.is_empty() {
            self.waiting_writers.remove(key);
        }
        had
    }

    fn is_marked(&self, key: &LockKey, owner: &OwnerId) -> bool {
        self.waiting_writers
            .get(key)
            .is_some_and(|marks| marks.iter().any(|(writer, _)| writer == owner))
    }
}

/// A waiting writer stops waiting; whether readers held back by it alone may go on now.
pub(in crate::backend) fn leave(locks: &mut Locks, args: &LeaveArgs, now: Instant) -> bool {
    if !locks.unmark_writer(&args.key, &args.owner) {
        return false;
    }
    let writing = matches!(
        locks.live(&args.key, now),
        Some(Entry::Shared(shared)) if shared.writer.is_some()
    );
    !writing && locks.writer_waits(&args.key, now).is_none()
}

/// An acquisition of a read or write lock (with the waiting writers' marks of
/// `read_write.lua`: a writer that waits behind readers marks its wait, for a short lease
/// its next attempts renew, and new readers hold back meanwhile).
pub(in crate::backend) fn take(locks: &mut Locks, args: &AcquireArgs, now: Instant) -> Attempt {
    let downgrade = matches!(
        locks.live(&args.key, now),
        Some(Entry::Shared(shared)) if shared.count(LockKind::Write, &args.owner) > 0
    );
    if args.kind == LockKind::Read && args.expected == 0 && !downgrade {
        let held_already = matches!(
            locks.live(&args.key, now),
            Some(Entry::Shared(shared)) if shared.count(LockKind::Read, &args.owner) == 1
        );
        // A re-sent acquisition that already counted is answered below.
        if !held_already {
            if let Some(waits) = locks.writer_waits(&args.key, now) {
                return Attempt::HeldBack(waits.max(Duration::from_millis(1)));
            }
        }
    }
    let attempt = take_unmarked(locks, args, now);
    if args.kind != LockKind::Write {
        return attempt;
    }
    match attempt {
        Attempt::Acquired => {
            locks.unmark_writer(&args.key, &args.owner);
        }
        Attempt::Busy(busy) if args.waits => {
            let behind_readers = matches!(
                locks.live(&args.key, now),
                Some(Entry::Shared(shared)) if shared.writer.is_none()
            );
            if behind_readers || locks.is_marked(&args.key, &args.owner) {
                locks.mark_writer(&args.key, &args.owner, now + WRITER_MARK_LEASE);
                let renew = (WRITER_MARK_LEASE / 3).max(Duration::from_millis(1));
                return Attempt::Busy(Some(busy.map_or(renew, |busy| busy.min(renew))));
            }
        }
        _ => {}
    }
    attempt
}

/// An acquisition by Redisson's rules alone.
fn take_unmarked(locks: &mut Locks, args: &AcquireArgs, now: Instant) -> Attempt {
    let until = now + args.lease;
    let shared = match locks.live(&args.key, now) {
        None if args.expected > 0 => return Attempt::Lost,
        None => {
            let (writer, readers) = match args.kind {
                LockKind::Read => (
                    None,
                    vec![ReadHolder {
                        owner: args.owner.clone(),
                        count: 1,
                        expires: until,
                    }],
                ),
                _ => (Some((args.owner.clone(), 1)), Vec::new()),
            };
            let shared = SharedHold {
                writer,
                readers,
                expires: until,
            };
            locks
                .held
                .insert(args.key.clone(), Entry::Shared(Box::new(shared)));
            return Attempt::Acquired;
        }
        // Another kind's lock on the name: busy.
        Some(Entry::Plain(_)) if args.expected > 0 => return Attempt::Lost,
        Some(Entry::Plain(hold)) => return Attempt::Busy(Some(hold.expires - now)),
        Some(Entry::Shared(shared)) => shared,
    };
    let count = shared.count(args.kind, &args.owner);
    // A re-sent acquisition that already counted.
    if count == args.expected + 1 {
        return Attempt::Acquired;
    }
    if args.expected > 0 && count != args.expected {
        return Attempt::Lost;
    }
    let allowed = match args.kind {
        LockKind::Read => shared
            .writer
            .as_ref()
            .is_none_or(|(writer, _)| *writer == args.owner),
        _ => count > 0,
    };
    if !allowed {
        return Attempt::Busy(Some(shared.expires - now));
    }
    match args.kind {
        LockKind::Read => match shared.reader(&args.owner) {
            Some(reader) => {
                reader.count += 1;
                reader.expires = reader.expires.max(until);
            }
            None => shared.readers.push(ReadHolder {
                owner: args.owner.clone(),
                count: 1,
                expires: until,
            }),
        },
        _ => {
            if let Some((_, count)) = shared.writer.as_mut() {
                *count += 1;
            }
        }
    }
    shared.expires = shared.expires.max(until);
    Attempt::Acquired
}

/// A release of a read or write hold. `Unlocked`: this owner's last hold of the kind ended
/// (other readers may still hold the lock).
pub(in crate::backend) fn release(locks: &mut Locks, args: &ReleaseArgs, now: Instant) -> Released {
    let Some(Entry::Shared(shared)) = locks.live(&args.key, now) else {
        return Released::NotHeld;
    };
    let count = shared.count(args.kind, &args.owner);
    if count > 0 && count + 1 == args.expected {
        // A re-sent release that already counted.
        return Released::StillHeld;
    }
    if count == 0 || count != args.expected {
        return Released::NotHeld;
    }
    let released = if count > 1 {
        Released::StillHeld
    } else {
        Released::Unlocked
    };
    match args.kind {
        LockKind::Read => {
            shared.readers.retain_mut(|reader| {
                if reader.owner == args.owner {
                    reader.count -= 1;
                }
                reader.count > 0
            });
            if shared.writer.is_none() {
                // The lock lives as long as its longest read hold.
                if let Some(longest) = shared.readers.iter().map(|r| r.expires).max() {
                    shared.expires = longest;
                }
            }
        }
        _ => match shared.writer.as_mut() {
            Some((_, count)) if *count > 1 => {
                *count -= 1;
                shared.expires = now + args.lease;
            }
            _ => shared.writer = None,
        },
    }
    if shared.writer.is_none() && shared.readers.is_empty() {
        locks.held.remove(&args.key);
    }
    released
}

/// A renewal of a read or write hold.
pub(in crate::backend) fn renew(locks: &mut Locks, args: &RenewArgs, now: Instant) -> bool {
    match locks.live(&args.key, now) {
        Some(Entry::Shared(shared)) => shared.renew(args, now),
        _ => false,
    }
}
