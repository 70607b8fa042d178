//! Warnings that a down backend would repeat for every request: logged at most once per
//! [`THROTTLE_PERIOD`] at each call site, with the number left out since the last.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// At most one warning per call site in this period.
pub(crate) const THROTTLE_PERIOD: Duration = Duration::from_secs(10);

/// Not logged yet.
const NEVER: u64 = u64::MAX;

/// The rate limit of one call site.
pub(crate) struct Throttle {
    /// When the last warning was logged, in ms since the process's first throttled one.
    last: AtomicU64,
    /// Warnings left out since then.
    left_out: AtomicU64,
}

impl Throttle {
    pub(crate) const fn new() -> Self {
        Throttle {
            last: AtomicU64::new(NEVER),
            left_out: AtomicU64::new(0),
        }
    }

    /// `Some(left out since the last one)` when a warning may be logged now.
    pub(crate) fn allow(&self) -> Option<u64> {
        static EPOCH: OnceLock<Instant> = OnceLock::new();
        self.allow_at(EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64)
    }

    /// [`allow`](Self::allow) at `now` ms.
    fn allow_at(&self, now: u64) -> Option<u64> {
        let last = self.last.load(Ordering::Relaxed);
        let due = last == NEVER || now.saturating_sub(last) >= THROTTLE_PERIOD.as_millis() as u64;
        // One caller wins the period; the others count as left out.
        if due
            && self
                .last
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.left_out.swap(0, Ordering::Relaxed));
        }
        self.left_out.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// `throttled!(warn, …)`: `tracing::warn!(…)` (or `error!`, …) under the crate's target,
/// at most once per [`THROTTLE_PERIOD`] at this call site; the event carries `left_out`,
/// the number not logged since the last.
macro_rules! throttled {
    ($level:ident, $($arg:tt)+) => {{
        static THROTTLE: $crate::telemetry::Throttle = $crate::telemetry::Throttle::new();
        if let Some(left_out) = THROTTLE.allow() {
            tracing::$level!(target: $crate::telemetry::TARGET, left_out, $($arg)+);
        }
    }};
}
pub(crate) use throttled;

#[cfg(test)]
mod tests {
    use super::{Throttle, THROTTLE_PERIOD};

    #[test]
    fn one_warning_per_period_then_the_count_left_out() {
        let period = THROTTLE_PERIOD.as_millis() as u64;
        let throttle = Throttle::new();
        assert_eq!(throttle.allow_at(0), Some(0), "the first is logged");
        for at in [1, period / 2, period - 1] {
            assert_eq!(throttle.allow_at(at), None);
        }
        assert_eq!(
            throttle.allow_at(period),
            Some(3),
            "a period later, with the count"
        );
        assert_eq!(throttle.allow_at(period + 1), None);
        assert_eq!(throttle.allow_at(5 * period), Some(1));
    }
}
