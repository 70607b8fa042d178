//! Releases, renewals and waiters that leave: each a statement (or none) on the session
//! that holds the key, run in the session's order, counted inside the statement's job.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use super::session::{Holder, Session, SessionError};
use super::sessions::Found;
use super::sql;
use super::Inner;
use crate::backend::{LeaveArgs, ReleaseArgs, ReleaseReply, RenewArgs};
use crate::error::{BackendError, Released};

/// One record stored in this many sweeps the expired ones (a hundred at most).
const SWEEP_EVERY: u64 = 64;

pub(super) async fn release(
    inner: Arc<Inner>,
    args: ReleaseArgs,
) -> Result<ReleaseReply, BackendError> {
    let mode = Mode::of(args.kind)?;
    let (key, holder) = Holder::of(&args.key, &args.owner);
    let Found::Held(session) = inner.sessions.find(key, &holder) else {
        return Ok(ReleaseReply::new(Released::NotHeld));
    };
    if args.record.is_some() {
        inner.tables.ensure(inner.sessions.control()).await?;
    }
    let (tables, on, token) = (inner.tables.clone(), session.clone(), session.token);
    let (expected, lease, record) = (args.expected, args.lease, args.record.clone());
    let lock_key = args.key.clone();
    let released = session
        .run(move |conn| {
            Box::pin(async move {
                // The holder's counts as the server has them, in the session's order.
                let (count, total, work_row) = {
                    let state = on.state();
                    match state.hold(key, &holder) {
                        Some(hold) => (hold.count(mode), hold.total(), hold.work_row),
                        None => (0, 0, false),
                    }
                };
                if count == 0 {
                    return Ok(Released::NotHeld);
                }
                if count + 1 == expected {
                    // Sent again after it took effect.
                    return Ok(Released::StillHeld);
                }
                // The last hold of this kind (a writer that also reads keeps its read), and
                // whether any hold remains.
                let last = count == 1;
                let gone = total == 1;
                if let (true, Some(record)) = (gone, &record) {
                    // Stored while the lock is held (the session is alive), before it is
                    // freed: the next holder sees it.
                    let retention = i64::try_from(record.retention.as_millis()).unwrap_or(i64::MAX);
                    sqlx::query(&tables.store_record)
                        .bind(lock_key.as_str())
                        .bind(record.value.as_ref())
                        .bind(retention)
                        .execute(&mut *conn)
                        .await?;
                }
                let unlocked = sql::unlock(key, mode).fetch_one(&mut *conn).await?;
                {
                    let mut state = on.state();
                    if let Some(hold) = state.hold_mut(key, &holder) {
                        if unlocked {
                            *hold.count_mut(mode) -= 1;
                            hold.deadline = Instant::now() + lease;
                        } else {
                            *hold.count_mut(mode) = 0;
                        }
                    }
                    state.tidy(key);
                }
                on.freed();
                if gone && unlocked {
                    if work_row && record.is_none() {
                        // Best effort: a row left behind is reused at the name's next use.
                        let _ = sqlx::query(&tables.clear_work)
                            .bind(lock_key.as_str())
                            .bind(token)
                            .execute(&mut *conn)
                            .await;
                    }
                    if record.is_some()
                        && tables
                            .records_stored
                            .fetch_add(1, Ordering::Relaxed)
                            .is_multiple_of(SWEEP_EVERY)
                    {
                        let _ = sqlx::query(&tables.sweep).execute(&mut *conn).await;
                    }
                }
                Ok(match (unlocked, last) {
                    (false, _) => Released::NotHeld,
                    (true, true) => Released::Unlocked,
                    (true, false) => Released::StillHeld,
                })
            })
        })
        .await;
    match released {
        Ok(released) => Ok(ReleaseReply::new(released)),
        // The session ended: its locks went with it.
        Err(SessionError::Ended) => Ok(ReleaseReply::new(Released::NotHeld)),
        Err(error) if !session.is_alive() => {
            let _ = error;
            Ok(ReleaseReply::new(Released::NotHeld))
        }
        Err(error) => Err(error.into_backend_error("release a lock")),
    }
}

/// Gives back one hold just taken by `holder` (an acquisition that found a record).
pub(super) async fn give_back(
    inner: &Inner,
    session: &Arc<Session>,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
) -> Result<(), BackendError> {
    let _ = inner;
    let (on, holder) = (session.clone(), holder.clone());
    let given = session
        .run(move |conn| {
            Box::pin(async move {
                let unlocked = sql::unlock(key, mode).fetch_one(&mut *conn).await?;
                {
                    let mut state = on.state();
                    if let Some(hold) = state.hold_mut(key, &holder) {
                        let count = hold.count_mut(mode);
                        *count = if unlocked { count.saturating_sub(1) } else { 0 };
                    }
                    state.tidy(key);
                }
                on.freed();
                Ok(())
            })
        })
        .await;
    match given {
        Ok(()) | Err(SessionError::Ended) => Ok(()),
        Err(error) => Err(error.into_backend_error("give a lock back")),
    }
}

/// A renewal: the lease end moves (in the session's order, after a release on its way),
/// and the session shows it still answers (a keep-alive unless a statement came back
/// within a third of the lease).
pub(super) async fn renew(inner: Arc<Inner>, args: RenewArgs) -> Result<bool, BackendError> {
    let mode = Mode::of(args.kind)?;
    let (key, holder) = Holder::of(&args.key, &args.owner);
    let Found::Held(session) = inner.sessions.find(key, &holder) else {
        return Ok(false);
    };
    let (on, lease) = (session.clone(), args.lease);
    let moved = session
        .run(move |_conn| {
            Box::pin(async move {
                let mut state = on.state();
                let held = state
                    .hold_mut(key, &holder)
                    .filter(|hold| hold.count(mode) > 0);
                Ok(match held {
                    Some(hold) => {
                        hold.deadline = Instant::now() + lease;
                        true
                    }
                    None => false,
                })
            })
        })
        .await;
    session.deadlines_moved();
    match moved {
        Ok(true) => Ok(session.keep_alive(args.lease / 3).await),
        Ok(false) | Err(SessionError::Ended) => Ok(false),
        Err(error) => Err(error.into_backend_error("renew a lock")),
    }
}

/// A waiter stopped waiting: its statement in the server's queue is cut off (a cancel),
/// and a wait not started yet does not start.
pub(super) async fn leave_queue(inner: Arc<Inner>, args: LeaveArgs) -> Result<(), BackendError> {
    let (key, holder) = Holder::of(&args.key, &args.owner);
    let ctl = inner
        .waits
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(key, holder))
        .cloned();
    if let Some(ctl) = ctl {
        ctl.left.store(true, Ordering::Release);
        ctl.wake.notify_waiters();
        inner.sessions.cancel(&ctl).await;
    }
    Ok(())
}
