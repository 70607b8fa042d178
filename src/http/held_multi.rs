//! The locks a request holds under a [`LockLayer`](crate::layer::LockLayer) of several keys, as seen
//! from handlers and inner layers; and the lookup extractors use to reenter what a layer
//! holds instead of waiting for it.

use std::fmt;
use std::sync::Arc;

use http::request::Parts;

use crate::engine::{LockManager, LossSignal, MultiLockGuard};
use crate::http::held::HeldLock;
use crate::key::LockKey;

/// Put in the request extensions by [`LockLayer`](crate::layer::LockLayer) of several keys while the
/// inner service runs: the keys the request holds (sorted, each once) and their loss
/// signal, which fires when any of them is lost.
///
/// ```
/// use axum::Extension;
/// use tower_lock::extract::HeldMultiLock;
///
/// async fn transfer(Extension(locks): Extension<HeldMultiLock>) -> String {
///     if locks.is_lost() {
///         return "lost a lock; stopping".into();
///     }
///     format!("holding {} locks", locks.keys().count())
/// }
/// # let _ = transfer;
/// ```
#[derive(Clone)]
pub struct HeldMultiLock {
    parts: Arc<[HeldLock]>,
    loss: LossSignal,
    manager: LockManager,
}

impl HeldMultiLock {
    /// The shareable view of `guard`'s parts (taken with `manager`), for the request
    /// extensions.
    pub(crate) fn of(guard: &MultiLockGuard, manager: LockManager) -> Self {
        HeldMultiLock {
            parts: guard.parts().iter().map(HeldLock::of).collect(),
            loss: guard.loss(),
            manager,
        }
    }

    /// The keys held, sorted, each once.
    pub fn keys(&self) -> impl Iterator<Item = &LockKey> {
        self.parts.iter().map(HeldLock::key)
    }

    /// Each key's lock, in the order of [`keys`](Self::keys).
    pub fn parts(&self) -> &[HeldLock] {
        &self.parts
    }

    /// The loss signal: completes if any of the locks is lost while the request runs.
    pub fn loss(&self) -> LossSignal {
        self.loss.clone()
    }

    /// Whether any of the locks is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.loss.is_lost()
    }

    /// The manager that holds the locks (to take other locks with it).
    pub fn manager(&self) -> LockManager {
        self.manager.clone()
    }
}

impl fmt::Debug for HeldMultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldMultiLock")
            .field("keys", &self.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The lock of `key` that a [`LockLayer`] holds for this request, if any: its one lock, or
/// a part of its several. An extractor naming that key enters it again instead of
/// waiting for the request's own lock.
///
/// [`LockLayer`]: crate::layer::LockLayer
pub(crate) fn layer_hold<'a>(parts: &'a Parts, key: &LockKey) -> Option<&'a HeldLock> {
    if let Some(held) = parts.extensions.get::<HeldLock>() {
        if held.key() == key {
            return Some(held);
        }
    }
    let multi = parts.extensions.get::<HeldMultiLock>()?;
    multi.parts.iter().find(|part| part.key() == key)
}

/// The manager of the locks a layer holds for this request, if any.
pub(crate) fn layer_manager(parts: &Parts) -> Option<LockManager> {
    if let Some(held) = parts.extensions.get::<HeldLock>() {
        return Some(held.manager());
    }
    Some(parts.extensions.get::<HeldMultiLock>()?.manager())
}
