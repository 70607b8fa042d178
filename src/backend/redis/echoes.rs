//! This process's own unlock notices, which come back from Redis to its own subscriber:
//! they are not another process's unlock (the manager wakes its waiters itself), and a
//! release that counts its own subscriber among those its `PUBLISH` reached learns how many
//! *other* processes listen.

use std::sync::{Mutex, MutexGuard};

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
    /// notice comes and the count is taken back.
    pub(in crate::backend) fn settle(&self, key: &LockKey, unlocked: bool) {
        if unlocked {
            return;
        }
        self.take(key);
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
}
