//! LockLayer and Locked<K> over HTTP, on the in-memory backend and a real Redis.

#[path = "../support/mod.rs"]
mod support;

mod admin;
mod extractors;
mod fair;
mod fenced;
mod helpers;
mod layer;
mod multi;
mod multi_layer;
mod read_write;
mod semaphore;
