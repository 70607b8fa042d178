//! What a [`LockManager`](crate::LockManager) hands out: requests for locks, the guards of
//! locks held, their loss signal, the kinds of lock and the names they are taken on.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tower_lock::LockError> {
//! use tower_lock::lock::{LockKind, Released};
//! use tower_lock::LockManager;
//!
//! let locks = LockManager::memory();
//! let guard = locks.fair_lock("order:42").acquire().await?;
//! assert_eq!(guard.kind(), LockKind::Fair);
//! assert_eq!(guard.release().await?, Released::Unlocked);
//! # Ok(()) }
//! ```

pub use crate::backend::LockRecord;
pub use crate::engine::{
    LockGuard, LockRequest, LossSignal, ManyNames, MultiLockGuard, MultiLockRequest, OneName,
};
pub use crate::error::Released;
pub use crate::key::{LockKey, OwnerId, DEFAULT_MAX_NAME_LEN};
pub use crate::kind::{LockKind, Permits, MAX_PERMITS, MAX_PERMITS_PER_ACQUISITION};
pub use crate::lease::LossMargin;
