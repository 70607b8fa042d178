//! The fenced lock in memory: the plain lock, plus a counter per name that every
//! acquisition (reentry included) moves on and answers (`fenced.lua`).

use tokio::time::Instant;

use crate::backend::memory::plain;
use crate::backend::memory::Locks;
use crate::backend::{AcquireArgs, Attempt};

/// An acquisition: the plain lock's, and the token it got. A re-sent acquisition that
/// already counted answers the token as it is.
pub(in crate::backend) fn take(locks: &mut Locks, args: &AcquireArgs, now: Instant) -> Attempt {
    let counted = match plain::take(locks, args, now) {
        Ok(counted) => counted,
        Err(attempt) => return attempt,
    };
    let token = locks.tokens.entry(args.key.clone()).or_insert(0);
    *token += u64::from(counted);
    Attempt::Fenced(*token)
}
