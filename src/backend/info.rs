//! What operators ask of a backend: what a name holds now ([`LockInfo`], read in one step,
//! read only), which names exist (by pattern, bounded), and freeing a name whatever holds
//! it ([`ForceUnlocked`]). The types are re-exported by [`tower_lock::admin`](crate::admin).

use std::time::Duration;

use crate::key::LockKey;

/// What a name holds now, as the backend stores it (see
/// [`LockManager::inspect`](crate::LockManager::inspect)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// The name's key (the manager's prefix and the name).
    pub key: LockKey,
    /// What it is, `None` when nothing is stored under the name (free).
    pub kind: Option<InspectedKind>,
    /// Who holds it: owners with their holds and remaining lease; a semaphore's permits.
    pub holders: Vec<HolderInfo>,
    /// A fair lock's queue, first first (at most [`LISTED_MAX`] entries).
    pub queue: Vec<QueuedWaiter>,
    /// How many wait in the fair lock's queue in all.
    pub queued: usize,
    /// The last fencing token given for the name (fenced locks), if any ever was.
    pub fencing_token: Option<u64>,
    /// A semaphore's limit (`None`: no semaphore) and permits in use.
    pub permits: Option<super::PermitUsage>,
}

/// How many waiters of a fair queue and permits of a semaphore an inspection lists (their
/// counts are complete).
pub const LISTED_MAX: usize = 100;

/// What kind of object a name holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InspectedKind {
    /// A lock hash (Redisson's `RLock`): the plain lock, or a fair or fenced lock (its queue
    /// or token is in [`LockInfo`]).
    Lock,
    /// A read-write lock (Redisson's `RReadWriteLock`).
    ReadWrite,
    /// A semaphore (Redisson's `RPermitExpirableSemaphore`).
    Semaphore,
}

impl InspectedKind {
    /// Its name in JSON and logs: `lock`, `read_write`, `semaphore`.
    pub fn name(self) -> &'static str {
        match self {
            InspectedKind::Lock => "lock",
            InspectedKind::ReadWrite => "read_write",
            InspectedKind::Semaphore => "semaphore",
        }
    }
}

/// How a holder holds a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HolderSide {
    /// The lock, alone.
    Exclusive,
    /// The read side of a read-write lock.
    Read,
    /// The write side of a read-write lock.
    Write,
    /// A semaphore's permit.
    Permit,
}

impl HolderSide {
    /// Its name in JSON and logs: `exclusive`, `read`, `write`, `permit`.
    pub fn name(self) -> &'static str {
        match self {
            HolderSide::Exclusive => "exclusive",
            HolderSide::Read => "read",
            HolderSide::Write => "write",
            HolderSide::Permit => "permit",
        }
    }
}

/// One holder of a name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HolderInfo {
    /// The owner id as stored: `<process id>:<holder>` (Redisson: `<client UUID>:<thread
    /// id>`; tower-lock: `<manager id>:<holder number>`), or a semaphore permit's id (32
    /// hex digits).
    pub owner: String,
    /// How it holds the name.
    pub side: HolderSide,
    /// Its holds (reentries counted); 1 for a permit.
    pub holds: u32,
    /// What is left of its lease; `None`: no expiry.
    pub lease: Option<Duration>,
}

impl HolderInfo {
    /// The process part of the owner id (before the last `:`), when it has one: a
    /// Redisson client's UUID or a tower-lock manager's id.
    pub fn process(&self) -> Option<&str> {
        self.owner.rsplit_once(':').map(|(process, _)| process)
    }

    /// The holder part of the owner id (after the last `:`) as a number: a Redisson
    /// thread id or a tower-lock holder number.
    pub fn thread(&self) -> Option<u64> {
        self.owner.rsplit_once(':')?.1.parse().ok()
    }
}

/// One waiter of a fair lock's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueuedWaiter {
    /// Its owner id.
    pub owner: String,
    /// How long its place lasts unless it renews it (`None`: no deadline stored).
    pub place_lasts: Option<Duration>,
}

/// What a force-unlock freed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForceUnlocked {
    /// What the name held (`None`: nothing was there, nothing was done).
    pub kind: Option<InspectedKind>,
    /// Holds (or permits) taken away.
    pub freed: u32,
    /// The name holds data that is no lock (its Redis type), left alone; `kind` is `None`.
    pub left_alone: Option<String>,
}

/// Names found by a [listing](crate::LockManager::list_names).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NameList {
    /// The names (under the manager's prefix, the prefix taken off), at most the limit asked.
    pub names: Vec<String>,
    /// More names matched than the limit.
    pub truncated: bool,
}

impl LockInfo {
    /// A name with nothing stored.
    pub(crate) fn free(key: LockKey) -> Self {
        LockInfo {
            key,
            kind: None,
            holders: Vec::new(),
            queue: Vec::new(),
            queued: 0,
            fencing_token: None,
            permits: None,
        }
    }
}
