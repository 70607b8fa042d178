//! The ZooKeeper backend beyond the conformance suite (which `tests/behaviour` runs on it):
//! interop with the real Apache Curator, real processes with a witness, a SIGKILLed holder,
//! a session cut off and expired, an ensemble losing its leader, and a thousand waiters
//! that each wake once. Each test's ZooKeeper is a real server started by the test support.

#[path = "../support/mod.rs"]
mod support;

mod cancellation;
mod curator;
mod names;
mod processes;
mod sessions;
