//! What the wait queues count: waiters per name, names, claims, pending subscription
//! changes (for the manager's statistics and the operators' view).

use super::WaitQueues;
use crate::key::LockKey;

impl WaitQueues {
    /// Every name with local waiters, and how many (fair waiters included).
    pub(crate) fn waiting_names(&self) -> Vec<(LockKey, usize)> {
        let mut names: Vec<(LockKey, usize)> = self
            .each_shard()
            .flat_map(|state| {
                state
                    .queues
                    .iter()
                    .map(|(key, queue)| (key.clone(), queue.waiters.len()))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (key, count) in self.fair_waiting_names() {
            match names.iter_mut().find(|(name, _)| *name == key) {
                Some((_, waiting)) => *waiting += count,
                None => names.push((key, count)),
            }
        }
        names
    }

    /// Number of local waiters queued for `key`.
    pub(crate) fn queued(&self, key: &LockKey) -> usize {
        let local = self
            .lock(key)
            .queues
            .get(key)
            .map_or(0, |q| q.waiters.len());
        local + self.fair_counts(Some(key)).1
    }

    /// (names with waiters, waiters, names claimed by holders or attempts, names whose
    /// subscription is about to change). Fair waiters count as waiters, and their pending
    /// subscription changes as changes.
    pub(crate) fn counts(&self) -> (usize, usize, usize, usize) {
        let (fair, _, fair_changes) = self.fair_counts(None);
        let (names, waiters, held, changes) =
            self.each_shard()
                .fold((0, 0, 0, 0), |(names, waiters, held, changes), state| {
                    let queued: usize = state.queues.values().map(|q| q.waiters.len()).sum();
                    (
                        names + state.queues.len(),
                        waiters + queued,
                        held + state.held.len(),
                        changes + state.changes.len(),
                    )
                });
        (names, waiters + fair, held, changes + fair_changes)
    }

    /// Number of names with local waiters.
    pub(crate) fn len(&self) -> usize {
        self.each_shard().map(|state| state.queues.len()).sum()
    }
}
