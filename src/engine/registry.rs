//! This process's holds, for operators: every live hold of a manager, with the request
//! that took it when the HTTP layer did (method, path, when it started).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime};

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

/// What the registry keeps of a hold: a way to see it while it lives.
pub(super) trait Listed: Send + Sync {
    /// What an operator sees of it now.
    fn local_view(&self) -> LocalHold;
}

type Entries = HashMap<usize, Weak<dyn Listed>>;

/// The holds of one manager, split by name like the wait queues.
#[derive(Default)]
pub(crate) struct Registry {
    shards: [RegistryShard; SHARDS],
}

const SHARDS: usize = 16;

#[derive(Default)]
#[repr(align(64))]
struct RegistryShard(Mutex<Entries>);

impl Registry {
    fn shard(&self, key: &LockKey) -> std::sync::MutexGuard<'_, Entries> {
        self.shards[key.shard(SHARDS)]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// A new hold of `key`, until it is dropped; `slot`: where its data lives (stable while
    /// it lives).
    pub(super) fn add(&self, key: &LockKey, slot: usize, hold: Weak<dyn Listed>) {
        self.shard(key).insert(slot, hold);
    }

    /// A hold that is being dropped.
    pub(super) fn remove(&self, key: &LockKey, slot: usize) {
        self.shard(key).remove(&slot);
    }

    /// What operators see of the holds alive now.
    pub(super) fn views(&self) -> Vec<LocalHold> {
        self.shards
            .iter()
            .flat_map(|shard| {
                let holds: Vec<Arc<dyn Listed>> = {
                    let entries = shard.0.lock().unwrap_or_else(|e| e.into_inner());
                    entries.values().filter_map(Weak::upgrade).collect()
                };
                holds
                    .iter()
                    .map(|hold| hold.local_view())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}
