//! The idempotency layer: over real TCP on memory, Redis and the cluster; under faults on a
//! Redis of its own; across real processes.

#[path = "../support/mod.rs"]
mod support;

mod app;
mod behaviour;
mod faults;
mod proptests;
