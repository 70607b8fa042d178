//! A holder's claim on a name in this process.

use super::{WaitQueues, Wake};
use crate::key::LockKey;

/// A holder's or an attempt's claim on a name (see [`WaitQueues::claim`]). Dropping it
/// ends the claim without waking anyone.
pub(crate) struct Claim {
    pub(super) queues: WaitQueues,
    pub(super) key: LockKey,
    /// A read hold's claim (readers share).
    pub(super) reads: bool,
    pub(super) ended: bool,
}

impl Claim {
    /// The holder let go; the next waiter is woken as `wake` says.
    pub(crate) fn end(mut self, wake: Wake) {
        self.ended = true;
        self.queues.hold_ended(&self.key, self.reads, wake);
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.ended {
            self.queues.hold_ended(&self.key, self.reads, Wake::No);
        }
    }
}
