//! The lock engine: the manager and its settings, acquisitions, holds and their guards,
//! lease renewal and the loss signal. It is the same for every lock kind and backend: a
//! kind changes what the backend stores and how waiters share a name (see
//! `docs/architecture.md`).

mod acquire;
mod builder;
mod count_lock;
mod drop_safe;
mod fair;
mod guard;
pub(crate) mod hold;
#[cfg(feature = "axum")]
mod http_support;
mod loss;
mod manager;
mod multi;
mod multi_guard;
mod outage;
mod release;
mod renewal;
mod request;
mod store;
mod unowned;

#[cfg(feature = "axum")]
pub(crate) use acquire::{Acquired, PendingWatchdog};
pub use builder::{
    LockManagerBuilder, DEFAULT_FAIR_QUEUE_TIMEOUT, DEFAULT_HAND_OVER_LIMIT, DEFAULT_LEASE,
    DEFAULT_WAIT, MAX_LEASE,
};
#[cfg(feature = "idempotency")]
pub(crate) use drop_safe::DropSafe;
pub use guard::LockGuard;
#[cfg(feature = "axum")]
pub(crate) use guard::{hold_as, reenter};
#[cfg(feature = "axum")]
pub(crate) use http_support::InlineWatchdog;
pub use loss::{LossMargin, LossSignal};
pub use manager::{LockManager, ManagerStats};
#[cfg(feature = "redis")]
pub(crate) use multi::join_all;
pub use multi::MultiLockRequest;
pub use multi_guard::MultiLockGuard;
pub use request::LockRequest;
