//! The lock engine, by stage: the manager and what it keeps (`manager/`: settings, the
//! store, the process's holds, operators' requests), a request and its acquisition
//! (`request/`), the hold, its guards, reentry and release (`hold/`), and the work that goes
//! on in the background (`background/`: renewal, drop-safe operations, outages). It is the
//! same for every lock kind and backend: a kind changes what the backend stores and how
//! waiters share a name (see `docs/architecture.md`).

mod background;
mod hold;
mod manager;
mod request;

#[cfg(feature = "idempotency")]
pub(crate) use background::drop_safe::DropSafe;
#[cfg(feature = "axum")]
pub(crate) use background::renewal::DeferredWatchdog;
#[cfg(feature = "axum")]
pub(crate) use background::renewal::InlineWatchdog;
pub use hold::guard::LockGuard;
pub use hold::loss::LossSignal;
pub use hold::multi_guard::MultiLockGuard;
#[cfg(feature = "axum")]
pub(crate) use hold::view::HoldView;
pub use manager::builder::LockManagerBuilder;
pub use manager::operator::MAX_LISTED_NAMES;
pub(crate) use manager::registry::Registry;
pub use manager::registry::{LocalHold, RequestLabel};
pub use manager::settings::{
    DEFAULT_FAIR_QUEUE_TIMEOUT, DEFAULT_HAND_OVER_LIMIT, DEFAULT_LEASE, DEFAULT_WAIT, MAX_LEASE,
};
pub use manager::{LockManager, ManagerStats};
#[cfg(feature = "axum")]
pub(crate) use request::acquire::{Acquired, PendingWatchdog};
pub use request::{LockRequest, ManyNames, MultiLockRequest, OneName};
