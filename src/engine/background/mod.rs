//! What goes on beside the caller: the watchdog that renews leases (`renewal`), operations
//! finished (and undone) when their future is dropped (`drop_safe`, `unowned`), and waiting
//! for an answer while the backend may be out of reach (`outage`).

pub(in crate::engine) mod drop_safe;
pub(in crate::engine) mod outage;
pub(in crate::engine) mod renewal;
pub(in crate::engine) mod unowned;
