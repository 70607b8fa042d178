//! A holder's claim on a name in this process.

use super::WaitQueues;
use crate::key::LockKey;

/// A holder's or an attempt's claim on a name (see [`WaitQueues::claim`]). Dropping it
/// ends the claim without waking anyone.
pub(crate) struct Claim {
    pub(super) queues: WaitQueues,
    pub(super) key: LockKey,
    pub(super) ended: bool,
}

impl Claim {
    /// The holder let go; `unlocked`: its release freed the lock (the next waiter is woken).
    pub(crate) fn end(mut self, unlocked: bool) {
        self.ended = true;
        self.queues.hold_ended(&self.key, unlocked);
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.ended {
            self.queues.hold_ended(&self.key, false);
        }
    }
}
