//! `FencedLocked<K>`: the fenced lock as an Axum extractor.

use std::fmt;
use std::ops::Deref;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use http::request::Parts;

use crate::engine::{LockGuard, LossSignal};
use crate::http::locked::{lock_value, locked_extractor, Held, Lockable};
use crate::http::manager_state::LockManagerState;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::kind::LockKind;

/// Extracts `K` and holds its **fenced** lock while the handler runs, with this
/// acquisition's [fencing token](Self::fencing_token) (see
/// [`LockManager::fenced_lock`](crate::LockManager::fenced_lock)). Otherwise as
/// [`Locked<K>`](crate::extract::Locked): same manager lookup, statuses and release.
///
/// Under a [`LockLayer`](crate::layer::LockLayer) that holds the same key with
/// [`fenced`](crate::layer::LockLayer::fenced), it reenters the layer's hold (with a token of its
/// own); under a layer that holds another kind of lock on the key, the request is answered
/// 500 with [`LockRejection::KindMismatch`], which names the fix.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use axum::{routing::put, Extension, Router};
/// use tower_lock::extract::{FencedLocked, KeySource, Lockable};
/// use tower_lock::LockManager;
/// # use tower::ServiceExt;
///
/// struct AccountId(u64);
/// impl Lockable for AccountId {
///     fn source() -> KeySource { KeySource::path("accountId") }
///     fn parse(raw: &str) -> Result<Self, String> {
///         raw.parse().map(AccountId).map_err(|_| format!("`{raw}` is not an account number"))
///     }
///     fn lock_name(&self) -> String { format!("account:{}", self.0) }
/// }
///
/// async fn update(account: FencedLocked<AccountId>) -> String {
///     let token = account.fencing_token().expect("a fenced lock has a token");
///     // UPDATE accounts SET …, fence = $token WHERE id = $id AND fence < $token
///     format!("account {} updated under token {token}", account.0.0)
/// }
///
/// let app = Router::new()
///     .route("/accounts/{accountId}", put(update))
///     .layer(Extension(LockManager::memory()));
/// # let response = app.oneshot(http::Request::put("/accounts/7").body(axum::body::Body::empty()).unwrap()).await.unwrap();
/// # assert_eq!(response.status(), 200);
/// # }
/// ```
pub struct FencedLocked<K>(pub Held<K>);

locked_extractor!(FencedLocked, LockKind::Fenced);
