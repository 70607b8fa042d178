//! Locks taken unless recorded: a lock just taken gives way to the key's record if there is
//! one, and is marked with the work it is held for, so that a request for other work is
//! refused at once.

use bytes::Bytes;

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use super::session::Holder;
use super::sessions::Found;
use super::take::{attempt, Took};
use super::Inner;
use crate::backend::{AcquireArgs, Attempt};
use crate::error::BackendError;

/// Whether the lock is held, by a holder that still holds it, for other work than `work`.
pub(super) async fn held_for_other_work(
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
pub(super) async fn finish(
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
