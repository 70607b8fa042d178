//! This process's holds, for operators: every live hold of a manager, with the request
//! that took it when the HTTP layer did (method, path, when it started).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

use super::hold::Hold;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// The request a hold was taken for, as the HTTP layer records it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestLabel {
    /// The request's method (`POST`).
    pub method: String,
    /// The request's path (`/orders/42/pay`), without its query.
    pub path: String,
    /// When the layer took the lock for it (wall clock).
    pub started: SystemTime,
}

impl RequestLabel {
    /// A label for a request of `method` on `path`, whose lock was taken now.
    pub fn new(method: impl Into<String>, path: impl Into<String>) -> Self {
        RequestLabel {
            method: method.into(),
            path: path.into(),
            started: SystemTime::now(),
        }
    }
}

/// One hold of this process (see [`LockManager::local_holds`](crate::LockManager::local_holds)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocalHold {
    /// The lock.
    pub key: LockKey,
    /// Its kind.
    pub kind: LockKind,
    /// The owner it is held as.
    pub owner: OwnerId,
    /// How long it has been held.
    pub held_for: Duration,
    /// Whether the watchdog renews its lease (no fixed lease).
    pub renewed: bool,
    /// Whether it is known or presumed lost.
    pub lost: bool,
    /// The request it was taken for, when the HTTP layer took it.
    pub request: Option<RequestLabel>,
}

/// The holds of one manager, split by name like the wait queues.
#[derive(Default)]
pub(crate) struct Registry {
    shards: [RegistryShard; SHARDS],
}

const SHARDS: usize = 16;

#[derive(Default)]
#[repr(align(64))]
struct RegistryShard(Mutex<HashMap<usize, Weak<Hold>>>);

/// A hold's place in the registry: where its data lives (stable while it lives).
fn slot(hold: &Hold) -> usize {
    hold as *const Hold as usize
}

impl Registry {
    fn shard(&self, key: &LockKey) -> std::sync::MutexGuard<'_, HashMap<usize, Weak<Hold>>> {
        self.shards[key.shard(SHARDS)]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// A new hold, until it is dropped.
    pub(super) fn add(&self, hold: &Arc<Hold>) {
        self.shard(hold.key())
            .insert(slot(hold), Arc::downgrade(hold));
    }

    /// A hold that is being dropped.
    pub(super) fn remove(&self, hold: &Hold) {
        self.shard(hold.key()).remove(&slot(hold));
    }

    /// The holds alive now.
    pub(super) fn holds(&self) -> Vec<Arc<Hold>> {
        self.shards
            .iter()
            .flat_map(|shard| {
                let holds = shard.0.lock().unwrap_or_else(|e| e.into_inner());
                holds.values().filter_map(Weak::upgrade).collect::<Vec<_>>()
            })
            .collect()
    }
}
