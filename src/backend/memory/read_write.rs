//! Read-write locks in memory, with the rules of Redisson's `RReadWriteLock` (and of
//! `backend/redis/scripts/read_write.lua`): readers share; a writer excludes everyone but
//! itself; the writer may also read (a downgrade); a reader cannot also write. Each
//! reader's holds have their own lease (Redis: one timeout key per hold), so the holds of a
//! reader that stopped renewing expire while the others read on.

use tokio::time::Instant;

use super::{Entry, Locks};
use crate::backend::{AcquireArgs, Attempt, ReleaseArgs, RenewArgs};
use crate::error::Released;
use crate::key::OwnerId;
use crate::kind::LockKind;

/// A read-write lock's holders.
#[derive(Debug)]
pub(super) struct SharedHold {
    /// The writer and its count (Redis: mode `write`).
    writer: Option<(OwnerId, u32)>,
    readers: Vec<Reader>,
    /// The lock's lease: the writer's, or the longest reader's (Redis: the hash's PEXPIRE).
    pub(super) expires: Instant,
}

#[derive(Debug)]
struct Reader {
    owner: OwnerId,
    count: u32,
    expires: Instant,
}

impl SharedHold {
    /// Drops read holds whose lease ran out; `false` when the lock is over (its lease ran
    /// out, or nobody holds it any more).
    pub(super) fn keep_live(&mut self, now: Instant) -> bool {
        if self.expires <= now {
            return false;
        }
        self.readers.retain(|reader| reader.expires > now);
        self.writer.is_some() || !self.readers.is_empty()
    }

    fn reader(&mut self, owner: &OwnerId) -> Option<&mut Reader> {
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
    pub(super) fn renew(&mut self, args: &RenewArgs, now: Instant) -> bool {
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

/// An acquisition of a read or write lock.
pub(super) fn take(locks: &mut Locks, args: &AcquireArgs, now: Instant) -> Attempt {
    let until = now + args.lease;
    let shared = match locks.live(&args.key, now) {
        None if args.expected > 0 => return Attempt::Lost,
        None => {
            let (writer, readers) = match args.kind {
                LockKind::Read => (
                    None,
                    vec![Reader {
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
        Some(Entry::Exclusive(_)) if args.expected > 0 => return Attempt::Lost,
        Some(Entry::Exclusive(hold)) => return Attempt::Busy(Some(hold.expires - now)),
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
            None => shared.readers.push(Reader {
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
pub(super) fn release(locks: &mut Locks, args: &ReleaseArgs, now: Instant) -> Released {
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
