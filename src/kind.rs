//! Lock kinds: how the holders of one name may share it.

/// What kind of lock a request takes. Every kind has the same request, guard, watchdog,
/// loss signal and HTTP options; what differs is how holders share a name, how the backend
/// stores it (for Redis, which Redisson object it interoperates with) and what a release
/// tells the waiters. See `docs/architecture.md` for how a kind plugs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// One holder at a time, reentrant for its owner: Redisson's `RLock`.
    Exclusive,
    /// The read side of a read-write lock: shared by any number of readers, excluded by a
    /// writer (Redisson's `RReadWriteLock.readLock()`). The writer may also read (a
    /// downgrade).
    Read,
    /// The write side of a read-write lock: one writer, no readers but the writer itself
    /// (Redisson's `RReadWriteLock.writeLock()`). A reader cannot also write (no upgrade).
    Write,
    /// One holder at a time, reentrant, granted in arrival order across every process: the
    /// waiters of all processes queue in Redis (Redisson's `RFairLock`, with its waiter
    /// list, deadline set and per-waiter channel). See
    /// [`LockManager::fair_lock`](crate::LockManager::fair_lock).
    Fair,
    /// One holder at a time, reentrant, and every acquisition (reentry included) is given
    /// a fencing token, a number that only grows, for the protected resource to reject
    /// the writes of a holder that lost the lock without knowing it (Redisson's
    /// `RFencedLock`: the plain lock's hash plus the counter `redisson_lock_token:{name}`).
    /// It excludes and is excluded by [`Exclusive`](Self::Exclusive) on the same name. See
    /// [`LockManager::fenced_lock`](crate::LockManager::fenced_lock).
    Fenced,
}

impl LockKind {
    /// A short name for logs and metrics labels ("exclusive", "read", "write", "fair",
    /// "fenced").
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Exclusive => "exclusive",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Fair => "fair",
            LockKind::Fenced => "fenced",
        }
    }

    /// Whether this is a side of a read-write lock.
    pub(crate) fn is_read_write(self) -> bool {
        matches!(self, LockKind::Read | LockKind::Write)
    }
}
