//! Lock kinds: how the holders of one name may share it, and the one table of rules every
//! part of the crate asks about a kind.
//!
//! A kind's storage (its scripts, its Redis operations, its memory table rules) lives in
//! its own folder under `backend/` (see `docs/architecture.md`); what the engine, the wait
//! queues and the HTTP layer do differently for it is read from [`Rules`], never decided by
//! comparing kinds.

/// What kind of lock a request takes. Every kind has the same request, guard, watchdog,
/// loss signal and HTTP options; what differs is how holders share a name, how the backend
/// stores it (for Redis, which Redisson object it interoperates with) and what a release
/// tells the waiters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// The plain lock: one holder at a time, reentrant for its owner (Redisson's `RLock`).
    /// The kind of [`LockManager::lock`](crate::LockManager::lock).
    Plain,
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
    /// It excludes and is excluded by [`Plain`](Self::Plain) on the same name. See
    /// [`LockManager::fenced_lock`](crate::LockManager::fenced_lock).
    Fenced,
    /// A semaphore: at most [`Permits::limit`] permits of the name are held at once, across
    /// every process, and each acquisition takes [`Permits::count`] of them (Redisson's
    /// `RPermitExpirableSemaphore`: the count key, the `{name}:timeout` sorted set of permit
    /// ids with their deadlines, the channel `redisson_sc:{name}`). Every permit has a lease
    /// that the watchdog renews. See
    /// [`LockManager::semaphore`](crate::LockManager::semaphore).
    Semaphore(Permits),
}

/// A semaphore's limit and how many permits one acquisition takes (see
/// [`LockKind::Semaphore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Permits {
    limit: u32,
    count: u32,
}

/// The largest limit a semaphore may have: each permit held is a member of a sorted set
/// in Redis, and limits beyond this are mistakes rather than limits.
pub const MAX_PERMITS: u32 = 1_000_000;

/// The most permits one acquisition may take (they are written in one script call).
pub const MAX_PERMITS_PER_ACQUISITION: u32 = 1_000;

impl Permits {
    /// `count` permits of a semaphore limited to `limit`.
    ///
    /// # Errors
    /// What is wrong, for [`LockError::InvalidPermits`](crate::LockError::InvalidPermits): a
    /// limit of 0 or over [`MAX_PERMITS`], a count of 0, over the limit, or over
    /// [`MAX_PERMITS_PER_ACQUISITION`].
    pub fn new(limit: u32, count: u32) -> Result<Permits, String> {
        if limit == 0 {
            return Err("a semaphore's limit must be at least 1 permit".to_owned());
        }
        if limit > MAX_PERMITS {
            return Err(format!(
                "a semaphore's limit of {limit} is over the maximum of {MAX_PERMITS} permits"
            ));
        }
        if count == 0 {
            return Err("an acquisition must take at least 1 permit".to_owned());
        }
        if count > limit {
            return Err(format!(
                "an acquisition of {count} permits could never be granted under a limit of {limit}"
            ));
        }
        if count > MAX_PERMITS_PER_ACQUISITION {
            return Err(format!(
                "an acquisition of {count} permits is over the maximum of \
                 {MAX_PERMITS_PER_ACQUISITION} per acquisition"
            ));
        }
        Ok(Permits { limit, count })
    }

    /// One permit of a semaphore limited to one (a stand-in where the permits asked for
    /// were invalid and the request fails).
    pub(crate) const ONE: Permits = Permits { limit: 1, count: 1 };

    /// How many permits of the name may be held at once (set in the backend on the name's
    /// first use; see [`LockManager::set_semaphore_limit`](crate::LockManager::set_semaphore_limit)).
    pub fn limit(self) -> u32 {
        self.limit
    }

    /// How many permits one acquisition takes.
    pub fn count(self) -> u32 {
        self.count
    }
}

/// Where the waiters of a kind wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaitsIn {
    /// In this process's FIFO queue of the name; only its head asks the backend, when an
    /// unlock notice, a local release or the holder's lease gives it a reason.
    LocalQueue,
    /// In the backend's own queue, shared by every process (each waiter has its place
    /// there and is woken by its own notice).
    BackendQueue,
}

