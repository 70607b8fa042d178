//! Lease renewal: one task per manager renews the leases of all its held locks (every
//! lease/3), or a watchdog future polled by its caller (the HTTP layer's response future, the
//! idempotency layer's run, started only once the work under the lock has to wait);
//! a gate orders renewals before the release.

#[cfg(feature = "axum")]
mod deferred;
mod gate;
mod schedule;
mod watchdog;

use tokio::runtime::Handle;

use crate::backend::BoxFuture;
use crate::engine::hold::loss::Loss;
use crate::error::BackendError;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// What renewal needs of a hold (the hold is above this module: it owns a gate and is
/// scheduled here).
pub(crate) trait Renewable: Send + Sync + 'static {
    fn key(&self) -> &LockKey;
    fn owner(&self) -> &OwnerId;
    fn kind(&self) -> LockKind;
    fn loss(&self) -> &Loss;
    fn gate(&self) -> &RenewGate;
    /// One renewal in the backend: `Ok(false)` when the owner does not hold the lock.
    fn renew(&self) -> BoxFuture<Result<bool, BackendError>>;
    /// The lock is lost: fire the loss signal.
    fn mark_lost(&self);
    /// Where the renewal task runs (the manager's runtime).
    fn runtime(&self) -> Option<Handle>;
}

#[cfg(feature = "axum")]
pub(crate) use deferred::DeferredWatchdog;
pub(crate) use gate::RenewGate;
pub(crate) use schedule::Renewals;
#[cfg(feature = "axum")]
pub(in crate::engine) use watchdog::keep_alive;
#[cfg(feature = "axum")]
pub(crate) use watchdog::InlineWatchdog;
pub(crate) use watchdog::Keeper;
