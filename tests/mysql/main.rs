//! The MySQL / MariaDB backend beyond the conformance suite (which `tests/behaviour` runs
//! on it): real processes with a witness, a SIGKILLed holder, a `KILL`ed session, a server
//! restarted under waiters, names mapped as DistributedLock maps them. The server is a
//! real MariaDB started by the test support.

#[path = "../support/mod.rs"]
mod support;

mod exactly_once;
mod names;
mod processes;
mod sessions;
