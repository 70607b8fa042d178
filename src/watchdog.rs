//! Keeps a lease alive while the lock is held.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Backend;
use crate::key::{LockKey, OwnerId};
use crate::loss::LossSignal;

/// Shortest pause between renewal retries after an error.
const MIN_RETRY: Duration = Duration::from_millis(50);

/// Renews the lease every `lease / 3` until the lock is lost; fires `loss` then and
/// returns. The caller stops it (by dropping it) before releasing, so no renewal is ever
/// sent after a release. `acquired_at` is when the acquisition was sent: the lease cannot
/// end before `acquired_at + lease`.
pub(crate) async fn keep_alive(
    backend: Arc<dyn Backend>,
    key: LockKey,
    owner: OwnerId,
    lease: Duration,
    loss: LossSignal,
    acquired_at: Instant,
) {
    let period = lease / 3;
    let mut valid_until = acquired_at + lease;
    let mut next = acquired_at + period;
    let mut retry = MIN_RETRY;
    loop {
        tokio::time::sleep_until(next).await;
        let sent = Instant::now();
        let renewal = backend.renew(key.clone(), owner.clone(), lease);
        match tokio::time::timeout_at(valid_until, renewal).await {
            Ok(Ok(true)) => {
                valid_until = sent + lease;
                next = sent + period;
                retry = MIN_RETRY;
            }
            Ok(Ok(false)) => {
                tracing::warn!(key = %key, owner = %owner, "tower-lock: lock lost: the renewal found it gone (expired or deleted)");
                loss.fire();
                return;
            }
            Ok(Err(error)) if Instant::now() + retry < valid_until => {
                tracing::warn!(key = %key, %error, "tower-lock: lease renewal failed; retrying while the lease may still run");
                next = Instant::now() + retry;
                retry = (retry * 2).min(period.max(MIN_RETRY));
            }
            Ok(Err(error)) => {
                tracing::warn!(key = %key, owner = %owner, %error, "tower-lock: lock lost: renewals failed until the lease could have ended");
                loss.fire();
                return;
            }
            Err(_) => {
                tracing::warn!(key = %key, owner = %owner, "tower-lock: lock lost: no renewal succeeded before the lease could have ended");
                loss.fire();
                return;
            }
        }
    }
}
