//! How long before a lease could end a holder stops counting on it: the one margin the
//! loss signal, the watchdog and RedLock's validity time all use.

use std::time::Duration;

/// How long before a lease could end its holder is told that the lock may be lost: the
/// loss signal fires (and [`is_lost`](crate::lock::LockGuard::is_lost) turns `true`) at
/// `lease end − margin`, with `margin = lease × per_lease + fixed`, at most a third of the
/// lease. The default, 1 % of the lease plus 2 ms, is Redlock's clock-drift allowance.
///
/// The lease end a holder knows is the instant its last acquisition or renewal was *sent*
/// plus the lease; Redis counts from when it *ran* the command, a little later. Yet
/// clocks drift, and a holder that acts on the signal (stops writing, aborts its request)
/// needs time to stop: the margin is that time. Set it with
/// [`LockManagerBuilder::loss_margin`](crate::manager::LockManagerBuilder::loss_margin).
///
/// ```
/// use std::time::Duration;
/// use tower_lock::lock::LossMargin;
///
/// let margin = LossMargin::default().for_lease(Duration::from_secs(30));
/// assert_eq!(margin, Duration::from_millis(302));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossMargin {
    /// The share of the lease (0.01: 1 %). Values outside `0.0..=1.0` are clamped.
    pub per_lease: f64,
    /// Added to the share.
    pub fixed: Duration,
}

impl LossMargin {
    /// 1 % of the lease plus 2 ms.
    pub const DEFAULT: LossMargin = LossMargin {
        per_lease: 0.01,
        fixed: Duration::from_millis(2),
    };

    /// The margin for `lease`: `lease × per_lease + fixed`, at most `lease / 3` (so that
    /// the watchdog, which renews every third of the lease, has time to renew first).
    pub fn for_lease(&self, lease: Duration) -> Duration {
        let share = if self.per_lease.is_finite() {
            self.per_lease.clamp(0.0, 1.0)
        } else {
            0.0
        };
        lease
            .mul_f64(share)
            .saturating_add(self.fixed)
            .min(lease / 3)
    }
}

impl Default for LossMargin {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_follow_the_lease_within_bounds() {
        let default = LossMargin::default();
        assert_eq!(
            default.for_lease(Duration::from_secs(30)),
            Duration::from_millis(302)
        );
        // Never more than a third of the lease.
        assert_eq!(
            default.for_lease(Duration::from_millis(3)),
            Duration::from_millis(1)
        );
        let odd = LossMargin {
            per_lease: f64::NAN,
            fixed: Duration::from_millis(5),
        };
        assert_eq!(
            odd.for_lease(Duration::from_secs(1)),
            Duration::from_millis(5)
        );
        let whole = LossMargin {
            per_lease: 7.0,
            fixed: Duration::MAX,
        };
        assert_eq!(
            whole.for_lease(crate::engine::MAX_LEASE),
            crate::engine::MAX_LEASE / 3,
            "clamped, no overflow"
        );
    }
}
