#![doc = include_str!("docs/crate.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod backend;
mod engine;
mod error;
#[cfg(feature = "axum")]
mod http;
#[cfg(feature = "idempotency")]
pub mod idempotency;
mod join;
mod key;
mod kind;
mod lease;
mod telemetry;
mod wait;

pub use engine::{
    LockGuard, LockManager, LockManagerBuilder, LockRequest, LossSignal, ManagerStats, ManyNames,
    MultiLockGuard, MultiLockRequest, OneName, DEFAULT_FAIR_QUEUE_TIMEOUT, DEFAULT_HAND_OVER_LIMIT,
    DEFAULT_LEASE, DEFAULT_WAIT, MAX_LEASE,
};
pub use error::{BackendError, LockError, Released};
/// The Redis client that tower-lock is built on, re-exported so that a connection can be
/// configured and handed over with the very fred version tower-lock uses: a `Config`
/// (TLS, credentials, Sentinel, Cluster) for [`RedisBackend::from_config`], or clients of
/// your own for [`RedisBackend::from_clients`] and [`RedisBackend::from_pool`].
///
/// It is built with the features tower-lock needs (scripts, pub/sub, cluster and server
/// commands), not with fred's data commands: `GET`, `HSET` and the like are not there. For
/// commands of your own, add `fred = "10"` with the features you use to your
/// `Cargo.toml`: Cargo builds one fred for both, so your clients and tower-lock's are the
/// same types (a client built from your `fred` can be given to
/// [`RedisBackend::from_clients`]).
///
/// [`RedisBackend::from_config`]: backend::RedisBackend::from_config
/// [`RedisBackend::from_clients`]: backend::RedisBackend::from_clients
/// [`RedisBackend::from_pool`]: backend::RedisBackend::from_pool
#[cfg(feature = "redis")]
pub use fred;
#[cfg(feature = "axum")]
pub use http::{
    extract, layer, layer::LockResponseBody, FairLocked, FencedLocked, Held, HeldLock,
    HeldMultiLock, KeySource, LockLayer, LockManagerState, LockRejection, Lockable, Locked,
    MultiLocked, ReadLocked, WriteLocked, DEFAULT_BUSY_RETRY_AFTER, SHOWN_CHARS,
};
#[cfg(feature = "idempotency")]
pub use idempotency::IdempotencyLayer;
pub use key::{LockKey, OwnerId, DEFAULT_MAX_NAME_LEN};
pub use kind::LockKind;
pub use lease::LossMargin;

/// The README's examples, compiled as doc tests.
#[cfg(all(doctest, feature = "redis", feature = "axum"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
