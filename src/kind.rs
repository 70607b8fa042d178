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
}

impl LockKind {
    /// A short name for logs and metrics labels ("exclusive", "read", "write", "fair").
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Exclusive => "exclusive",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Fair => "fair",
        }
    }

    /// Whether this is a side of a read-write lock.
    pub(crate) fn is_read_write(self) -> bool {
        matches!(self, LockKind::Read | LockKind::Write)
    }
}
