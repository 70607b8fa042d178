//! Building a [`LockManager`](crate::LockManager) and reading its counters: the builder,
//! the defaults it starts from, and the statistics a manager reports.
//!
//! ```
//! use std::time::Duration;
//! use tower_lock::manager::DEFAULT_WAIT;
//! use tower_lock::LockManager;
//!
//! let locks = LockManager::builder()
//!     .wait(DEFAULT_WAIT * 2)
//!     .lease(Duration::from_secs(10))
//!     .key_prefix("billing:")
//!     .memory();
//! assert_eq!(locks.stats(), Default::default()); // nothing held, nothing waiting
//! ```

pub use crate::engine::{
    LockManagerBuilder, ManagerStats, DEFAULT_FAIR_QUEUE_TIMEOUT, DEFAULT_HAND_OVER_LIMIT,
    DEFAULT_LEASE, DEFAULT_WAIT, MAX_LEASE,
};
