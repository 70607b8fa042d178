//! This process's nodes: which owner holds (or waits with) which node, how many times it
//! holds it (reentry counts here: one node per owner and side), and the nodes whose delete
//! failed, deleted again once the session is back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

use super::nodes::Side;
use crate::abort::AbortOnDrop;
use crate::key::{LockKey, OwnerId};

/// One owner's node on one side of a lock.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// The node's full path.
    pub(super) path: String,
    /// The session generation it was made in (gone with that session).
    pub(super) generation: u64,
    /// Holds of the owner (0: a fair waiter's place, not held yet).
    pub(super) count: u32,
    /// The node's `czxid`: the fencing token.
    pub(super) token: u64,
    /// When the hold's lease ends, as the manager last renewed it; for a fair waiter's
    /// place, when it runs out unless the waiter asks again. The node is deleted then
    /// (see `expiry`): a hold whose owner stops renewing ends, as on every backend.
    pub(super) ends: Instant,
    /// The node a fair waiter's watch is set on (while it is, nothing ahead of the waiter
    /// changed), and whether that node held the lock.
    pub(super) watching: Option<(String, bool)>,
    /// A fair waiter's watched node held the lock and was deleted: it is first now.
    pub(super) first_by_notice: bool,
    /// The timer that ends it at `ends` (see `expiry`), and a fair waiter's watch: both
    /// stop when the entry is gone (its last copy dropped), not at their own time.
    pub(super) tasks: EntryTasks,
}

/// The tasks that belong to an entry.
#[derive(Debug, Clone, Default)]
pub(super) struct EntryTasks {
    pub(super) expiry: Option<Arc<AbortOnDrop>>,
    pub(super) turn_watch: Option<Arc<AbortOnDrop>>,
}

type Slot = (LockKey, OwnerId, Side);

/// The table of this process's nodes.
#[derive(Default)]
pub(super) struct Holds {
    entries: Mutex<HashMap<Slot, Entry>>,
    /// Nodes whose delete failed (connection lost): deleted when the session is back, in
    /// that generation.
    orphans: Mutex<Vec<(String, u64)>>,
}

impl Holds {
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<Slot, Entry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The owner's entry on `side` of `key`, if any.
    pub(super) fn get(&self, key: &LockKey, owner: &OwnerId, side: Side) -> Option<Entry> {
        self.lock()
            .get(&(key.clone(), owner.clone(), side))
            .cloned()
    }

    /// Sets the owner's entry.
    /// Sets the owner's entry. An entry read before its tasks were attached (a copy taken,
    /// changed and put back) keeps the tasks the table has for the same node: they belong
    /// to the node, not to the copy.
    pub(super) fn put(&self, key: &LockKey, owner: &OwnerId, side: Side, mut entry: Entry) {
        let mut entries = self.lock();
        let slot = (key.clone(), owner.clone(), side);
        if let Some(old) = entries.get(&slot).filter(|old| old.path == entry.path) {
            if entry.tasks.expiry.is_none() {
                entry.tasks.expiry = old.tasks.expiry.clone();
            }
            if entry.tasks.turn_watch.is_none() {
                entry.tasks.turn_watch = old.tasks.turn_watch.clone();
            }
        }
        entries.insert(slot, entry);
    }

    /// Removes the owner's entry, returning it.
    pub(super) fn take(&self, key: &LockKey, owner: &OwnerId, side: Side) -> Option<Entry> {
        self.lock().remove(&(key.clone(), owner.clone(), side))
    }

    /// Removes the owner's entry if `condition` holds for it, returning it.
    pub(super) fn take_if(
        &self,
        key: &LockKey,
        owner: &OwnerId,
        side: Side,
        condition: impl FnOnce(&Entry) -> bool,
    ) -> Option<Entry> {
        let mut entries = self.lock();
        let slot = (key.clone(), owner.clone(), side);
        if !entries.get(&slot).is_some_and(condition) {
            return None;
        }
        entries.remove(&slot)
    }

    /// Ties the timer `expiry` to the owner's entry on `path` (if it is still there).
    pub(super) fn attach_expiry(
        &self,
        (key, owner, side): (&LockKey, &OwnerId, Side),
        path: &str,
        expiry: Arc<AbortOnDrop>,
    ) {
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(&(key.clone(), owner.clone(), side)) {
            if entry.path == path {
                entry.tasks.expiry = Some(expiry);
            }
        }
    }

    /// Ties a fair waiter's watch of `watched` to its place (if it still watches that node):
    /// the watch it had before stops.
    pub(super) fn attach_turn_watch(
        &self,
        (key, owner): (&LockKey, &OwnerId),
        watched: &str,
        watch: Arc<AbortOnDrop>,
    ) {
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(&(key.clone(), owner.clone(), Side::Mutex)) {
            if entry
                .watching
                .as_ref()
                .is_some_and(|(path, _)| path == watched)
            {
                entry.tasks.turn_watch = Some(watch);
            }
        }
    }

    /// Whether `owner` holds the write side of `key` (a writer may read).
    pub(super) fn writes(&self, key: &LockKey, owner: &OwnerId) -> bool {
        self.get(key, owner, Side::Write)
            .is_some_and(|entry| entry.count > 0)
    }

    /// Every (name, owner) held now.
    pub(super) fn held(&self) -> Vec<(LockKey, OwnerId)> {
        self.lock()
            .iter()
            .filter(|(_, entry)| entry.count > 0)
            .map(|((key, owner, _), _)| (key.clone(), owner.clone()))
            .collect()
    }

    /// The holds on `path`'s children of this process: (node name, owner, count, lease end).
    pub(super) fn in_dir(&self, dir: &str) -> Vec<(String, OwnerId, u32, Instant)> {
        self.lock()
            .iter()
            .filter_map(|((_, owner, _), entry)| {
                let (parent, name) = entry.path.rsplit_once('/')?;
                (parent == dir).then(|| (name.to_owned(), owner.clone(), entry.count, entry.ends))
            })
            .collect()
    }

    /// Forgets every entry (their session expired: the nodes are gone).
    pub(super) fn clear(&self) {
        self.lock().clear();
        self.orphans
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// A node whose delete failed: deleted again when the session is back.
    pub(super) fn orphan(&self, path: String, generation: u64) {
        let mut orphans = self.orphans.lock().unwrap_or_else(|e| e.into_inner());
        orphans.push((path, generation));
    }

    /// The orphans to delete now.
    pub(super) fn take_orphans(&self) -> Vec<(String, u64)> {
        std::mem::take(&mut *self.orphans.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
