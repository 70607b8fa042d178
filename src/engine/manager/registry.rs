//! This process's holds, for operators: every live hold of a manager, with the request
//! that took it when the HTTP layer did (method, path, when it started).

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

/// What the registry keeps of a hold: a way to see it while it lives, and to tell it that
/// it is lost.
pub(crate) trait Listed: Send + Sync {
    /// What an operator sees of it now.
    fn local_view(&self) -> LocalHold;

    /// Whether it is `owner`'s hold of `key`.
    fn is_held_by(&self, key: &LockKey, owner: &OwnerId) -> bool;

    /// The backend knows the lock is gone: the loss signal fires.
    fn mark_lost(&self);
}

/// The holds of one manager, split by name like the wait queues.
#[derive(Default)]
pub(crate) struct Registry {
    shards: [RegistryShard; SHARDS],
}

const SHARDS: usize = 16;

#[derive(Default)]
#[repr(align(64))]
struct RegistryShard(Mutex<Entries>);

/// A shard's holds in numbered places (a hold keeps its number): adding and removing one
/// is a few stores under the mutex, with no hashing and, once the places exist, no
/// allocation (this runs twice for every lock taken).
#[derive(Default)]
struct Entries {
    places: Vec<Option<Weak<dyn Listed>>>,
    free: Vec<usize>,
}

impl Registry {
    fn shard(&self, key: &LockKey) -> std::sync::MutexGuard<'_, Entries> {
        self.shards[key.shard(SHARDS)]
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// A new hold of `key`, until [`remove`](Self::remove) is called with the place it
    /// is given.
    pub(crate) fn add(&self, key: &LockKey, hold: Weak<dyn Listed>) -> usize {
        let mut entries = self.shard(key);
        match entries.free.pop() {
            Some(place) => {
                entries.places[place] = Some(hold);
                place
            }
            None => {
                entries.places.push(Some(hold));
                entries.places.len() - 1
            }
        }
    }

    /// A hold that is being dropped, at the place [`add`](Self::add) gave it.
    pub(in crate::engine) fn remove(&self, key: &LockKey, place: usize) {
        let mut entries = self.shard(key);
        let entries = &mut *entries;
        if let Some(entry) = entries.places.get_mut(place) {
            *entry = None;
            entries.free.push(place);
        }
        if entries.free.len() == entries.places.len() {
            // Nobody left in this shard: the places go (a burst of holds does not keep
            // its memory).
            entries.places.clear();
            entries.free.clear();
        }
    }

    /// `owner`'s holds of `key` are gone (the backend says so): their loss signals fire.
    pub(crate) fn lose(&self, key: &LockKey, owner: &OwnerId) {
        let holds: Vec<Arc<dyn Listed>> = self
            .shard(key)
            .places
            .iter()
            .flatten()
            .filter_map(Weak::upgrade)
            .collect();
        for hold in holds {
            if hold.is_held_by(key, owner) {
                hold.mark_lost();
            }
        }
    }

    /// What operators see of the holds alive now.
    pub(in crate::engine) fn views(&self) -> Vec<LocalHold> {
        self.shards
            .iter()
            .flat_map(|shard| {
                let holds: Vec<Arc<dyn Listed>> = {
                    let entries = shard.0.lock().unwrap_or_else(|e| e.into_inner());
                    entries
                        .places
                        .iter()
                        .flatten()
                        .filter_map(Weak::upgrade)
                        .collect()
                };
                holds
                    .iter()
                    .map(|hold| hold.local_view())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    // The module under test, named in full (its tests see its private items).
    use crate::engine::manager::registry::*;
    use crate::key::OwnerId;

    struct Shown(LockKey);

    impl Listed for Shown {
        fn is_held_by(&self, key: &LockKey, _owner: &OwnerId) -> bool {
            self.0 == *key
        }

        fn mark_lost(&self) {}

        fn local_view(&self) -> LocalHold {
            LocalHold {
                key: self.0.clone(),
                kind: LockKind::Plain,
                owner: OwnerId::from_raw("owner:1"),
                held_for: Duration::ZERO,
                renewed: false,
                lost: false,
                request: None,
            }
        }
    }

    fn names(registry: &Registry) -> Vec<String> {
        let mut names: Vec<_> = registry
            .views()
            .into_iter()
            .map(|hold| hold.key.as_str().to_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn places_are_reused_and_a_removed_hold_is_never_listed() {
        let registry = Registry::default();
        let key = LockKey::new("", "same-shard", 100).unwrap();
        let holds: Vec<Arc<dyn Listed>> = (0..3)
            .map(|_| Arc::new(Shown(key.clone())) as Arc<dyn Listed>)
            .collect();
        let places: Vec<usize> = holds
            .iter()
            .map(|hold| registry.add(&key, Arc::downgrade(hold)))
            .collect();
        assert_eq!(places, [0, 1, 2]);
        registry.remove(&key, places[1]);
        assert_eq!(names(&registry).len(), 2);
        let again = Arc::new(Shown(key.clone())) as Arc<dyn Listed>;
        assert_eq!(
            registry.add(&key, Arc::downgrade(&again)),
            1,
            "the free place"
        );
        assert_eq!(names(&registry).len(), 3);
        for place in [0, 1, 2] {
            registry.remove(&key, place);
        }
        assert!(names(&registry).is_empty());
        // Emptied: numbering starts over.
        assert_eq!(registry.add(&key, Arc::downgrade(&again)), 0);
        assert_eq!(names(&registry), ["same-shard"]);
    }
}
