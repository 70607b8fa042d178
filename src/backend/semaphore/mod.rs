//! The semaphore (Redisson's `RPermitExpirableSemaphore`): a count of available permits,
//! and the permits held, each a 16-byte id with the deadline of its lease. One script
//! (`semaphore.lua`) for every operation on Redis; the same rules in memory
//! (`memory.rs`).

mod ids;
pub(in crate::backend) mod memory;
#[cfg(feature = "redis")]
pub(in crate::backend) mod redis;

#[cfg(feature = "redis")]
use ids::permit_ids;
pub(crate) use ids::permit_ids_hex;

/// A semaphore's permits now, as the backend sees them (see
/// [`LockManager::semaphore_usage`](crate::LockManager::semaphore_usage)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PermitUsage {
    /// The limit in force (available and held permits together), or `None` when the name
    /// was never used (its first acquisition sets it).
    pub limit: Option<u32>,
    /// Permits held now with a lease that has not ended.
    pub in_use: u32,
}

impl PermitUsage {
    /// A name's usage: `limit` (`None`: never set) and the permits in use.
    pub fn new(limit: Option<u32>, in_use: u32) -> Self {
        PermitUsage { limit, in_use }
    }

    /// Permits that an acquisition could take now (0 while the limit was lowered under
    /// the permits still held).
    pub fn available(&self) -> u32 {
        self.limit.unwrap_or(0).saturating_sub(self.in_use)
    }
}
