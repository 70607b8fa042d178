//! Counters and histograms through the `metrics` facade, labelled by lock kind (never by
//! key: keys are unbounded). Names, with the label `kind` (`plain`, `read`, `write`, `fair`, `fenced`,
//! `semaphore`):
//!
//! | name | type | what |
//! |---|---|---|
//! | `tower_lock_acquired_total` | counter | acquisitions granted (reentries included) |
//! | `tower_lock_busy_total` | counter | single tries refused: the lock was held |
//! | `tower_lock_timed_out_total` | counter | waits that ended with the lock still held |
//! | `tower_lock_lost_total` | counter | holds found lost while held |
//! | `tower_lock_backend_errors_total` | counter | acquisitions, releases and renewals that failed with a backend error |
//! | `tower_lock_wait_seconds` | histogram | time from asking to being granted |
//! | `tower_lock_hold_seconds` | histogram | time from being granted to the last release |
//! | `tower_lock_recorded_total` | counter | acquisitions refused because a record was stored |
//!
//! And, labelled by `outcome` instead of `kind`:
//!
//! | name | type | what |
//! |---|---|---|
//! | `tower_lock_coalesce_requests_total` | counter | requests through a coalescing layer: `led` (its handler ran and its response was shared), `led_not_shared`, `joined` (answered with another's response), `not_shared` (ran itself: the response was not for sharing), `timed_out`, `private` (credentials without a scope), `no_key`, `unprotected` (backend unavailable), or the code of the layer's own answer |
//! | `tower_lock_idempotency_requests_total` | counter | requests through an idempotency layer: `executed` (a handler ran; also `not_stored` when its response was not kept), `replayed`, `waited` (also counted under what followed), `unprotected`, or the code of the layer's own answer (`in_progress`, `key_reused`, `missing_key`, …) |

use std::time::Duration;

use metrics::{counter, histogram};

use super::AcquireOutcome;
use crate::kind::LockKind;

pub(super) fn acquired(kind: LockKind, outcome: AcquireOutcome, waited: Duration) {
    let kind = kind.name();
    match outcome {
        AcquireOutcome::Acquired => {
            counter!("tower_lock_acquired_total", "kind" => kind).increment(1);
            histogram!("tower_lock_wait_seconds", "kind" => kind).record(waited.as_secs_f64());
        }
        AcquireOutcome::Busy => counter!("tower_lock_busy_total", "kind" => kind).increment(1),
        AcquireOutcome::TimedOut => {
            counter!("tower_lock_timed_out_total", "kind" => kind).increment(1)
        }
        AcquireOutcome::Unavailable => backend_error_named(kind),
        AcquireOutcome::Recorded => {
            counter!("tower_lock_recorded_total", "kind" => kind).increment(1)
        }
        // An invalid name, a lost hold asked to reenter, an upgrade, another request's
        // key: the caller's to handle.
        AcquireOutcome::InvalidName
        | AcquireOutcome::HeldForOtherWork
        | AcquireOutcome::InvalidPermits
        | AcquireOutcome::Lost
        | AcquireOutcome::KindMismatch
        | AcquireOutcome::Unsupported => {}
    }
}

pub(super) fn released(kind: LockKind, failed: bool, held: Option<Duration>) {
    if failed {
        backend_error_named(kind.name());
    }
    if let Some(held) = held {
        histogram!("tower_lock_hold_seconds", "kind" => kind.name()).record(held.as_secs_f64());
    }
}

pub(super) fn lost(kind: LockKind) {
    counter!("tower_lock_lost_total", "kind" => kind.name()).increment(1);
}

pub(super) fn backend_error(kind: LockKind) {
    backend_error_named(kind.name());
}

fn backend_error_named(kind: &'static str) {
    counter!("tower_lock_backend_errors_total", "kind" => kind).increment(1);
}

#[cfg(feature = "idempotency")]
pub(super) fn idempotency(outcome: &'static str) {
    counter!("tower_lock_idempotency_requests_total", "outcome" => outcome).increment(1);
}

#[cfg(feature = "coalesce")]
pub(super) fn coalesce(outcome: &'static str) {
    counter!("tower_lock_coalesce_requests_total", "outcome" => outcome).increment(1);
}
