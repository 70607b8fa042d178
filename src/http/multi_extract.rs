//! `MultiLocked<(A, B)>`: several lockable values of one request, held together as one
//! multi-lock (see [`LockManager::multi_lock`](crate::LockManager::multi_lock)).

use std::fmt;
use std::ops::Deref;

use axum::extract::FromRequestParts;
use http::request::Parts;

use crate::engine::MultiLockGuard;
use crate::http::acquire_failure::BusyAnswer;
use crate::http::held_multi::layer_hold;
use crate::http::locked::{request_manager, Lockable};
use crate::http::manager_state::LockManagerState;
use crate::http::rejection::LockRejection;

/// Extracts a tuple of [`Lockable`] values — `(A, B)` or `(A, B, C)` — and holds all their
/// locks while the handler runs, as one [multi-lock](crate::LockManager::multi_lock): taken in
/// one canonical order (two requests naming the same keys in opposite orders never
/// deadlock), all or nothing, a key named twice taken once. Same manager lookup and
/// statuses as [`Locked<K>`](crate::extract::Locked) (busy 409, bad value 400, backend down 503).
///
/// Under a [`LockLayer`](crate::layer::LockLayer) whose lock is one of the keys (or a
/// [`LockLayer`](crate::layer::LockLayer) of several keys holding some of them), those keys are not taken
/// again (the layer holds them for the request); the others are then taken after them, not
/// in the canonical order, so prefer one of the two for a route: for several keys from the
/// path, the [`LockLayer`](crate::layer::LockLayer) of several keys alone.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use axum::{routing::post, Extension, Router};
/// use tower_lock::extract::{KeySource, Lockable, MultiLocked};
/// use tower_lock::LockManager;
/// # use tower::ServiceExt;
///
/// struct From(u64);
/// struct To(u64);
/// impl Lockable for From {
///     fn source() -> KeySource { KeySource::path("from") }
///     fn parse(raw: &str) -> Result<Self, String> {
///         raw.parse().map(From).map_err(|_| format!("`{raw}` is not an account"))
///     }
///     fn lock_name(&self) -> String { format!("account:{}", self.0) }
/// }
/// impl Lockable for To {
///     fn source() -> KeySource { KeySource::path("to") }
///     fn parse(raw: &str) -> Result<Self, String> {
///         raw.parse().map(To).map_err(|_| format!("`{raw}` is not an account"))
///     }
///     fn lock_name(&self) -> String { format!("account:{}", self.0) }
/// }
///
/// async fn transfer(accounts: MultiLocked<(From, To)>) -> String {
///     let (from, to) = &*accounts;
///     // Both accounts are held: no other transfer touching either runs now.
///     format!("moved money from {} to {}", from.0, to.0)
/// }
///
/// let app = Router::new()
///     .route("/transfers/{from}/{to}", post(transfer))
///     .layer(Extension(LockManager::memory()));
/// # let response = app.oneshot(http::Request::post("/transfers/7/9").body(axum::body::Body::empty()).unwrap()).await.unwrap();
/// # assert_eq!(response.status(), 200);
/// # }
/// ```
pub struct MultiLocked<T> {
    values: T,
    guard: Option<MultiLockGuard>,
}

impl<T> MultiLocked<T> {
    /// The guard of the keys this extractor took (`None` when the layer held the only key).
    pub fn guard(&self) -> Option<&MultiLockGuard> {
        self.guard.as_ref()
    }

    /// The values, and the guard to release explicitly.
    pub fn into_parts(self) -> (T, Option<MultiLockGuard>) {
        (self.values, self.guard)
    }

    /// Whether any of the locks taken is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.guard.as_ref().is_some_and(MultiLockGuard::is_lost)
    }
}

impl<T> Deref for MultiLocked<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.values
    }
}

impl<T> fmt::Debug for MultiLocked<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLocked")
            .field("guard", &self.guard)
            .finish()
    }
}

/// Reads and parses `K` from the request; its lock name.
fn named<K: Lockable>(parts: &mut Parts) -> Result<(K, String), LockRejection> {
    let raw = K::source().read(parts)?;
    let value = K::parse(&raw).map_err(|reason| LockRejection::InvalidKey {
        what: K::source().describe(),
        reason,
    })?;
    let name = value.lock_name();
    Ok((value, name))
}

/// Takes the multi-lock of `names` for the request (less a key its layer holds).
async fn lock_all(
    parts: &Parts,
    state: &impl LockManagerState,
    names: Vec<String>,
) -> Result<Option<MultiLockGuard>, LockRejection> {
    let manager = request_manager(parts, state)?;
    let rejection = |e| LockRejection::from_error(e, "lock keys", BusyAnswer::default());
    let mut keys = Vec::with_capacity(names.len());
    for name in &names {
        let key = manager.key(name).map_err(rejection)?;
        if layer_hold(parts, &key).is_none() {
            keys.push(key);
        }
    }
    if keys.is_empty() {
        return Ok(None);
    }
    let guard = manager
        .multi_lock_keys(keys, crate::kind::LockKind::Plain)
        .acquire()
        .await
        .map_err(rejection)?;
    Ok(Some(guard))
}

macro_rules! multi_locked_tuple {
    ($($k:ident),+) => {
        impl<S, $($k),+> FromRequestParts<S> for MultiLocked<($($k,)+)>
        where
            S: LockManagerState + Send + Sync,
            $($k: Lockable,)+
        {
            type Rejection = LockRejection;

            #[allow(non_snake_case)]
            async fn from_request_parts(
                parts: &mut Parts,
                state: &S,
            ) -> Result<Self, Self::Rejection> {
                let mut names = Vec::new();
                $(
                    let ($k, name) = named::<$k>(parts)?;
                    names.push(name);
                )+
                let guard = lock_all(parts, state, names).await?;
                Ok(MultiLocked { values: ($($k,)+), guard })
            }
        }
    };
}

multi_locked_tuple!(A, B);
multi_locked_tuple!(A, B, C);
