//! For operators: what a name holds now, which names exist, freeing a stuck name, and an
//! opt-in JSON router for a service's own debug routes (see `docs/operations.md`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use tower_lock::admin::{HolderSide, InspectedKind};
//! use tower_lock::LockManager;
//!
//! let locks = LockManager::memory();
//! let _guard = locks.read_lock("report:7").acquire().await.unwrap();
//! let info = locks.inspect("report:7").await.unwrap();
//! assert_eq!(info.kind, Some(InspectedKind::ReadWrite));
//! assert_eq!(info.holders[0].side, HolderSide::Read);
//!
//! // A holder that is truly gone: free the name (its holder's loss signal fires).
//! let freed = locks.force_unlock("report:7", "alice (on call)").await.unwrap();
//! assert_eq!(freed.freed, 1);
//! # }
//! ```

pub use crate::backend::{
    ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, NameList, QueuedWaiter,
    LISTED_MAX,
};
pub use crate::engine::{LocalHold, RequestLabel, MAX_LISTED_NAMES};

#[cfg(feature = "axum")]
mod router;
#[cfg(feature = "axum")]
pub use router::{router, Operator, DEFAULT_LISTED_NAMES};
