//! Acquisitions: a holder's reentry on its own session; a first acquisition's try on the
//! least busy session; a waiting one's statement in the server's lock queue, on a session
//! of its own until the lock is granted, the wait's time is up, or its acquirer leaves (a
//! cancel); then, for a lock taken unless recorded, the record or the mark of its work.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use super::session::{Holder, Session, SessionError, WaitCtl};
use super::sessions::{Found, Share};
use super::sql;
use super::Inner;
use crate::backend::{AcquireArgs, Attempt};
use crate::error::BackendError;
use crate::kind::LockKind;

/// How long a reentry may wait in the server's queue (it is granted at once: the server
/// puts a session's request before waiters its own holds block).
const REENTRY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How a statement takes the lock.
#[derive(Debug, Clone, Copy)]
enum How {
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
enum Took {
    Lock(Option<u64>),
    Nothing,
}

pub(super) async fn acquire(inner: Arc<Inner>, args: AcquireArgs) -> Result<Attempt, BackendError> {
    let mode = Mode::of(args.kind)?;
    let key = AdvisoryKey::from_name(args.key.as_str());
    let holder = Holder {
        owner: args.owner.clone(),
        key: args.key.clone(),
    };
    let fenced = args.kind == LockKind::Fenced;
    if fenced || args.unless_recorded {
        inner.tables.ensure(inner.sessions.control()).await?;
    }
    // A re-sent acquisition that already counted, or a reentry: on the holder's session.
    if let Found::Held(session) = inner.sessions.find(key, &holder) {
        let counted = session
            .state()
            .hold(key, &holder)
            .map(|hold| hold.count(mode));
        match counted {
            Some(count) if count == args.expected + 1 => {
                return answer_again(&inner, &args, fenced).await;
            }
            Some(count) if count == args.expected && count > 0 => {
                // A reentry waits as a statement would, so that the server lets it past a
                // waiter it would otherwise hold back (a reader's reentry behind a waiting
                // writer): what the session holds goes before its waiters.
                session.keep(key, &holder, mode);
                let took = take_on(
                    &inner,
                    &session,
                    key,
                    &holder,
                    mode,
                    &args,
                    fenced,
                    How::Wait(REENTRY_WAIT),
                )
                .await?;
                return Ok(attempt(took));
            }
            _ => {}
        }
    }
    if args.expected > 0 {
        return Ok(Attempt::Lost);
    }
    let waits = args.waits && !args.wait_left.is_zero();
    let until = Instant::now() + args.wait_left;
    // A waiting acquisition that names no work goes straight to the server's queue; one
    // that names its work first looks whether the lock is held for other work.
    if !waits || args.work.is_some() {
        if let Some(took) = try_first(&inner, key, &holder, mode, &args, fenced).await? {
            return finish(&inner, key, &holder, mode, &args, took).await;
        }
        if let Some(work) = &args.work {
            if held_for_other_work(&inner, key, &args, work).await? {
                return Ok(Attempt::HeldForOtherWork);
            }
        }
        if !waits {
            return Ok(Attempt::Busy(None));
        }
    }
    match wait_in_server(&inner, key, &holder, mode, &args, fenced, until).await? {
        Took::Nothing => Ok(Attempt::Busy(None)),
        took => finish(&inner, key, &holder, mode, &args, took).await,
    }
}

fn attempt(took: Took) -> Attempt {
    match took {
        Took::Lock(Some(token)) => Attempt::Fenced(token),
        Took::Lock(None) => Attempt::Acquired,
        Took::Nothing => Attempt::Busy(None),
    }
}

/// The answer to an acquisition that already took effect: acquired, with a fenced lock's
/// token as it is now.
async fn answer_again(
    inner: &Inner,
    args: &AcquireArgs,
    fenced: bool,
) -> Result<Attempt, BackendError> {
    if !fenced {
        return Ok(Attempt::Acquired);
    }
    let token: Option<i64> = sqlx::query_scalar(&inner.tables.token_of)
        .bind(args.key.as_str())
        .fetch_optional(inner.sessions.control())
        .await
        .map_err(|error| BackendError::with_source("could not read a fencing token", error))?;
    Ok(Attempt::Fenced(token.unwrap_or(0).max(0) as u64))
}

/// A first acquisition's try, on a session that holds nothing of the key for another
/// holder. `None`: busy (or every session holds it for other holders of this process).
async fn try_first(
    inner: &Inner,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
    args: &AcquireArgs,
    fenced: bool,
) -> Result<Option<Took>, BackendError> {
    let Some((session, share)) = inner.sessions.for_try(key, holder, mode).await? else {
        return Ok(None);
    };
    let how = match share {
        Share::Fresh => How::Try,
        // A writer's read on its own session waits as a reentry does.
        Share::Own => How::Wait(REENTRY_WAIT),
        Share::Readers => How::JoinReaders,
    };
    match take_on(inner, &session, key, holder, mode, args, fenced, how).await? {
        Took::Nothing => Ok(None),
        took => Ok(Some(took)),
    }
}

/// One statement on `session` (kept for the holder by the caller) that takes the lock now
/// or not at all (`pg_try_advisory_lock`), or waits up to `wait` (a reentry); for a fenced
/// lock, the statement also moves its token on. What it took is counted inside the
/// statement's job.
#[allow(clippy::too_many_arguments)]
async fn take_on(
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
    let (on, who) = (session.clone(), holder.clone());
    let wait_ms = match how {
        How::Wait(wait) => Some(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX)),
        How::Try | How::JoinReaders => None,
    };
    let joins = matches!(how, How::JoinReaders);
    let sent = Instant::now();
    let ran = session
        .run(move |conn| {
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
                let held_until = matches!(result, Ok(Took::Lock(_))).then(|| sent + lease);
                on.settle(key, &who, mode, held_until);
                result
            })
        })
        .await;
    ran.map_err(|error| {
        // The job never ran: the key is no longer kept for the holder.
        if matches!(error, SessionError::Ended) {
            session.settle(key, holder, mode, None);
        }
        error.into_backend_error("take a lock")
    })
}

