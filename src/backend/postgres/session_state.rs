//! What a session holds: per advisory key, its holders and their counts as the server has
//! them, the acquisitions on their way, and the wait it runs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use crate::key::{LockKey, OwnerId};

/// Who holds a key on a session: an owner, for one lock key (two lock keys may share an
/// advisory key; their holds are kept apart).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Holder {
    pub(super) owner: OwnerId,
    pub(super) key: LockKey,
}

impl Holder {
    /// `owner` of `key`, and the advisory key it locks.
    pub(super) fn of(key: &LockKey, owner: &OwnerId) -> (AdvisoryKey, Holder) {
        let holder = Holder {
            owner: owner.clone(),
            key: key.clone(),
        };
        (AdvisoryKey::from_name(key.as_str()), holder)
    }
}

/// One holder's holds of one advisory key on a session.
#[derive(Debug)]
pub(super) struct KeyHold {
    pub(super) holder: Holder,
    /// The server's counts: each hold is one `pg_advisory_lock` (reentries included).
    pub(super) exclusive: u32,
    pub(super) shared: u32,
    /// Acquisitions on their way, by mode: the key is kept for this holder meanwhile.
    pending_exclusive: u32,
    pending_shared: u32,
    /// When the lease ends: the session frees the key then unless renewed.
    pub(super) deadline: Instant,
    /// The holder took it unless recorded and has a row in the records table.
    pub(super) work_row: bool,
}

impl KeyHold {
    pub(super) fn count(&self, mode: Mode) -> u32 {
        match mode {
            Mode::Exclusive => self.exclusive,
            Mode::Shared => self.shared,
        }
    }

    pub(super) fn count_mut(&mut self, mode: Mode) -> &mut u32 {
        match mode {
            Mode::Exclusive => &mut self.exclusive,
            Mode::Shared => &mut self.shared,
        }
    }

    fn pending_mut(&mut self, mode: Mode) -> &mut u32 {
        match mode {
            Mode::Exclusive => &mut self.pending_exclusive,
            Mode::Shared => &mut self.pending_shared,
        }
    }

    /// Holds now.
    pub(super) fn total(&self) -> u32 {
        self.exclusive + self.shared
    }

    fn is_empty(&self) -> bool {
        self.total() == 0 && self.pending_exclusive == 0 && self.pending_shared == 0
    }
}

/// A waiting acquisition: the statement that waits in the server's queue, and whether its
/// acquirer left (a cancel was asked for).
#[derive(Debug, Default)]
pub(super) struct WaitCtl {
    pub(super) left: AtomicBool,
    pub(super) wake: Notify,
}

impl WaitCtl {
    pub(super) fn has_left(&self) -> bool {
        self.left.load(Ordering::Acquire)
    }
}

/// What a session holds and does now.
#[derive(Debug, Default)]
pub(super) struct SessionState {
    /// Per key, its holders here: one holder, or several that all read (readers of this
    /// process share a session's shared hold; a try there is refused while a writer waits in
    /// the server's queue, as on a session of its own).
    holds: HashMap<AdvisoryKey, Vec<KeyHold>>,
    /// A statement waiting in the server's lock queue (nothing else is sent meanwhile).
    pub(super) waiting: Option<Arc<WaitCtl>>,
    /// A cancel was sent for the waiting statement.
    pub(super) cancel_sent: bool,
    /// Since when it has held nothing (for retiring idle sessions).
    pub(super) empty_since: Option<Instant>,
}

impl SessionState {
    /// Nothing held, empty since now.
    pub(super) fn new() -> Self {
        SessionState {
            empty_since: Some(Instant::now()),
            ..SessionState::default()
        }
    }

    /// `holder`'s holds of `key` here.
    pub(super) fn hold(&self, key: AdvisoryKey, holder: &Holder) -> Option<&KeyHold> {
        self.holds
            .get(&key)?
            .iter()
            .find(|hold| hold.holder == *holder)
    }

    pub(super) fn hold_mut(&mut self, key: AdvisoryKey, holder: &Holder) -> Option<&mut KeyHold> {
        self.holds
            .get_mut(&key)?
            .iter_mut()
            .find(|hold| hold.holder == *holder)
    }

    /// Whether anyone holds or is taking `key` here.
    pub(super) fn has_key(&self, key: AdvisoryKey) -> bool {
        self.holds.contains_key(&key)
    }

    /// Whether `key` is held or being taken here exclusively (by anyone).
    pub(super) fn exclusive(&self, key: AdvisoryKey) -> bool {
        self.holds.get(&key).is_some_and(|holds| {
            holds
                .iter()
                .any(|hold| hold.exclusive > 0 || hold.pending_exclusive > 0)
        })
    }

    /// Whether it holds or is taking anything.
    pub(super) fn is_empty(&self) -> bool {
        self.holds.is_empty()
    }

    /// Every holder's holds.
    pub(super) fn each_hold(&self) -> impl Iterator<Item = (AdvisoryKey, &KeyHold)> {
        self.holds
            .iter()
            .flat_map(|(key, holds)| holds.iter().map(move |hold| (*key, hold)))
    }

    /// Keeps `key` here for `holder` while an acquisition in `mode` is on its way (ended
    /// by [`settle`](Self::settle)).
    pub(super) fn keep(&mut self, key: AdvisoryKey, holder: &Holder, mode: Mode) {
        self.empty_since = None;
        let holds = self.holds.entry(key).or_default();
        let hold = match holds.iter().position(|hold| hold.holder == *holder) {
            Some(at) => &mut holds[at],
            None => {
                holds.push(KeyHold {
                    holder: holder.clone(),
                    exclusive: 0,
                    shared: 0,
                    pending_exclusive: 0,
                    pending_shared: 0,
                    deadline: Instant::now(),
                    work_row: false,
                });
                holds.last_mut().expect("just pushed")
            }
        };
        *hold.pending_mut(mode) += 1;
    }

    /// An acquisition of `key` in `mode` by `holder` ended: the key is no longer kept for
    /// it, and if it took the lock (`held_until`: its lease end) the holder has one hold
    /// more.
    pub(super) fn settle(
        &mut self,
        key: AdvisoryKey,
        holder: &Holder,
        mode: Mode,
        held_until: Option<Instant>,
    ) {
        if let Some(hold) = self.hold_mut(key, holder) {
            let pending = hold.pending_mut(mode);
            *pending = pending.saturating_sub(1);
            if let Some(until) = held_until {
                *hold.count_mut(mode) += 1;
                hold.deadline = until;
            }
        }
        self.tidy(key);
    }

    /// Drops the entries of `key` with nothing held or on its way; notes when the session
    /// became empty.
    pub(super) fn tidy(&mut self, key: AdvisoryKey) {
        if let Some(holds) = self.holds.get_mut(&key) {
            holds.retain(|hold| !hold.is_empty());
            if holds.is_empty() {
                self.holds.remove(&key);
            }
        }
        if self.holds.is_empty() && self.waiting.is_none() && self.empty_since.is_none() {
            self.empty_since = Some(Instant::now());
        }
    }

    /// Takes every hold out (the session ended), with what was held.
    pub(super) fn drain(&mut self) -> Vec<KeyHold> {
        self.holds
            .drain()
            .flat_map(|(_, holds)| holds)
            .filter(|hold| hold.total() > 0)
            .collect()
    }
}
