// The guide's examples use the HTTP layer and the Redis backend: shown whole with the
// default features (and on docs.rs), in short without them.
#![cfg_attr(
    all(feature = "axum", feature = "redis", feature = "idempotency", feature = "coalesce"),
    doc = include_str!("docs/crate.md")
)]
#![cfg_attr(
    not(all(
        feature = "axum",
        feature = "redis",
        feature = "idempotency",
        feature = "coalesce"
    )),
    doc = "Request-scoped distributed locks: a [`LockManager`] hands out locks that a \
           watchdog keeps alive while held. Built without some of its default features \
           (`redis`, `axum`, `idempotency`, `coalesce`); the guide is on the crate's front page with \
           them."
)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(any(feature = "zookeeper", feature = "mysql"))]
mod abort;
pub mod admin;
pub mod backend;
#[cfg(feature = "coalesce")]
#[cfg_attr(docsrs, doc(cfg(feature = "coalesce")))]
pub mod coalesce;
#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
mod engine;
mod error;
#[cfg(feature = "axum")]
pub mod extract;
#[cfg(feature = "axum")]
mod http;
#[cfg(feature = "idempotency")]
pub mod idempotency;
mod join;
mod key;
mod kind;
mod lease;
pub mod lock;
pub mod manager;
#[cfg(feature = "axum")]
pub mod rejection;
mod telemetry;
mod wait;

pub use engine::LockManager;
pub use error::LockError;
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
pub use http::layer;

/// The README's examples, compiled as doc tests.
#[cfg(all(doctest, feature = "redis", feature = "axum"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
