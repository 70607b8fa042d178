//! The fenced lock (Redisson's `RFencedLock`): the plain lock's hash plus a counter
//! `redisson_lock_token:{name}` that every acquisition moves on in the same step and
//! answers (`fenced.lua`); released and renewed as the plain lock.

pub(in crate::backend) mod memory;
#[cfg(feature = "redis")]
pub(in crate::backend) mod redis;
