//! What tower-lock tells operators: tracing spans and events under one stable target,
//! warnings that repeat at most every few seconds, and (with the `metrics` feature)
//! counters and histograms labelled by lock kind.
//!
//! Spans, all at DEBUG under the target `tower_lock`:
//! - `acquire` (`key`, `kind`, `wait_ms`; recorded at the end: `waited_ms`, `outcome` =
//!   `acquired`, `busy`, `timed_out`, `unavailable`, `invalid_name`, `invalid_permits`, `lost` or `cancelled`);
//! - `hold` (`key`, `kind`, `owner`), open while the lock is held, from the span current
//!   where it was acquired (the request's, under the layer);
//! - `release` (inside `hold`; recorded: `outcome` = `unlocked`, `handed_over`,
//!   `still_held`, `not_held` or `failed`, and `held_ms` for the last hold).
//!
//! Warnings (loss, failed renewals and releases, an unreachable backend) go to the same
//! target; those that a down backend repeats for every request or lock are rate-limited
//! ([`throttled!`]).

#[cfg(feature = "metrics")]
mod metrics;
mod throttle;

use std::time::Duration;

use tracing::field::Empty;
use tracing::Span;

pub(crate) use throttle::{throttled, Throttle};

use crate::error::{BackendError, LockError, Released};
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// The `target` of every span and event of tower-lock (filter with `tower_lock=debug`).
pub(crate) const TARGET: &str = "tower_lock";

/// The span of one acquisition.
#[inline]
pub(crate) fn acquire_span(key: &LockKey, kind: LockKind, wait: Duration) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "acquire",
        key = %key,
        kind = kind.name(),
        wait_ms = millis(wait),
        waited_ms = Empty,
        outcome = Empty,
    )
}

/// The span of a hold, open while the lock is held.
#[inline]
pub(crate) fn hold_span(key: &LockKey, kind: LockKind, owner: &OwnerId) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "hold",
        key = %key,
        kind = kind.name(),
        owner = %owner,
    )
}

/// The span of one release, inside its hold's.
#[inline]
pub(crate) fn release_span(hold: &Span) -> Span {
    tracing::debug_span!(
        target: TARGET,
        parent: hold,
        "release",
        outcome = Empty,
        held_ms = Empty,
    )
}

/// What an acquisition came to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireOutcome {
    Acquired,
    /// Refused after no wait.
    Busy,
    /// Refused after a wait.
    TimedOut,
    Unavailable,
    InvalidName,
    InvalidPermits,
    /// A reentry of a hold that was lost.
    Lost,
    /// A guard asked for a kind its hold cannot give (an upgrade).
    KindMismatch,
    /// The backend has no such lock.
    Unsupported,
    /// The lock has a record: nothing was taken (an acquisition that asked for records).
    Recorded,
    /// The lock is held for other work: nothing was taken (an acquisition that named its
    /// work).
    HeldForOtherWork,
}

impl AcquireOutcome {
    /// Its name in spans.
    fn name(self) -> &'static str {
        match self {
            AcquireOutcome::Acquired => "acquired",
            AcquireOutcome::Busy => "busy",
            AcquireOutcome::TimedOut => "timed_out",
            AcquireOutcome::Unavailable => "unavailable",
            AcquireOutcome::InvalidName => "invalid_name",
            AcquireOutcome::InvalidPermits => "invalid_permits",
            AcquireOutcome::Lost => "lost",
            AcquireOutcome::KindMismatch => "kind_mismatch",
            AcquireOutcome::Unsupported => "unsupported",
            AcquireOutcome::Recorded => "recorded",
            AcquireOutcome::HeldForOtherWork => "held_for_other_work",
        }
    }
}

