//! `Locked<K>`: an Axum extractor that holds a lock for the handler's lifetime.

use std::fmt;
use std::ops::Deref;

use axum::extract::{FromRequestParts, OptionalFromRequestParts};
use http::request::Parts;

use crate::engine::LockGuard;
use crate::engine::LockManager;
use crate::engine::LossSignal;
use crate::http::acquire_failure::BusyAnswer;
use crate::http::held_multi::{layer_hold, layer_manager};
use crate::http::key_source::KeySource;
use crate::http::manager_state::LockManagerState;
use crate::http::rejection::LockRejection;
use crate::key::LockKey;
use crate::kind::LockKind;

/// A request value that names a lock, such as an order id.
///
/// ```
/// use tower_lock::extract::{KeySource, Lockable};
///
/// struct OrderId(u64);
///
/// impl Lockable for OrderId {
///     fn source() -> KeySource {
///         KeySource::path("orderId")
///     }
///     fn parse(raw: &str) -> Result<Self, String> {
///         raw.parse().map(OrderId).map_err(|_| format!("`{raw}` is not an order number"))
///     }
///     fn lock_name(&self) -> String {
///         format!("order:{}", self.0)
///     }
/// }
/// ```
pub trait Lockable: Sized + Send + 'static {
    /// Where the raw value is read from.
    fn source() -> KeySource;

    /// Parses the raw value; an error (what is wrong, for the client) is a 400.
    fn parse(raw: &str) -> Result<Self, String>;

    /// The lock name (the manager puts its key prefix in front).
    fn lock_name(&self) -> String;
}

/// Extracts `K`, takes its lock, and holds it while the handler runs: the lock is
/// released when the handler's future finishes or is dropped (on the in-memory backend at
/// once, else in the background, right away). If [`LockLayer`](crate::layer::LockLayer)
/// already holds the same key for this request, the extractor enters that lock again (same
/// owner) instead of waiting for itself.
///
/// The lock is named `K::lock_name()` (under the manager's prefix). A layer excludes it
/// only when it names its locks the same way: [`LockLayer::for_key::<K>()`]; a layer
/// built with [`by_path_param`](crate::layer::LockLayer::by_path_param) locks `<param>:<value>`,
/// another name.
///
/// Axum runs this extractor before the body is read: a handler that also takes the body
/// reads it under the lock. For routes with bodies, put the route behind
/// [`LockLayer::for_key::<K>()`] (which reads the body first) and let the extractor
/// enter its lock.
///
/// [`LockLayer::for_key::<K>()`]: crate::layer::LockLayer::for_key
///
/// The [`LockManager`] comes from the request extensions (`.layer(Extension(manager))`),
/// else from the lock of a [`LockLayer`](crate::layer::LockLayer) given one with
/// [`manager`](crate::layer::LockLayer::manager), else from the router's state (see
/// [`LockManagerState`]: a state that gives a `LockManager` through axum's `FromRef`).
/// A router with a state of its own that holds no manager implements
/// [`LockManagerState`] for it, returning `None` (one line); otherwise the handler does
/// not compile (`#[axum::debug_handler]` names the missing `FromRef<YourState>`).
/// Failures are [`LockRejection`]s, with the same
/// statuses as the layer's (409 busy, 400 bad key, 503 backend down, 500 no manager).
/// `Option<Locked<K>>` is `None` when the request does not carry the key at all.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use axum::{routing::post, Extension, Router};
/// use tower_lock::extract::{KeySource, Lockable, Locked};
/// use tower_lock::LockManager;
/// # use tower::ServiceExt;
///
/// struct OrderId(u64);
/// impl Lockable for OrderId {
///     fn source() -> KeySource { KeySource::path("orderId") }
///     fn parse(raw: &str) -> Result<Self, String> {
///         raw.parse().map(OrderId).map_err(|_| format!("`{raw}` is not an order number"))
///     }
///     fn lock_name(&self) -> String { format!("order:{}", self.0) }
/// }
///
/// async fn refund(Locked(order): Locked<OrderId>) -> String {
///     // No other request for this order runs until this handler returns.
///     format!("refunded order {} under {}", order.0, order.key())
/// }
///
/// let app = Router::new()
///     .route("/orders/{orderId}/refund", post(refund))
///     .layer(Extension(LockManager::memory()));
/// # let response = app.oneshot(http::Request::post("/orders/7/refund").body(axum::body::Body::empty()).unwrap()).await.unwrap();
/// # assert_eq!(response.status(), 200);
/// # }
/// ```
pub struct Locked<K>(pub Held<K>);

/// A value together with the lock it names; derefs to the value. Dropping it releases
/// the lock.
pub struct Held<K> {
    value: K,
    guard: LockGuard,
}

impl<K> Held<K> {
    /// The lock's key.
    pub fn key(&self) -> &LockKey {
        self.guard.key()
    }

    /// The loss signal: completes if the lock is lost while the handler runs.
    pub fn loss(&self) -> LossSignal {
        self.guard.loss()
    }