/// Unlocks `key` if this session holds it (a statement that failed after taking it).
async fn undo_if_held(conn: &mut sqlx::postgres::PgListener, key: AdvisoryKey, mode: Mode) {
    if let Ok(true) = sql::holds(key).fetch_one(&mut *conn).await {
        let _ = sql::unlock(key, mode).fetch_one(&mut *conn).await;
    }
}

/// A waiting acquisition's statement in the server's lock queue, on a session of its own,
/// until granted or `until` (its lock timeout), or until its acquirer leaves (a cancel).
#[allow(clippy::too_many_arguments)]
async fn wait_in_server(
    inner: &Inner,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
    args: &AcquireArgs,
    fenced: bool,
    until: Instant,
) -> Result<Took, BackendError> {
    let ctl = Arc::new(WaitCtl::default());
    let _listed = Listed::new(inner, key, holder, &ctl);
    let Some(session) = inner
        .sessions
        .for_wait(key, holder, mode, &ctl, until)
        .await?
    else {
        return Ok(Took::Nothing);
    };
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() || ctl.has_left() {
        session.wait_ended(&ctl, false).await;
        session.settle(key, holder, mode, None);
        return Ok(Took::Nothing);
    }
    let timeout_ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
    let (tables, lock_key, lease) = (inner.tables.clone(), args.key.clone(), args.lease);
    let (on, waited, who) = (session.clone(), ctl.clone(), holder.clone());
    let sent = Instant::now();
    let ran = session
        .run(move |conn| {
            Box::pin(async move {
                if waited.has_left() {
                    // Its acquirer left before the statement went out.
                    on.wait_ended(&waited, false).await;
                    on.settle(key, &who, mode, None);
                    return Ok(Took::Nothing);
                }
                let result = if fenced {
                    let statement = tables.fenced(key, true);
                    sql::bind_key_scalar(
                        sqlx::query_scalar::<_, i64>(statement).bind(sql::timeout_setting(timeout_ms)),
                        key,
                    )
                    .bind(lock_key.as_str())
                    .fetch_optional(&mut *conn)
                    .await
                    .map(|token| Took::Lock(Some(token.unwrap_or(0).max(0) as u64)))
                } else {
                    sql::lock(key, mode, timeout_ms)
                        .execute(&mut *conn)
                        .await
                        .map(|_| Took::Lock(None))
                };
                let canceled = matches!(&result, Err(e) if sql::sql_state(e).as_deref() == Some(sql::QUERY_CANCELED));
                on.wait_ended(&waited, canceled).await;
                let result = match result {
                    Err(error) if on.is_alive() && !sql::ends_session(&error) => {
                        // Timed out, cancelled or failed: granted just then, it is given back
                        // (the acquirer's wait is over or it left).
                        undo_if_held(conn, key, mode).await;
                        if canceled || sql::sql_state(&error).as_deref() == Some(sql::LOCK_NOT_AVAILABLE) {
                            Ok(Took::Nothing)
                        } else {
                            Err(error)
                        }
                    }
                    // The session is closed (a stray cancel, or it broke): nothing is held.
                    Err(error) if !on.is_alive() && !sql::ends_session(&error) => Ok(Took::Nothing),
                    other => other,
                };
                let held_until = matches!(result, Ok(Took::Lock(_))).then(|| sent + lease);
                on.settle(key, &who, mode, held_until);
                result
            })
        })
        .await;
    *ctl.on.lock().unwrap_or_else(|e| e.into_inner()) = None;
    ran.map_err(|error| {
        if matches!(error, SessionError::Ended) {
            session.settle(key, holder, mode, None);
        }
        error.into_backend_error("wait for a lock")
    })
}

