//! `Permit<K>`: a semaphore's permit as an Axum extractor.

use std::fmt;
use std::ops::Deref;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use http::request::Parts;

use crate::engine::{LockGuard, LossSignal};
use crate::error::LockError;
use crate::http::acquire_failure::BusyAnswer;
use crate::http::locked::{lock_value, locked_extractor, Held, Lockable};
use crate::http::manager_state::LockManagerState;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::kind::{LockKind, Permits};

/// A value that names a semaphore, and its limit: at most [`limit`](Self::limit) requests
/// naming the same value hold a [`Permit`] at once.
pub trait Limited: Lockable {
    /// How many permits of one name may be held at once, across every process.
    fn limit() -> u32;

    /// How many permits one request takes (default 1).
    fn permits() -> u32 {
        1
    }
}

/// The kind and busy answer of `K`'s permits.
fn answer<K: Limited>() -> Result<(LockKind, BusyAnswer), LockError> {
    let permits = Permits::new(K::limit(), K::permits())
        .map_err(|reason| LockError::InvalidPermits { reason })?;
    Ok((
        LockKind::Semaphore(permits),
        BusyAnswer::semaphore(permits.limit()),
    ))
}

/// Extracts `K` and holds [`K::permits()`](Limited::permits) permits of its semaphore while
/// the handler runs (see [`LockManager::semaphore`](crate::LockManager::semaphore)). A
/// request that finds every permit in use waits for one (the manager's wait), then is
/// answered `429 Too Many Requests` with `Retry-After`
/// ([`LockRejection::NoPermit`]); otherwise as [`Locked<K>`](crate::extract::Locked): the
/// same manager lookup, statuses and release. Under a
/// [`LockLayer::semaphore`](crate::layer::LockLayer::semaphore) of the same key and limit,
/// it shares the layer's permit.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use axum::{routing::post, Extension, Router};
/// use tower_lock::extract::{KeySource, Limited, Lockable, Permit};
/// use tower_lock::LockManager;
/// # use tower::ServiceExt;
///
/// struct Tenant(String);
/// impl Lockable for Tenant {
///     fn source() -> KeySource { KeySource::path("tenant") }
///     fn parse(raw: &str) -> Result<Self, String> { Ok(Tenant(raw.to_owned())) }
///     fn lock_name(&self) -> String { format!("exports:{}", self.0) }
/// }
/// impl Limited for Tenant {
///     fn limit() -> u32 { 8 } // at most 8 exports per tenant at once
/// }
///
/// async fn export(tenant: Permit<Tenant>) -> String {
///     format!("exporting for {} under permit {}", tenant.0.0, tenant.guard().permit_ids()[0])
/// }
///
/// let app = Router::new()
///     .route("/tenants/{tenant}/exports", post(export))
///     .layer(Extension(LockManager::memory()));
/// # let response = app.oneshot(http::Request::post("/tenants/acme/exports").body(axum::body::Body::empty()).unwrap()).await.unwrap();
/// # assert_eq!(response.status(), 200);
/// # }
/// ```
pub struct Permit<K>(pub Held<K>);

locked_extractor!(Permit where K: Limited, answer::<K>());
