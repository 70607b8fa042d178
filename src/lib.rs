#![doc = include_str!("docs/crate.md")]
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
    MultiLockGuard, MultiLockRequest, DEFAULT_FAIR_QUEUE_TIMEOUT, DEFAULT_HAND_OVER_LIMIT,
    DEFAULT_LEASE, DEFAULT_WAIT, MAX_LEASE,
};
pub use error::{BackendError, LockError, Released};
#[cfg(feature = "redis")]
pub use fred;
#[cfg(feature = "axum")]
pub use http::{
    extract, layer, layer::LockResponseBody, multi_layer, FairLocked, FencedLocked, Held, HeldLock,
    HeldMultiLock, KeySource, LockLayer, LockManagerState, LockRejection, Lockable, Locked,
    MultiLockLayer, MultiLocked, ReadLocked, WriteLocked, DEFAULT_BUSY_RETRY_AFTER, SHOWN_CHARS,
};
pub use key::{LockKey, OwnerId, DEFAULT_MAX_NAME_LEN};
pub use kind::LockKind;

/// The README's examples, compiled as doc tests.
#[cfg(all(doctest, feature = "redis", feature = "axum"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