/// A waiting acquisition listed for [`leave_queue`](super::release::leave_queue) while it
/// waits.
struct Listed<'a> {
    inner: &'a Inner,
    entry: (AdvisoryKey, Holder),
    ctl: Arc<WaitCtl>,
}

impl<'a> Listed<'a> {
    fn new(inner: &'a Inner, key: AdvisoryKey, holder: &Holder, ctl: &Arc<WaitCtl>) -> Self {
        let entry = (key, holder.clone());
        inner
            .waits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(entry.clone(), ctl.clone());
        Listed {
            inner,
            entry,
            ctl: ctl.clone(),
        }
    }
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        let mut waits = self.inner.waits.lock().unwrap_or_else(|e| e.into_inner());
        if waits
            .get(&self.entry)
            .is_some_and(|listed| Arc::ptr_eq(listed, &self.ctl))
        {
            waits.remove(&self.entry);
        }
    }
}

/// Whether the lock is held, by a holder that still holds it, for other work than `work`.
async fn held_for_other_work(
    inner: &Inner,
    key: AdvisoryKey,
    args: &AcquireArgs,
    work: &Bytes,
) -> Result<bool, BackendError> {
    let (classid, objid, objsubid) = key.pg_locks_columns();
    let held_for: Option<Option<Vec<u8>>> = sqlx::query_scalar(&inner.tables.work_of_holder)
        .bind(args.key.as_str())
        .bind(i64::from(classid))
        .bind(i64::from(objid))
        .bind(objsubid)
        .fetch_optional(inner.sessions.control())
        .await
        .map_err(|error| BackendError::with_source("could not read a lock's work", error))?;
    Ok(matches!(held_for, Some(Some(other)) if other.as_slice() != work.as_ref()))
}

/// A lock just taken: for an acquisition unless recorded, the record if there is one (the
/// lock is then given back), else the mark of its work.
async fn finish(
    inner: &Inner,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
    args: &AcquireArgs,
    took: Took,
) -> Result<Attempt, BackendError> {
    if !args.unless_recorded {
        return Ok(attempt(took));
    }
    let Found::Held(session) = inner.sessions.find(key, holder) else {
        return Ok(Attempt::Lost);
    };
    let (tables, lock_key, work) = (inner.tables.clone(), args.key.clone(), args.work.clone());
    let (on, token, who) = (session.clone(), session.token, holder.clone());
    let marked = session
        .run(move |conn| {
            Box::pin(async move {
                let (found, marked): (Option<Vec<u8>>, i64) = sqlx::query_as(&tables.mark_work)
                    .bind(lock_key.as_str())
                    .bind(work.as_deref())
                    .bind(token)
                    .fetch_one(&mut *conn)
                    .await?;
                if found.is_some() || marked > 0 {
                    if marked > 0 {
                        if let Some(hold) = on.state().hold_mut(key, &who) {
                            hold.work_row = true;
                        }
                    }
                    return Ok(found);
                }
                // A record was stored meanwhile (a holder's commit that came late).
                sqlx::query_scalar::<_, Vec<u8>>(&tables.record_of)
                    .bind(lock_key.as_str())
                    .fetch_optional(&mut *conn)
                    .await
            })
        })
        .await;
    match marked {
        Ok(None) => Ok(attempt(took)),
        Ok(Some(record)) => {
            super::release::give_back(inner, &session, key, holder, mode).await?;
            Ok(Attempt::Recorded(Bytes::from(record)))
        }
        Err(error) => {
            let _ = super::release::give_back(inner, &session, key, holder, mode).await;
            Err(error.into_backend_error("read a lock's record"))
        }
    }
}
