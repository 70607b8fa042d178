//! The behaviour suite: the same tests against the in-memory backend, a real Redis and a
//! local Redis Cluster, by subject (`exclusion::redis::mutual_exclusion`, …).

#[path = "../support/mod.rs"]
mod support;

mod ctx;
mod exclusion;
mod fair;
mod fenced;
mod holds;
mod leases;
mod listing;
mod multi;
mod operator;
mod read_write;
mod records;
mod semaphore;
mod semaphore_holds;
mod waiting;
