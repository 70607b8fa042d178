//! This process's own unlock notices, which come back from Redis to its own subscriber:
//! they are not another process's unlock (the manager wakes its waiters itself), and a
//! release that counts its own subscriber among those its `PUBLISH` reached learns how many
//! *other* processes listen.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::Notices;
use crate::key::{KeyMap, KeySet, LockKey};

/// The names this process's subscriber listens on, and the notices of its own releases
/// still to come back on them.
#[derive(Default)]
pub(in crate::backend) struct Echoes {
    state: Mutex<EchoState>,
}

#[derive(Default)]
struct EchoState {
    subscribed: KeySet,
    expected: KeyMap<u32>,
}

impl Echoes {
    fn state(&self) -> MutexGuard<'_, EchoState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The subscriber now listens on `keys`.
    pub(in crate::backend) fn subscribed(&self, keys: &[LockKey]) {
        self.state().subscribed.extend(keys.iter().cloned());
    }

    /// The subscriber no longer listens on `keys`: nothing comes back on them.
    pub(in crate::backend) fn unsubscribed(&self, keys: &[LockKey]) {
        let mut state = self.state();
        for key in keys {
            state.subscribed.remove(key);
            state.expected.remove(key);
        }
    }

    /// A release that may unlock `key` is about to be sent. `true`: this process listens
    /// on it, and the notice is expected back. Counted *before* sending, because the notice
    /// can arrive before the release's own reply; counted after, it would swallow the next
    /// process's notice instead and leave the waiter asleep until the lease ends.
    pub(in crate::backend) fn expect(&self, key: &LockKey) -> bool {
        let mut state = self.state();
        if !state.subscribed.contains(key) {
            return false;
        }
        *state.expected.entry(key.clone()).or_default() += 1;
        true
    }

    /// A release counted by [`expect`](Self::expect) was answered; if it did not unlock, no
    /// notice comes and the count is taken back. `true`: there was none to take back, so a
    /// notice taken for ours meanwhile was another process's (a release of a lock this
    /// process may not hold — an undo — crossed the holder's): it must be passed on.
    pub(in crate::backend) fn settle(&self, key: &LockKey, unlocked: bool) -> bool {
        if unlocked {
            return false;
        }
        !self.take(key)
    }

    /// An unlock notice for `key` arrived: `true` if it is one of ours (taken off the
    /// count).
    pub(in crate::backend) fn take(&self, key: &LockKey) -> bool {
        let mut state = self.state();
        let Some(count) = state.expected.get_mut(key) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            state.expected.remove(key);
        }
        true
    }

    /// Notices may have been lost (a reconnect): none is expected any more.
    pub(in crate::backend) fn forget_expected(&self) {
        self.state().expected.clear();
    }
}

/// A release's notice counted as expected back ([`Echoes::expect`]), until its answer
/// settles it. A notice wrongly taken for ours is passed on to the waiters: a wake-up too
/// many costs one look, one too few leaves a waiter asleep while the lock is free.
pub(in crate::backend) struct Unsettled(Option<(Arc<Echoes>, Notices, LockKey)>);

impl Unsettled {
    /// The notice of a release of `key` is counted as expected back.
    pub(in crate::backend) fn new(echoes: Arc<Echoes>, notices: Notices, key: LockKey) -> Self {
        Unsettled(Some((echoes, notices, key)))
    }

    /// The release was answered: `unlocked` says whether it published its notice.
    pub(in crate::backend) fn settle(mut self, unlocked: bool) {
        if let Some((echoes, notices, key)) = self.0.take() {
            if echoes.settle(&key, unlocked) {
                notices.unlocked(&key);
            }
        }
    }
}

impl Drop for Unsettled {
    /// Dropped unanswered (a caller's time limit, RedLock's per node): whether it unlocked
    /// is unknown, so the count is taken back and the waiters look once more (a notice of
    /// ours arriving later is then taken for another process's: one look more again).
    fn drop(&mut self) {
        if let Some((echoes, notices, key)) = self.0.take() {
            echoes.take(&key);
            notices.unlocked(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LockKey {
        LockKey::new("", "order", 64).unwrap()
    }

    /// Our release's notice can come back before the release's own reply; the next
    /// process's notice must still be passed on (it used to be taken for our echo,
    /// leaving the waiter asleep until the holder's lease ended).
    #[test]
    fn an_early_echo_does_not_swallow_the_next_unlock() {
        let echoes = Echoes::default();
        assert!(!echoes.expect(&key()), "not listening: nothing comes back");
        echoes.subscribed(&[key()]);
        assert!(echoes.expect(&key()));
        assert!(echoes.take(&key()), "our own echo, ahead of the reply");
        echoes.settle(&key(), true);
        assert!(
            !echoes.take(&key()),
            "the next process's unlock is passed on"
        );
    }

    #[test]
    fn a_release_that_did_not_unlock_takes_its_count_back() {
        let echoes = Echoes::default();
        echoes.subscribed(&[key()]);
        assert!(echoes.expect(&key()));
        echoes.settle(&key(), false);
        assert!(!echoes.take(&key()), "no echo was owed");
        assert!(echoes.expect(&key()));
        echoes.unsubscribed(&[key()]);
        assert!(!echoes.take(&key()), "nothing comes back once unsubscribed");
    }

    /// A release of a lock this process does not hold (an undo) is answered "not held"
    /// after another process's notice on the name was taken for ours: it is passed on.
    #[test]
    fn a_notice_taken_for_a_release_that_did_not_unlock_is_passed_on() {
        let echoes = Echoes::default();
        echoes.subscribed(&[key()]);
        assert!(echoes.expect(&key()));
        assert!(
            echoes.take(&key()),
            "the other process's notice, taken for ours"
        );
        assert!(echoes.settle(&key(), false), "it must be passed on");
        assert!(echoes.expect(&key()));
        assert!(
            !echoes.settle(&key(), false),
            "nothing was taken: nothing to pass on"
        );
        assert!(!echoes.take(&key()));
    }
}
