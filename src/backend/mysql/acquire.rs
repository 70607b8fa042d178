//! Acquisitions: a reentry on the holder's session (the server counts it too); a try on a
//! session that does not hold the name; a waiting acquisition's `GET_LOCK` on a session of
//! its own, until granted, its time is up, or its acquirer leaves (its session is killed,
//! which gives back whatever it was granted). A fenced lock's token is counted in a table,
//! on the holder's session, while the lock is held.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::expiry::expire_later;
use super::records;
use super::session::{Hold, Reservation, Session, SessionError};
use super::sql;
use super::Inner;
use crate::backend::{AcquireArgs, Attempt};
use crate::error::BackendError;
use crate::kind::LockKind;

pub(super) async fn acquire(inner: Arc<Inner>, args: AcquireArgs) -> Result<Attempt, BackendError> {
    inner.check_kind(args.kind)?;
    let fenced = args.kind == LockKind::Fenced;
    if fenced {
        inner.ensure_tokens_table().await?;
    }
    if args.unless_recorded {
        inner.ensure_records_table().await?;
    }
    let name = inner.server_name(&args.key);
    if let Some(session) = inner.sessions.find(&name, &args.owner) {
        let count = session.holds().get(&name).map_or(0, |hold| hold.count);
        if count == args.expected + 1 {
            // Re-sent after it took effect.
            let token = session.holds().get(&name).and_then(|hold| hold.token);
            return Ok(answer(fenced, token));
        }
        if count == args.expected && count > 0 {
            return reenter(&inner, &session, &name, &args, fenced).await;
        }
    }
    if args.expected > 0 {
        return Ok(Attempt::Lost);
    }
    let waits = args.waits && !args.wait_left.is_zero();
    // A waiting acquisition that names its work first looks whether the lock is held for
    // other work (refused at once, not after its wait).
    if !waits || args.work.is_some() {
        let reserved = inner.sessions.for_try(&name).await?;
        let session = reserved.session().clone();
        let taken = take(
            &inner,
            &session,
            Some(reserved),
            &name,
            &args,
            fenced,
            Duration::ZERO,
        )
        .await?;
        if taken.is_acquired() {
            return recorded_or(&session, &name, &args, taken).await;
        }
        if let Some(work) = &args.work {
            if records::held_for_other_work(&inner, &name, work).await? {
                return Ok(Attempt::HeldForOtherWork);
            }
        }
        if !waits {
            return Ok(taken);
        }
    }
    let until = Instant::now() + args.wait_left;
    let cancel = inner.waiting(&args.key, &args.owner);
    let result = wait(&inner, &name, &args, fenced, until, &cancel).await;
    inner.done_waiting(&args.key, &args.owner);
    match result? {
        (taken, Some(session)) if taken.is_acquired() => {
            recorded_or(&session, &name, &args, taken).await
        }
        (other, _) => Ok(other),
    }
}

/// A lock just taken: for an acquisition unless recorded, the record if there is one (the
/// lock is then given back), else the mark of its work.
async fn recorded_or(
    session: &Arc<Session>,
    name: &str,
    args: &AcquireArgs,
    taken: Attempt,
) -> Result<Attempt, BackendError> {
    if !args.unless_recorded {
        return Ok(taken);
    }
    records::finish(session, name, args, taken).await
}

fn answer(fenced: bool, token: Option<u64>) -> Attempt {
    match (fenced, token) {
        (true, Some(token)) => Attempt::Fenced(token),
        (true, None) => Attempt::Fenced(0),
        (false, _) => Attempt::Acquired,
    }
}

/// A waiting acquisition: a session of its own, its `GET_LOCK` until granted or `until`, or
/// until `cancel` (its acquirer left: the session is killed, giving back what it got).
async fn wait(
    inner: &Arc<Inner>,
    name: &str,
    args: &AcquireArgs,
    fenced: bool,
    until: Instant,
    cancel: &Notify,
) -> Result<(Attempt, Option<Arc<Session>>), BackendError> {
    let Some(session) = inner.sessions.for_wait(until).await? else {
        return Ok((Attempt::Busy(None), None));
    };
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        session.waiting.store(false, Ordering::Release);
        return Ok((Attempt::Busy(None), None));
    }
    *lock(&session.waiting_on) = Some((name.to_owned(), args.owner.clone()));
    let result = {
        let taking = take(inner, &session, None, name, args, fenced, left);
        tokio::pin!(taking);
        tokio::select! {
            result = &mut taking => result,
            _ = cancel.notified() => {
                // Called off: the session ends, and with it whatever it was granted.
                inner.sessions.kill(&session).await;
                let _ = taking.await;
                session.end();
                Ok(Attempt::Busy(None))
            }
        }
    };
    *lock(&session.waiting_on) = None;
    session.waiting.store(false, Ordering::Release);
    inner.sessions.shared.freed.notify_waiters();
    result.map(|taken| (taken, Some(session)))
}

fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// `GET_LOCK` on `session`, waiting up to `wait` (zero: a try, `reserved` for it on the
/// session until its statement ends); granted, the hold is kept (and a fenced lock's next
/// token counted).
#[allow(clippy::too_many_arguments)]
async fn take(
    inner: &Arc<Inner>,
    session: &Arc<Session>,
    reserved: Option<Reservation>,
    name: &str,
    args: &AcquireArgs,
    fenced: bool,
    wait: Duration,
) -> Result<Attempt, BackendError> {
    let timeout = if wait.is_zero() {
        0.0
    } else {
        sql::timeout_seconds(wait, session.mariadb)
    };
    let (server_name, on) = (name.to_owned(), session.clone());
    let hold = Hold {
        key: args.key.clone(),
        owner: args.owner.clone(),
        count: 1,
        until: Instant::now() + args.lease,
        token: None,
        work_marked: false,
        expiry: None,
    };
    let taken = session
        .run(move |conn| {
            Box::pin(async move {
                // Until this statement ends (the hold recorded or not), no other try of the
                // name comes to this session.
                let _reserved = reserved;
                let got: Option<i64> = sqlx::query_scalar(sql::GET_LOCK)
                    .bind(&server_name)
                    .bind(timeout)
                    .fetch_one(&mut *conn)
                    .await?;
                if got != Some(1) {
                    return Ok(None);
                }
                // Counted inside the statement's task: what the server did is known even if
                // the caller went away.
                let mut hold = hold;
                if fenced {
                    hold.token = Some(next_token(conn, &server_name).await?);
                }
                let token = hold.token;
                on.holds().insert(server_name, hold);
                Ok(Some(token))
            })
        })
        .await;
    match taken {
        Ok(Some(token)) => {
            expire_later(inner, session, name);
            Ok(answer(fenced, token))
        }
        Ok(None) => Ok(Attempt::Busy(None)),
        Err(SessionError::Sql(error)) if sql::name_too_long(&error) => Err(BackendError::new(
            format!("MySQL refused the lock name {name:?} as too long"),
        )),
        Err(error) => Err(error.into_backend("take a named lock")),
    }
}

/// The next fencing token of `name`, counted on the holder's session.
async fn next_token(
    conn: &mut sqlx::mysql::MySqlConnection,
    name: &str,
) -> Result<u64, sqlx::Error> {
    sqlx::query(sql::NEXT_TOKEN)
        .bind(name)
        .execute(&mut *conn)
        .await?;
    sqlx::query_scalar::<_, u64>(sql::LAST_TOKEN)
        .fetch_one(&mut *conn)
        .await
}

/// One more hold of a lock the owner holds on `session` (the server counts it too).
async fn reenter(
    inner: &Arc<Inner>,
    session: &Arc<Session>,
    name: &str,
    args: &AcquireArgs,
    fenced: bool,
) -> Result<Attempt, BackendError> {
    let (server_name, on, lease) = (name.to_owned(), session.clone(), args.lease);
    let reentered = session
        .run(move |conn| {
            Box::pin(async move {
                let got: Option<i64> = sqlx::query_scalar(sql::GET_LOCK)
                    .bind(&server_name)
                    .bind(0.0)
                    .fetch_one(&mut *conn)
                    .await?;
                if got != Some(1) {
                    return Ok(None);
                }
                let token = if fenced {
                    Some(next_token(conn, &server_name).await?)
                } else {
                    None
                };
                let mut holds = on.holds();
                let Some(hold) = holds.get_mut(&server_name) else {
                    return Ok(None);
                };
                hold.count += 1;
                hold.until = hold.until.max(Instant::now() + lease);
                if token.is_some() {
                    hold.token = token;
                }
                Ok(Some(hold.token))
            })
        })
        .await;
    let _ = inner;
    match reentered {
        Ok(Some(token)) => Ok(answer(fenced, token)),
        Ok(None) => Ok(Attempt::Lost),
        Err(error) => Err(error.into_backend("take a named lock again")),
    }
}
