//! What can go wrong when taking or keeping a lock.

use std::error::Error as StdError;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::key::LockKey;

/// Why an acquisition failed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum LockError {
    /// Another owner held the lock for the whole wait, or (for a new reader) writers
    /// waiting for it held the reader back.
    #[non_exhaustive]
    TimedOut {
        /// The busy lock.
        key: LockKey,
        /// How long this request waited (zero for a single try).
        waited: Duration,
        /// The holder's remaining lease as last seen, when it has one (`None` also when
        /// the last attempt was [`held_back`](LockError::TimedOut::held_back)).
        holder_lease: Option<Duration>,
        /// A read lock's last attempt was held back by a writer that waits for the lock:
        /// new readers wait while a writer waits (so that a stream of readers cannot keep
        /// writers out), whether the lock itself was free or shared by readers then.
        held_back: bool,
    },
    /// The backend could not be reached or answered with an error. The lock state is
    /// unknown to this caller; an acquisition that may have landed is cleaned up in the
    /// background.
    Unavailable(BackendError),
    /// The name cannot be used as a lock name.
    InvalidName {
        /// What is wrong with it.
        reason: String,
    },
    /// A semaphore's limit or an acquisition's permit count is out of range (see
    /// [`Permits::new`](crate::lock::Permits::new)), or permits were asked of a lock that
    /// is not a semaphore.
    InvalidPermits {
        /// What is wrong.
        reason: String,
    },
    /// A force-unlock found data under the name that is no lock of tower-lock's or
    /// Redisson's, and left it alone.
    NotALock {
        /// The name's key.
        key: LockKey,
        /// What the key holds (a Redis type: `list`, `set`, a `hash` of other fields…).
        holds: String,
    },
    /// A reentrant acquisition was asked of a guard whose lock is no longer held.
    Lost {
        /// The lock that was lost.
        key: LockKey,
    },
    /// The lock has a record: what it guards was done already, and nothing was taken. Only
    /// an acquisition that asks for records gets it (the idempotency layer's: the record is
    /// the stored response).
    Recorded {
        /// The lock.
        key: LockKey,
        /// The record a release left with the lock.
        record: bytes::Bytes,
    },
    /// The lock is held for other work than this acquisition's (see
    /// [`LockRequest::unless_recorded_for`](crate::lock::LockRequest::unless_recorded_for)):
    /// answered at once, nothing was taken. The idempotency layer answers it with `422`:
    /// the same key for another request.
    HeldForOtherWork {
        /// The lock.
        key: LockKey,
    },
    /// The manager's backend does not have this kind of lock or this operation (see
    /// [`Capabilities`](crate::backend::Capabilities)): refused at once, before anything
    /// reached the backend. A setup mistake: choose a backend that has it.
    Unsupported {
        /// The backend's name (`"redlock"`, …).
        backend: &'static str,
        /// What it does not have (`"fair locks"`, `"locks with a record"`, …).
        what: String,
    },
    /// A guard was asked for a kind of lock its hold cannot become: a read hold cannot
    /// become a write hold (no upgrade: two readers upgrading at once would wait for each
    /// other forever), and a plain lock is not a read-write lock. Answered at once.
    KindMismatch {
        /// The lock.
        key: LockKey,
        /// The kind the guard holds.
        held: crate::kind::LockKind,
        /// The kind asked for.
        asked: crate::kind::LockKind,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::TimedOut {
                key, waited, held_back: true, ..
            } => write!(
                f,
                "lock `{key}` is busy: after waiting {waited:?}, this reader was still held \
                 back by a writer waiting for the lock (new readers wait while a writer \
                 waits, so that readers cannot keep writers out)"
            ),
            LockError::TimedOut {
                key,
                waited,
                holder_lease,
                ..
            } => {
                write!(
                    f,
                    "lock `{key}` is busy: still held after waiting {waited:?}"
                )?;
                if let Some(lease) = holder_lease {
                    write!(f, " (the holder's lease runs for another {lease:?})")?;
                }
                Ok(())
            }
            LockError::Unavailable(err) => write!(f, "lock backend unavailable: {err}"),
            LockError::InvalidName { reason } => write!(f, "invalid lock name: {reason}"),
            LockError::InvalidPermits { reason } => write!(f, "invalid permits: {reason}"),
            LockError::NotALock { key, holds } => write!(
                f,
                "`{key}` holds a {holds} that is no lock of tower-lock's or Redisson's; it was left alone"
            ),
            LockError::Lost { key } => write!(f, "lock `{key}` is no longer held by this owner"),
            LockError::Recorded { key, record } => write!(
                f,
                "lock `{key}` has a record ({} bytes): what it guards was done already",
                record.len()
            ),
            LockError::Unsupported { backend, what } => write!(
                f,
                "the {backend} lock backend has no {what}: choose a backend that has them \
                 (see its Capabilities)"
            ),
            LockError::HeldForOtherWork { key } => write!(
                f,
                "lock `{key}` is held for other work than this acquisition's"
            ),
            LockError::KindMismatch { key, held, asked } => match (held, asked) {
                (crate::kind::LockKind::Read, crate::kind::LockKind::Write) => write!(
                    f,
                    "lock `{key}`: a read hold cannot become a write hold (no upgrade); \
                     release the read lock, then take the write lock"
                ),
                _ => write!(
                    f,
                    "lock `{key}`: a {} hold cannot give a {} hold; take that lock on its own",
                    held.name(),
                    asked.name()
                ),
            },
        }
    }
}

