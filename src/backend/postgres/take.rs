//! The statements that take a lock on a session: a try, a wait (a reentry's, granted at
//! once), or a read joining the session's readers; counted inside the statement's job, so
//! that what the server did is counted even if the caller went away.

use std::sync::Arc;

use sqlx::postgres::PgListener;
use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use super::session::{ConnFuture, Holder, Session, SessionError};
use super::sql;
use super::Inner;
use crate::backend::{AcquireArgs, Attempt};
use crate::error::BackendError;

/// How long a reentry may wait in the server's queue (it is granted at once: the server
/// puts a session's request before waiters its own holds block).
pub(super) const REENTRY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How a statement takes the lock.
#[derive(Debug, Clone, Copy)]
pub(super) enum How {
    /// Now or not at all.
    Try,
    /// Waiting up to this long in the server's queue.
    Wait(std::time::Duration),
    /// Joining this session's readers, unless someone waits.
    JoinReaders,
}

/// What one statement that may take the lock got: the lock (with a fenced lock's token),
/// or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Took {
    Lock(Option<u64>),
    Nothing,
}

/// The answer of what a statement took.
pub(super) fn attempt(took: Took) -> Attempt {
    match took {
        Took::Lock(Some(token)) => Attempt::Fenced(token),
        Took::Lock(None) => Attempt::Acquired,
        Took::Nothing => Attempt::Busy(None),
    }
}

/// One statement on `session` (kept for the holder by the caller) that takes the lock now
/// or not at all (`pg_try_advisory_lock`), or waits up to `wait` (a reentry); for a fenced
/// lock, the statement also moves its token on. What it took is counted inside the
/// statement's job.
#[allow(clippy::too_many_arguments)]
pub(super) async fn take_on(
    inner: &Inner,
    session: &Arc<Session>,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
    args: &AcquireArgs,
    fenced: bool,
    how: How,
) -> Result<Took, BackendError> {
    let (tables, lock_key, lease) = (inner.tables.clone(), args.key.clone(), args.lease);
    let on = session.clone();
    let wait_ms = match how {
        How::Wait(wait) => Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
        How::Try | How::JoinReaders => None,
    };
    let joins = matches!(how, How::JoinReaders);
    let sent = Instant::now();
    taking(
        session,
        key,
        holder,
        mode,
        sent + lease,
        "take a lock",
        move |conn| {
            Box::pin(async move {
                let result = match (fenced, wait_ms) {
                    (true, _) => {
                        let token = match wait_ms {
                            None => {
                                sql::bind_key_scalar(
                                    sqlx::query_scalar::<_, i64>(tables.fenced(key, false)),
                                    key,
                                )
                                .bind(lock_key.as_str())
                                .fetch_optional(&mut *conn)
                                .await
                            }
                            Some(ms) => {
                                sql::bind_key_scalar(
                                    sqlx::query_scalar::<_, i64>(tables.fenced(key, true))
                                        .bind(sql::timeout_setting(ms)),
                                    key,
                                )
                                .bind(lock_key.as_str())
                                .fetch_optional(&mut *conn)
                                .await
                            }
                        };
                        token.map(|token| match token {
                            Some(token) => Took::Lock(Some(token.max(0) as u64)),
                            None => Took::Nothing,
                        })
                    }
                    (false, None) if joins => sql::join_readers(key)
                        .fetch_optional(&mut *conn)
                        .await
                        .map(|took| {
                            if took == Some(true) {
                                Took::Lock(None)
                            } else {
                                Took::Nothing
                            }
                        }),
                    (false, None) => {
                        sql::try_lock(key, mode)
                            .fetch_one(&mut *conn)
                            .await
                            .map(|took| {
                                if took {
                                    Took::Lock(None)
                                } else {
                                    Took::Nothing
                                }
                            })
                    }
                    (false, Some(ms)) => sql::lock(key, mode, ms)
                        .execute(&mut *conn)
                        .await
                        .map(|_| Took::Lock(None)),
                };
                let result = match result {
                    Err(error)
                        if wait_ms.is_some()
                            && sql::sql_state(&error).as_deref()
                                == Some(sql::LOCK_NOT_AVAILABLE) =>
                    {
                        Ok(Took::Nothing)
                    }
                    Err(error) => {
                        if fenced
                            && wait_ms.is_none()
                            && on.is_alive()
                            && !sql::ends_session(&error)
                        {
                            // The token's insert failed after the lock may have been taken.
                            undo_if_held(conn, key, mode).await;
                        }
                        Err(error)
                    }
                    ok => ok,
                };
                result
            })
        },
    )
    .await
}

/// Unlocks `key` if this session holds it (a statement that failed after taking it).
/// Runs `statement`, which may take `key` for `holder` in `mode` (kept for it by the
/// caller), on `session`: inside its job, what it took is counted (its lease ending at
/// `held_until`) and the key is no longer kept for the acquisition; if the session ended
/// first, the key is no longer kept either. `what` names the statement in errors.
pub(super) async fn taking<F>(
    session: &Arc<Session>,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
    held_until: Instant,
    what: &str,
    statement: F,
) -> Result<Took, BackendError>
where
    F: for<'c> FnOnce(&'c mut PgListener) -> ConnFuture<'c, Result<Took, sqlx::Error>>
        + Send
        + 'static,
{
    let (on, who) = (session.clone(), holder.clone());
    let ran = session
        .run(move |conn| {
            Box::pin(async move {
                let result = statement(conn).await;
                let took = matches!(result, Ok(Took::Lock(_)));
                on.settle(key, &who, mode, took.then_some(held_until));
                result
            })
        })
        .await;
    ran.map_err(|error| {
        // The statement never ran: the key is no longer kept for the holder.
        if matches!(error, SessionError::Ended) {
            session.settle(key, holder, mode, None);
        }
        error.into_backend_error(what)
    })
}

pub(super) async fn undo_if_held(conn: &mut PgListener, key: AdvisoryKey, mode: Mode) {
    if let Ok(true) = sql::holds(key).fetch_one(&mut *conn).await {
        let _ = sql::unlock(key, mode).fetch_one(&mut *conn).await;
    }
}