/// What an acquisition came to, in its span and the metrics. `wait`: the wait it was
/// given (a refusal after no wait is `busy`, after a wait `timed_out`).
#[inline]
pub(crate) fn acquired(
    span: &Span,
    kind: LockKind,
    wait: Duration,
    waited: Duration,
    result: Result<(), &LockError>,
) {
    // Nothing to do for nobody: no span listened to, no metrics built in.
    if cfg!(not(feature = "metrics")) && span.is_disabled() {
        return;
    }
    let outcome = match result {
        Ok(()) => AcquireOutcome::Acquired,
        Err(LockError::TimedOut { .. }) if wait.is_zero() => AcquireOutcome::Busy,
        Err(LockError::TimedOut { .. }) => AcquireOutcome::TimedOut,
        Err(LockError::Unavailable(_)) => AcquireOutcome::Unavailable,
        Err(LockError::InvalidName { .. }) => AcquireOutcome::InvalidName,
        Err(LockError::InvalidPermits { .. }) => AcquireOutcome::InvalidPermits,
        // Not an acquisition's answer.
        Err(LockError::NotALock { .. }) => AcquireOutcome::Unavailable,
        Err(LockError::Lost { .. }) => AcquireOutcome::Lost,
        Err(LockError::KindMismatch { .. }) => AcquireOutcome::KindMismatch,
        Err(LockError::Unsupported { .. }) => AcquireOutcome::Unsupported,
        Err(LockError::Recorded { .. }) => AcquireOutcome::Recorded,
        Err(LockError::HeldForOtherWork { .. }) => AcquireOutcome::HeldForOtherWork,
    };
    span.record("waited_ms", millis(waited));
    span.record("outcome", outcome.name());
    #[cfg(feature = "metrics")]
    metrics::acquired(kind, outcome, waited);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// An acquisition dropped before it was answered.
pub(crate) fn cancelled(span: &Span, waited: Duration) {
    if span.is_disabled() {
        return;
    }
    span.record("waited_ms", millis(waited));
    span.record("outcome", "cancelled");
}

/// What a release came to; `held` says how long the lock was held, asked only for the
/// owner's last hold (the lock's end here) and only when someone listens.
#[inline]
pub(crate) fn released(
    span: &Span,
    kind: LockKind,
    result: &Result<Released, BackendError>,
    last: bool,
    held: impl FnOnce() -> Duration,
) {
    if cfg!(not(feature = "metrics")) && span.is_disabled() {
        return;
    }
    let outcome = match result {
        Ok(Released::Unlocked) => "unlocked",
        Ok(Released::HandedOver) => "handed_over",
        Ok(Released::StillHeld) => "still_held",
        Ok(Released::NotHeld) => "not_held",
        Err(_) => "failed",
    };
    span.record("outcome", outcome);
    let held = last.then(held);
    if let Some(held) = held {
        span.record("held_ms", millis(held));
    }
    #[cfg(feature = "metrics")]
    metrics::released(kind, result.is_err(), held);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// A hold found lost (counted once per hold).
pub(crate) fn lost(kind: LockKind) {
    #[cfg(feature = "metrics")]
    metrics::lost(kind);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// A renewal that failed with a backend error.
pub(crate) fn renewal_failed(kind: LockKind) {
    #[cfg(feature = "metrics")]
    metrics::backend_error(kind);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// Milliseconds, fractional, for span fields.
fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The span of one request through the idempotency layer of `namespace`: its `outcome`
/// is recorded by [`idempotency`].
#[cfg(feature = "idempotency")]
pub(crate) fn idempotency_span(namespace: &str) -> Span {
    tracing::debug_span!(
        target: TARGET,
        "idempotency",
        namespace,
        outcome = Empty,
        waited = Empty,
    )
}

/// What the idempotency layer did with a request (`executed`, `replayed`, `not_stored`,
/// `unprotected`, or the code of its own answer: `in_progress`, `key_reused`,
/// `missing_key`…; `waited` when it waited for the first request with its key): in the
/// request's span, and the counter `tower_lock_idempotency_requests_total{outcome}`.
#[cfg(feature = "idempotency")]
pub(crate) fn idempotency(outcome: &'static str) {
    let span = Span::current();
    if outcome == "waited" {
        span.record("waited", true);
    } else {
        span.record("outcome", outcome);
    }
    #[cfg(feature = "metrics")]
    metrics::idempotency(outcome);
}

/// A request's span in a coalescing layer (its outcome recorded in it).
#[cfg(feature = "coalesce")]
pub(crate) fn coalesce_span(namespace: &str) -> Span {
    tracing::debug_span!(target: TARGET, "coalesce", namespace, outcome = Empty)
}

/// What the coalescing layer did with a request (`led`, `led_not_shared`, `joined`,
/// `not_shared`, `timed_out`, `private`, `no_key`, `unprotected`, or the code of its own
/// answer): in the request's span, and the counter
/// `tower_lock_coalesce_requests_total{outcome}`.
#[cfg(feature = "coalesce")]
pub(crate) fn coalesce(outcome: &'static str) {
    Span::current().record("outcome", outcome);
    #[cfg(feature = "metrics")]
    metrics::coalesce(outcome);
}