impl LockError {
    /// [`LockError::TimedOut`], built inside the crate (its fields may grow).
    pub(crate) fn timed_out(
        key: LockKey,
        waited: Duration,
        holder_lease: Option<Duration>,
        held_back: bool,
    ) -> LockError {
        LockError::TimedOut {
            key,
            waited,
            holder_lease,
            held_back,
        }
    }
}

impl StdError for LockError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            LockError::Unavailable(err) => Some(err),
            _ => None,
        }
    }
}

/// An error reported by a lock backend (for Redis: a connection, timeout or server error).
#[derive(Debug, Clone)]
pub struct BackendError {
    message: Arc<str>,
    source: Option<Arc<dyn StdError + Send + Sync>>,
}

impl BackendError {
    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> Self {
        BackendError {
            message: message.into().into(),
            source: None,
        }
    }

    /// An error that wraps its cause.
    pub fn with_source(
        message: impl Into<String>,
        source: impl StdError + Send + Sync + 'static,
    ) -> Self {
        BackendError {
            message: message.into().into(),
            source: Some(Arc::new(source)),
        }
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl StdError for BackendError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

impl From<BackendError> for LockError {
    fn from(err: BackendError) -> Self {
        LockError::Unavailable(err)
    }
}

/// What a release found.
///
/// Most answers need nothing from the caller, but [`NotHeld`](Self::NotHeld) means the
/// lock had already ended before the release: for part of the time the caller believed
/// it held the lock, it did not, and another owner may have held it. What the caller did
/// under the lock may have overlapped with another holder's work; treat it as a failed
/// critical section (log it, compare-and-set or re-check what was written, or use a
/// fencing token where the protected store can check one). `let _ = guard.release()…`
/// says the outcome was considered and ignored.
#[must_use = "`NotHeld` means the lock had ended before this release: what ran under it may \
              have overlapped another holder"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Released {
    /// This was the last hold: the lock is now free and waiters were told.
    Unlocked,
    /// A reentrant hold remains: the lock is still held by the same owner.
    StillHeld,
    /// The lock was no longer held by this owner (its lease expired, or it was deleted).
    /// Nothing was changed.
    NotHeld,
    /// This was the last hold, and the lock went straight to the next waiter in this
    /// process, without being free in between (Redis: one round trip per hand-over instead
    /// of two; see [`LockManagerBuilder::hand_over_limit`](crate::manager::LockManagerBuilder::hand_over_limit)).
    HandedOver,
}
