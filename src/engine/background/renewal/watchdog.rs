//! Keeps a lease alive while the lock is held.

use std::time::Duration;

use tokio::time::Instant;

use crate::engine::background::renewal::Renewable;
use crate::telemetry::{self, throttled, TARGET};

/// Shortest pause between renewal retries after an error.
const MIN_RETRY: Duration = Duration::from_millis(50);

/// The renewal schedule of one hold: its lease, and how long to wait before retrying. When
/// the lease may end is the hold's own (its `Loss`).
#[derive(Debug, Clone)]
pub(crate) struct Keeper {
    lease: Duration,
    period: Duration,
    retry: Duration,
}

impl Keeper {
    pub(crate) fn new(lease: Duration) -> Self {
        Keeper {
            lease,
            period: lease / 3,
            retry: MIN_RETRY,
        }
    }

    /// When the first renewal of `hold` is due (its lease may have been set again since
    /// it was taken).
    #[cfg(any(feature = "axum", test))]
    pub(crate) fn first_due(&self, hold: &dyn Renewable) -> Instant {
        self.due_after(hold.loss().valid_until() - self.lease)
    }

    /// When the first renewal of a lease that started at `lease_from` is due.
    pub(crate) fn due_after(&self, lease_from: Instant) -> Instant {
        lease_from + self.period
    }
}

/// Renews the lease once (every lease/3 while held). Returns when to renew next; `None`
/// when the hold was released, or when the lock is lost (the loss signal fired and a
/// warning was traced). A failed renewal is retried until the loss deadline, a margin
/// before the lease could end (see [`LossMargin`](crate::lock::LossMargin)): a holder is told
/// while nobody else can have the lock yet.
pub(in crate::engine) async fn renew_once(
    hold: &dyn Renewable,
    keeper: &mut Keeper,
) -> Option<Instant> {
    let _renewing = hold.gate().begin()?;
    let (key, owner) = (hold.key(), hold.owner());
    let sent = Instant::now();
    let renewal = hold.renew();
    let lost = |why: &str| {
        tracing::warn!(target: TARGET, key = %key, owner = %owner, "tower-lock: lock lost: {why}");
        hold.mark_lost();
        None
    };
    let deadline = hold.loss().deadline();
    match tokio::time::timeout_at(deadline, renewal).await {
        Ok(Ok(true)) => {
            hold.loss().extend(sent + keeper.lease);
            keeper.retry = MIN_RETRY;
            Some(sent + keeper.period)
        }
        Ok(Ok(false)) => lost("the renewal found it gone (expired or deleted)"),
        Ok(Err(error)) if deadline.saturating_duration_since(Instant::now()) >= MIN_RETRY => {
            telemetry::renewal_failed(hold.kind());
            throttled!(warn, key = %key, %error, "tower-lock: lease renewal failed; retrying while the lease may still run");
            // Back off, but never past half the time left: the last tries still come before
            // the deadline (a doubled pause would overshoot it and give the lock up while a
            // renewal could still land).
            let left = deadline.saturating_duration_since(Instant::now());
            let next = Instant::now() + keeper.retry.min(left / 2);
            keeper.retry = (keeper.retry * 2).min(keeper.period.max(MIN_RETRY));
            Some(next)
        }
        Ok(Err(_)) => lost("renewals failed until shortly before the lease could end"),
        Err(_) => lost("no renewal succeeded by shortly before the lease could end"),
    }
}

/// A watchdog that the caller drives itself (polled inside the HTTP layer's future).
#[cfg(feature = "axum")]
pub(crate) type InlineWatchdog = crate::backend::BoxFuture<()>;

/// The watchdog as a future: completes when the lock is lost or the hold released.
#[cfg(feature = "axum")]
pub(in crate::engine) async fn keep_alive(
    hold: std::sync::Arc<crate::engine::hold::Hold>,
    mut keeper: Keeper,
) {
    let mut next = keeper.first_due(&*hold);
    loop {
        tokio::time::sleep_until(next).await;
        match renew_once(&*hold, &mut keeper).await {
            Some(due) => next = due,
            None => return,
        }
    }
}
