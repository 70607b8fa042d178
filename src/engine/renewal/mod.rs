//! Lease renewal: one task per manager renews the leases of all its held locks (every
//! lease/3), or a watchdog future polled by its caller (the HTTP layer's response future);
//! a gate orders renewals before the release.

mod gate;
mod schedule;
mod watchdog;

pub(crate) use gate::RenewGate;
pub(crate) use schedule::Renewals;
#[cfg(feature = "axum")]
pub(crate) use watchdog::renew_once;
pub(crate) use watchdog::Keeper;