/// What a holder of one kind may take again for the same owner (see [`LockKind::also`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Also {
    /// The same lock, entered again (one more hold on the owner's count).
    Reenter,
    /// A read hold beside the write hold (a downgrade).
    Downgrade,
    /// Nothing: an upgrade, or another lock.
    Refused,
}

/// The rules of one kind: every decision outside the kind's own storage code asks these.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    /// Holders of this kind share the name with each other (readers, a semaphore's
    /// permit holders): a newcomer tries while only such holders hold the name here, and
    /// when the head of the local queue gets in, the waiter behind it tries too.
    pub(crate) shared: bool,
    /// The waiters of this kind right behind the head of the local queue try together with
    /// it: when one reader can get in, so can every reader (a semaphore's waiters, which
    /// may find one permit for many of them, try one after another instead).
    pub(crate) tries_in_a_run: bool,
    /// Where its waiters wait.
    pub(crate) waits_in: WaitsIn,
    /// A last release may hand the lock (a semaphore: its permits) straight to the next
    /// local waiter of the same kind, in the release's own backend step.
    pub(crate) hands_over: bool,
    /// Each acquisition gets a fencing token.
    pub(crate) fenced: bool,
    /// An in-process backend may grant it without a future and without a claim on the
    /// name here (nobody near it waits, and no other rule has to be checked).
    pub(crate) taken_in_process: bool,
    /// A last release may leave a record, and an acquisition may refuse to take a lock
    /// that has one (locks with a record).
    pub(crate) records: bool,
    /// A waiter marks its wait in the backend, so that newcomers of the shared side hold
    /// back (a writer waiting behind readers); the mark is taken back when it stops.
    pub(crate) marks_waiting: bool,
    /// A new holder of this kind is held back while a waiter of the other side has its
    /// wait marked (a new reader, while a writer waits): in the local queue, such waiters
    /// then leave their turn to the first waiter the marks do not hold back, and only the
    /// first of them watches for the marks' end.
    pub(crate) held_back_by_marks: bool,
}

/// A set of lock kinds (a backend's, see
/// [`Capabilities::kinds`](crate::backend::Capabilities::kinds)); semaphores of every
/// limit and count are one kind.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct KindSet(u8);

impl KindSet {
    /// No kind.
    pub const EMPTY: KindSet = KindSet(0);
    /// The plain lock alone.
    pub const PLAIN: KindSet = KindSet(1);
    /// Every kind of lock.
    pub const ALL: KindSet = KindSet(0b11_1111);

    /// These kinds and `kind`.
    pub const fn with(self, kind: LockKind) -> KindSet {
        KindSet(self.0 | kind.bit())
    }

    /// These kinds without `kind`.
    pub const fn without(self, kind: LockKind) -> KindSet {
        KindSet(self.0 & !kind.bit())
    }

    /// These kinds without every kind of `other`.
    pub const fn without_all(self, other: KindSet) -> KindSet {
        KindSet(self.0 & !other.0)
    }

    /// Whether `kind` is one of them.
    pub const fn contains(self, kind: LockKind) -> bool {
        self.0 & kind.bit() != 0
    }
}

impl std::fmt::Debug for KindSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let every = [
            LockKind::Plain,
            LockKind::Read,
            LockKind::Write,
            LockKind::Fair,
            LockKind::Fenced,
            LockKind::Semaphore(Permits::ONE),
        ];
        f.debug_set()
            .entries(
                every
                    .iter()
                    .filter(|k| self.contains(**k))
                    .map(|k| k.name()),
            )
            .finish()
    }
}

impl LockKind {
    /// Its place in a [`KindSet`].
    const fn bit(self) -> u8 {
        match self {
            LockKind::Plain => 1,
            LockKind::Read => 1 << 1,
            LockKind::Write => 1 << 2,
            LockKind::Fair => 1 << 3,
            LockKind::Fenced => 1 << 4,
            LockKind::Semaphore(_) => 1 << 5,
        }
    }

