//! A held multi-lock's guard: every part, released together; lost when any part is.

use std::fmt;

use crate::engine::hold::guard::LockGuard;
use crate::engine::hold::loss::LossSignal;
use crate::error::{BackendError, Released};
use crate::join::join_all;
use crate::key::LockKey;

/// Several locks held together (see [`LockManager::multi_lock`](crate::LockManager::multi_lock)).
/// Each part is a plain lock with its own watchdog; release them with
/// [`release`](Self::release); dropping the guard releases them in the background.
#[must_use = "the locks are released as soon as the guard is dropped"]
pub struct MultiLockGuard {
    /// In the canonical order (sorted keys).
    parts: Vec<LockGuard>,
    loss: LossSignal,
}

impl MultiLockGuard {
    pub(in crate::engine) fn new(parts: Vec<LockGuard>) -> Self {
        let loss = LossSignal::any(parts.iter().map(LockGuard::loss).collect());
        MultiLockGuard { parts, loss }
    }

    /// The keys held, sorted, each once.
    pub fn keys(&self) -> impl Iterator<Item = &LockKey> {
        self.parts.iter().map(LockGuard::key)
    }

    /// The parts' guards, in the order of [`keys`](Self::keys).
    pub fn parts(&self) -> &[LockGuard] {
        &self.parts
    }

    /// The guards, to release one by one.
    pub fn into_parts(self) -> Vec<LockGuard> {
        self.parts
    }

    /// The loss signal: fires when any part is lost (each part's watchdog renews it).
    pub fn loss(&self) -> LossSignal {
        self.loss.clone()
    }

    /// Whether any part is known or presumed lost, without waiting.
    pub fn is_lost(&self) -> bool {
        self.loss.is_lost()
    }

    /// Completes when any part is lost.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn lost(&self) {
        self.loss.lost().await
    }

    /// Releases every part, together. The outcome is the worst of the parts':
    /// [`Released::NotHeld`] if any part had ended before (what ran under the multi-lock
    /// may have overlapped another holder of that part), else [`Released::StillHeld`] if
    /// any part is still held, else [`Released::Unlocked`].
    ///
    /// # Errors
    /// The first part's error, once every part was asked; a part whose release failed
    /// ends with its lease.
    ///
    /// # Cancel safety
    /// Cancel safe: releases already sent finish in the background (as
    /// [`LockGuard::release`]).
    pub async fn release(self) -> Result<Released, BackendError> {
        let outcomes = join_all(self.parts.into_iter().map(LockGuard::release)).await;
        let mut worst = Released::Unlocked;
        for outcome in outcomes {
            match outcome? {
                Released::NotHeld => worst = Released::NotHeld,
                Released::StillHeld if worst != Released::NotHeld => worst = Released::StillHeld,
                _ => {}
            }
        }
        Ok(worst)
    }
}

impl fmt::Debug for MultiLockGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MultiLockGuard")
            .field("keys", &self.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// What the HTTP layers drive themselves (see the `LockGuard` methods of the same names).
#[cfg(feature = "axum")]
impl MultiLockGuard {
    /// Records the request each part was taken for.
    pub(crate) fn label(&self, label: crate::engine::RequestLabel) {
        for part in self.parts() {
            part.label(label.clone());
        }
    }

    /// Releases every part together, each as [`LockGuard::release_promptly`]: the parts
    /// whose backend cannot be reached go on releasing in the background. Each part's key
    /// and outcome.
    pub(crate) async fn release_promptly(
        self,
    ) -> Vec<(LockKey, Option<Result<Released, BackendError>>)> {
        crate::join::join_all(self.into_parts().into_iter().map(|part| async move {
            let key = part.key().clone();
            (key, part.release_promptly().await)
        }))
        .await
    }
}
