//! The lock engine: the manager and its settings, acquisitions, holds and their guards,
//! lease renewal and the loss signal. It is the same for every lock kind and backend: a
//! kind changes what the backend stores and how waiters share a name (see
//! `docs/architecture.md`).

mod acquire;
mod builder;
#[cfg(feature = "axum")]
mod caller_driven;
mod count_lock;
mod drop_safe;
mod guard;
mod hold;
mod loss;
mod manager;
mod multi;
mod multi_guard;
mod operator;
mod outage;
mod reentry;
mod registry;
mod release;
mod renewal;
mod request;
mod semaphore;
mod settings;
mod shared;
mod store;
mod unowned;

#[cfg(feature = "axum")]
pub(crate) use acquire::{Acquired, PendingWatchdog};
pub use builder::LockManagerBuilder;
#[cfg(feature = "axum")]
pub(crate) use caller_driven::{HoldView, InlineWatchdog};
#[cfg(feature = "idempotency")]
pub(crate) use drop_safe::DropSafe;
pub use guard::LockGuard;
pub use loss::LossSignal;
pub use manager::{LockManager, ManagerStats};
pub use multi_guard::MultiLockGuard;
pub use operator::MAX_LISTED_NAMES;
pub use registry::{LocalHold, RequestLabel};
pub use request::{LockRequest, ManyNames, MultiLockRequest, OneName};
pub use settings::{
    DEFAULT_FAIR_QUEUE_TIMEOUT, DEFAULT_HAND_OVER_LIMIT, DEFAULT_LEASE, DEFAULT_WAIT, MAX_LEASE,
};
