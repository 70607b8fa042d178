//! A manager's settings and their defaults.

use std::time::Duration;

use crate::key::DEFAULT_MAX_NAME_LEN;
use crate::lease::LossMargin;

/// Default lease: renewed every lease/3 by a watchdog while held (Redisson's
/// `lockWatchdogTimeout`).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The longest lease (about 100 years): longer ones are lowered to it, so that a deadline
/// computed from a lease never overflows the clock (`Duration::MAX` used to panic).
pub const MAX_LEASE: Duration = Duration::from_secs(100 * 365 * 86_400);

/// Default number of hand-overs in a row to waiters of the same process (see
/// [`LockManagerBuilder::hand_over_limit`](crate::manager::LockManagerBuilder::hand_over_limit)).
pub const DEFAULT_HAND_OVER_LIMIT: u32 = 8;

/// Default time an acquisition waits for a busy lock.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);

/// Default [queue timeout](crate::manager::LockManagerBuilder::fair_queue_timeout) of fair locks: Redisson's
/// default `fairLockWaitTimeout`, 5 minutes.
pub const DEFAULT_FAIR_QUEUE_TIMEOUT: Duration = Duration::from_secs(300);

/// A manager's settings (fixed once it is built).
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) key_prefix: String,
    pub(crate) lease: Duration,
    pub(crate) wait: Duration,
    pub(crate) max_name_len: usize,
    pub(crate) hand_over_limit: u32,
    pub(crate) loss_margin: LossMargin,
    pub(crate) fair_queue_timeout: Duration,
    /// Every live hold is kept in the registry (`LockManager::local_holds`).
    pub(crate) track_holds: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            key_prefix: String::new(),
            lease: DEFAULT_LEASE,
            wait: DEFAULT_WAIT,
            max_name_len: DEFAULT_MAX_NAME_LEN,
            hand_over_limit: DEFAULT_HAND_OVER_LIMIT,
            loss_margin: LossMargin::DEFAULT,
            fair_queue_timeout: DEFAULT_FAIR_QUEUE_TIMEOUT,
            track_holds: true,
        }
    }
}

/// A fixed lease within what a backend accepts: 1 ms to [`MAX_LEASE`].
pub(crate) fn bounded_lease(lease: Duration) -> Duration {
    lease.clamp(Duration::from_millis(1), MAX_LEASE)
}