    /// The guard (lease, owner, reentry).
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// The fencing token of this acquisition of a fenced lock (see
    /// [`LockGuard::fencing_token`]); `None` for the other kinds.
    pub fn fencing_token(&self) -> Option<u64> {
        self.guard.fencing_token()
    }

    /// The value, and the guard to release explicitly.
    pub fn into_parts(self) -> (K, LockGuard) {
        (self.value, self.guard)
    }
}

impl<K> Deref for Held<K> {
    type Target = K;

    fn deref(&self) -> &K {
        &self.value
    }
}

impl<K: fmt::Debug> fmt::Debug for Held<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("value", &self.value)
            .field("key", self.key())
            .finish()
    }
}

/// The accessors, `Deref`, `Debug` and the two extractor impls of a `Locked`-like
/// tuple struct over [`Held<K>`] that takes lock `$kind` (for `K: Lockable`), or, in the
/// second form, the kind and busy answer `$answer` gives for `K: $bound`
/// (`Result<(LockKind, BusyAnswer), LockError>`).
macro_rules! locked_extractor {
    ($name:ident, $kind:expr) => {
        $crate::http::locked::locked_extractor!(
            $name where K: Lockable,
            Ok(($kind, $crate::http::acquire_failure::BusyAnswer::default()))
        );
    };
    ($name:ident where K: $bound:path, $answer:expr) => {
        impl<K> $name<K> {
            /// The lock's key.
            pub fn key(&self) -> &LockKey {
                self.0.key()
            }

            /// The loss signal.
            pub fn loss(&self) -> LossSignal {
                self.0.loss()
            }

            /// The guard.
            pub fn guard(&self) -> &LockGuard {
                self.0.guard()
            }

            /// The fencing token, for a fenced lock (see
            /// [`LockGuard::fencing_token`]).
            pub fn fencing_token(&self) -> Option<u64> {
                self.0.fencing_token()
            }
        }

        impl<K> Deref for $name<K> {
            type Target = K;

            fn deref(&self) -> &K {
                &self.0
            }
        }

        impl<K: fmt::Debug> fmt::Debug for $name<K> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.0).finish()
            }
        }

        impl<S, K> FromRequestParts<S> for $name<K>
        where
            S: LockManagerState + Send + Sync,
            K: $bound,
        {
            type Rejection = LockRejection;

            async fn from_request_parts(
                parts: &mut Parts,
                state: &S,
            ) -> Result<Self, Self::Rejection> {
                let raw = K::source().read(parts)?;
                lock_value::<K>(parts, state, &raw, $answer).await.map($name)
            }
        }

        impl<S, K> OptionalFromRequestParts<S> for $name<K>
        where
            S: LockManagerState + Send + Sync,
            K: $bound,
        {
            type Rejection = LockRejection;

            async fn from_request_parts(
                parts: &mut Parts,
                state: &S,
            ) -> Result<Option<Self>, Self::Rejection> {
                match K::source().read(parts) {
                    Ok(raw) => lock_value::<K>(parts, state, &raw, $answer)
                        .await
                        .map(|held| Some($name(held))),
                    Err(LockRejection::MissingKey { .. }) => Ok(None),
                    Err(rejection) => Err(rejection),
                }
            }
        }
    };
}
pub(crate) use locked_extractor;

locked_extractor!(Locked, LockKind::Plain);

/// The manager an extractor locks with: the request's, else that of the layer's lock (a
/// layer given its own manager does not put it in the extensions of the requests it
/// locks), else the state's.
pub(crate) fn request_manager(
    parts: &Parts,
    state: &impl LockManagerState,
) -> Result<LockManager, LockRejection> {
    if let Some(manager) = parts.extensions.get::<LockManager>() {
        return Ok(manager.clone());
    }
    layer_manager(parts)
        .or_else(|| state.lock_manager())
        .ok_or(LockRejection::NoManager)
}

/// Parses `K` from `raw` and takes its lock of `answer`'s kind: a hold of the layer's lock
/// on the same key where the rules allow (the same kind; a read under a write), else a
/// lock of its own; a kind the layer's hold cannot give is a 500 that names the mistake.
/// `answer`: the kind and how a busy lock is answered (an error: the kind is invalid).
pub(crate) async fn lock_value<K: Lockable>(
    parts: &Parts,
    state: &impl LockManagerState,
    raw: &str,
    answer: Result<(LockKind, BusyAnswer), crate::LockError>,
) -> Result<Held<K>, LockRejection> {
    let value = K::parse(raw).map_err(|reason| LockRejection::InvalidKey {
        what: K::source().describe(),
        reason,
    })?;
    let busy = answer
        .as_ref()
        .map_or(BusyAnswer::default(), |(_, busy)| *busy);
    let rejection = |e| LockRejection::from_error(e, &K::source().describe(), busy);
    let (kind, _) = answer.map_err(rejection)?;
    let manager = request_manager(parts, state)?;
    let key = manager.key(&value.lock_name()).map_err(rejection)?;
    let guard = match layer_hold(parts, &key) {
        Some(held) => held.hold_as(kind).await,
        None => manager.into_lock(key, kind).acquire().await,
    }
    .map_err(rejection)?;
    Ok(Held { value, guard })
}
