//! Locks taken unless recorded (the idempotency layer's): a lock just taken gives way to
//! the name's record if one is in force, and is marked with the work it is held for, so
//! that a request for other work is refused at once; a release with a record stores it on
//! the holder's session before the lock is released, so the next holder finds it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::session::{Session, SessionError};
use super::sql;
use super::Inner;
use crate::backend::{AcquireArgs, Attempt, LockRecord};
use crate::error::BackendError;

/// Every so many stored records, the expired ones are swept.
const SWEEP_EVERY: u64 = 64;

/// Whether the lock is held, by a session that still holds it, for other work than `work`.
pub(super) async fn held_for_other_work(
    inner: &Inner,
    name: &str,
    work: &Bytes,
) -> Result<bool, BackendError> {
    let name = name.to_owned();
    let held_for: Option<Option<Vec<u8>>> = inner
        .sessions
        .control("read a lock's work", move |conn| {
            Box::pin(async move {
                sqlx::query_scalar(sql::WORK_OF_HOLDER)
                    .bind(&name)
                    .bind(&name)
                    .fetch_optional(&mut *conn)
                    .await
            })
        })
        .await?;
    Ok(matches!(held_for, Some(Some(other)) if other.as_slice() != work.as_ref()))
}

/// A lock just taken on `session` for an acquisition unless recorded: the record if one is
/// in force (the lock is then given back), else the mark of its work, if it names one.
pub(super) async fn finish(
    session: &Arc<Session>,
    name: &str,
    args: &AcquireArgs,
    taken: Attempt,
) -> Result<Attempt, BackendError> {
    let (server_name, work, on) = (name.to_owned(), args.work.clone(), session.clone());
    let found = session
        .run(move |conn| {
            Box::pin(async move {
                let record: Option<Vec<u8>> = sqlx::query_scalar(sql::RECORD_OF)
                    .bind(&server_name)
                    .fetch_optional(&mut *conn)
                    .await?;
                if record.is_some() {
                    // Given back at once, in the same statement job: nothing else was done
                    // under it.
                    let _: Option<i64> = sqlx::query_scalar(sql::RELEASE_LOCK)
                        .bind(&server_name)
                        .fetch_one(&mut *conn)
                        .await?;
                    on.holds().remove(&server_name);
                    return Ok(record);
                }
                if let Some(work) = work {
                    sqlx::query(sql::MARK_WORK)
                        .bind(&server_name)
                        .bind(work.as_ref())
                        .execute(&mut *conn)
                        .await?;
                    if let Some(hold) = on.holds().get_mut(&server_name) {
                        hold.work_marked = true;
                    }
                }
                Ok(None)
            })
        })
        .await;
    match found {
        Ok(None) => Ok(taken),
        Ok(Some(record)) => Ok(Attempt::Recorded(Bytes::from(record))),
        Err(error) => Err(error.into_backend("read a lock's record")),
    }
}

/// Stores `record` on the holder's connection (in a release's statement job, before the
/// lock is released).
pub(super) async fn store(
    conn: &mut sqlx::mysql::MySqlConnection,
    name: &str,
    record: &LockRecord,
    stored: &AtomicU64,
) -> Result<(), sqlx::Error> {
    let micros = u64::try_from(record.retention.as_micros()).unwrap_or(u64::MAX);
    sqlx::query(sql::STORE_RECORD)
        .bind(name)
        .bind(record.value.as_ref())
        .bind(micros)
        .execute(&mut *conn)
        .await?;
    if stored.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
        sqlx::query(sql::SWEEP).execute(&mut *conn).await?;
    }
    Ok(())
}

/// The lock's mark taken back (a release without a record).
pub(super) async fn clear_work(
    conn: &mut sqlx::mysql::MySqlConnection,
    name: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(sql::CLEAR_WORK)
        .bind(name)
        .execute(&mut *conn)
        .await
        .map(|_| ())
}

impl From<SessionError> for BackendError {
    fn from(error: SessionError) -> Self {
        error.into_backend("use a session")
    }
}
