//! Waiting on a backend operation without waiting on a lost connection.
//!
//! While the Redis client knows its connection is down, operations fail at once. But one
//! sent in the instant between the connection dropping and the client noticing can wait
//! in fred's queue behind its reconnect, until Redis is back or the command time limit
//! runs out (measured: a request per client stuck for the whole 30 s limit when Redis was
//! killed under load). So a pending operation looks at the backend every
//! [`STUCK_CHECK`] and is given up once the backend says it cannot be reached. Giving up
//! drops the operation's future, which is safe: backend operations are [`Settle`]d, so
//! one that still lands later is finished in the background and undone there.
//!
//! [`Settle`]: crate::settle::Settle

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::Backend;

/// How often a pending operation looks whether the backend can still be reached.
pub(crate) const STUCK_CHECK: Duration = Duration::from_millis(25);

/// Why a pending operation was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GaveUp {
    /// The caller's deadline passed.
    Deadline,
    /// The backend says it cannot be reached.
    Unreachable,
}

/// Awaits `operation` until `deadline` (`None`: none of its own), giving up early once the
/// backend says it cannot be reached. `operation` must be safe to drop at any point.
pub(crate) async fn answer_within<F: Future>(
    operation: F,
    deadline: Option<Instant>,
    backend: &dyn Backend,
) -> Result<F::Output, GaveUp> {
    tokio::pin!(operation);
    loop {
        let check = Instant::now() + STUCK_CHECK;
        let until = deadline.map_or(check, |deadline| deadline.min(check));
        match tokio::time::timeout_at(until, &mut operation).await {
            Ok(output) => return Ok(output),
            Err(_) if deadline.is_some_and(|deadline| Instant::now() >= deadline) => {
                return Err(GaveUp::Deadline)
            }
            Err(_) if !backend.is_available() => return Err(GaveUp::Unreachable),
            Err(_) => {}
        }
    }
}
