//! # tower-lock
//!
//! Request-scoped distributed locks for Tower and Axum, on Redis (Redisson-compatible) or
//! in memory.
//!
//! The core is a [`LockManager`]: `manager.lock(name)` builds a request, `.acquire()`
//! waits for the lock and returns a [`LockGuard`] that keeps the lease alive (watchdog)
//! until it is released or dropped.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), tower_lock::LockError> {
//! use std::time::Duration;
//! use tower_lock::LockManager;
//!
//! let locks = LockManager::memory(); // or LockManager::redis("redis://127.0.0.1:6379").await?
//! let guard = locks
//!     .lock("order:42")
//!     .wait(Duration::from_secs(5))
//!     .acquire()
//!     .await?;
//! // ... work on order 42; no other holder of "order:42" runs meanwhile ...
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! ## Redis layout
//! A lock is Redisson's `RLock`: a hash at the key `<prefix><name>` with one field, the
//! owner id `<manager UUID>:<holder number>`, whose value is the reentry count; the
//! key's PEXPIRE is the lease. Releases publish `0` on `redisson_lock__channel:{<key>}`.
//! A Redisson client calling `getLock("<prefix><name>")` and tower-lock exclude each other.
//!
//! ## Waiting
//! Waiters sleep until an unlock message arrives (one subscriber connection per manager),
//! or until the holder's lease as last reported ends; they never poll. Local waiters of
//! one name form a FIFO queue and only its head retries, so the Redis work per hand-over
//! does not grow with the number of waiters, and a newcomer never overtakes them. On
//! Redis a last release hands the lock straight to that head inside its own script run,
//! which checks that the releaser still holds the lock and makes the head the owner (one
//! round trip per hand-over instead of two; the head holds the lock only on Redis's
//! answer); at most [`hand_over_limit`](LockManagerBuilder::hand_over_limit) times in a
//! row before a release frees it, and then waiters of other processes get the first
//! chance.
//!
//! ## Loss
//! A guard's [`lost`](LockGuard::lost) completes when the lock may be lost: a renewal
//! found it gone, or no renewal succeeded a [`LossMargin`] before the lease could end.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
mod engine;
mod error;
#[cfg(feature = "axum")]
mod http;
mod key;
mod kind;
mod telemetry;
mod wait;

pub use engine::{
    LockGuard, LockManager, LockManagerBuilder, LockRequest, LossMargin, LossSignal, ManagerStats,
    DEFAULT_HAND_OVER_LIMIT, DEFAULT_LEASE, DEFAULT_WAIT, MAX_LEASE,
};
pub use error::{BackendError, LockError, Released};
#[cfg(feature = "redis")]
pub use fred;
#[cfg(feature = "axum")]
pub use http::{
    extract, layer, layer::LockResponseBody, Held, HeldLock, KeySource, LockLayer,
    LockManagerState, LockRejection, Lockable, Locked, DEFAULT_BUSY_RETRY_AFTER, SHOWN_CHARS,
};
pub use key::{LockKey, OwnerId, DEFAULT_MAX_NAME_LEN};
pub use kind::LockKind;

/// The README's examples, compiled as doc tests.
#[cfg(all(doctest, feature = "redis", feature = "axum"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