    /// A short name for logs and metrics labels ("plain", "read", "write", "fair",
    /// "fenced", "semaphore").
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Plain => "plain",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Fair => "fair",
            LockKind::Fenced => "fenced",
            LockKind::Semaphore(_) => "semaphore",
        }
    }

    /// The kind's rules: the one table.
    pub(crate) const fn rules(self) -> Rules {
        const ALONE: Rules = Rules {
            shared: false,
            tries_in_a_run: false,
            waits_in: WaitsIn::LocalQueue,
            hands_over: false,
            fenced: false,
            taken_in_process: false,
            records: false,
            marks_waiting: false,
            held_back_by_marks: false,
        };
        match self {
            LockKind::Plain => Rules {
                hands_over: true,
                taken_in_process: true,
                records: true,
                ..ALONE
            },
            LockKind::Read => Rules {
                shared: true,
                tries_in_a_run: true,
                held_back_by_marks: true,
                ..ALONE
            },
            LockKind::Write => Rules {
                marks_waiting: true,
                ..ALONE
            },
            LockKind::Fair => Rules {
                waits_in: WaitsIn::BackendQueue,
                ..ALONE
            },
            LockKind::Fenced => Rules {
                fenced: true,
                ..ALONE
            },
            // Holders share up to the limit: when the head of the local queue gets its
            // permits, the waiter behind it tries too; a newcomer tries while only permit
            // holders hold the name here.
            LockKind::Semaphore(_) => Rules {
                shared: true,
                hands_over: true,
                ..ALONE
            },
        }
    }

    /// What a holder of this kind may take again for the same owner when `asked` is
    /// asked of it: the same kind reenters, a fenced hold also gives a plain one (the same
    /// lock, entered with a token of its own), a write hold also gives a read hold (a
    /// downgrade); anything else is refused at once (an upgrade would deadlock two readers
    /// upgrading together; a plain lock and a read-write lock are different locks).
    pub(crate) fn also(self, asked: LockKind) -> Also {
        match (self, asked) {
            (held, asked) if held == asked => Also::Reenter,
            (LockKind::Fenced, LockKind::Plain) => Also::Reenter,
            (LockKind::Write, LockKind::Read) => Also::Downgrade,
            _ => Also::Refused,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [LockKind; 6] = [
        LockKind::Plain,
        LockKind::Read,
        LockKind::Write,
        LockKind::Fair,
        LockKind::Fenced,
        LockKind::Semaphore(Permits { limit: 8, count: 1 }),
    ];

    #[test]
    fn only_the_plain_lock_and_permits_are_handed_over_only_the_plain_lock_recorded() {
        for kind in ALL {
            let rules = kind.rules();
            let plain = kind == LockKind::Plain;
            let handed = plain || matches!(kind, LockKind::Semaphore(_));
            assert_eq!(rules.hands_over, handed, "{kind:?}");
            assert_eq!(rules.taken_in_process, plain, "{kind:?}");
            assert_eq!(rules.records, plain, "{kind:?}");
        }
    }

    #[test]
    fn holds_give_the_same_kind_a_read_under_a_write_and_a_plain_under_a_fenced() {
        for kind in ALL {
            assert_eq!(kind.also(kind), Also::Reenter, "{kind:?}");
        }
        assert_eq!(LockKind::Fenced.also(LockKind::Plain), Also::Reenter);
        assert_eq!(LockKind::Write.also(LockKind::Read), Also::Downgrade);
        for (held, asked) in [
            (LockKind::Read, LockKind::Write),
            (LockKind::Plain, LockKind::Fenced),
            (LockKind::Plain, LockKind::Read),
            (LockKind::Write, LockKind::Plain),
            (LockKind::Fair, LockKind::Plain),
            (
                LockKind::Semaphore(Permits { limit: 8, count: 1 }),
                LockKind::Plain,
            ),
        ] {
            assert_eq!(held.also(asked), Also::Refused, "{held:?} asked {asked:?}");
        }
    }

    #[test]
    fn permits_are_checked() {
        assert_eq!(
            Permits::new(8, 3).map(|p| (p.limit(), p.count())),
            Ok((8, 3))
        );
        for (limit, count, says) in [
            (0, 1, "at least 1 permit"),
            (MAX_PERMITS + 1, 1, "over the maximum"),
            (8, 0, "at least 1 permit"),
            (8, 9, "could never be granted"),
            (
                MAX_PERMITS,
                MAX_PERMITS_PER_ACQUISITION + 1,
                "per acquisition",
            ),
        ] {
            let error = Permits::new(limit, count).unwrap_err();
            assert!(error.contains(says), "{limit}/{count}: {error}");
        }
    }
}
