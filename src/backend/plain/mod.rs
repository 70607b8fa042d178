//! The plain lock (Redisson's `RLock`): a hash `{name}` of owner → holds, its PEXPIRE the
//! lease, Redisson's unlock channel; and locks with a record (`record.lua`: the same lock,
//! plus a record a last release may leave, which later acquisitions get instead of the
//! lock).
//!
//! On Redis its operations go in batches (`batch.rs`: group commit, many operations in
//! one call of `batch.lua`); the fair and the fenced lock renew with them (the hash is the
//! same). In memory: `memory.rs`.

#[cfg(feature = "redis")]
pub(in crate::backend) mod batch;
#[cfg(feature = "redis")]
mod batch_arguments;
#[cfg(feature = "redis")]
mod batch_layout;
#[cfg(feature = "redis")]
mod batch_operation;
pub(in crate::backend) mod memory;
#[cfg(feature = "redis")]
mod record_redis;
#[cfg(feature = "redis")]
pub(in crate::backend) mod redis;

/// A plain lock with a record (`record.lua`), with PUBLISH or SPUBLISH: an
/// acquisition unless the lock has a record ([`RECORDED`] and the record when it has), and
/// a last release that stores one and publishes Redisson's UNLOCK message (`0`).
#[cfg(feature = "redis")]
pub(in crate::backend) fn record_script(sharded: bool) -> String {
    crate::backend::redis::scripts::publishing(include_str!("record.lua"), sharded)
}
