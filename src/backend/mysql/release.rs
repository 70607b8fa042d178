//! Releases (the last hold's `RELEASE_LOCK` frees the name: the server grants it to the
//! next waiting `GET_LOCK` at once), renewals (the lease moves on while the session still
//! holds the name) and leaving the queue (a waiting acquisition called off).

use std::sync::Arc;

use tokio::time::Instant;

use super::records;
use super::sql;
use super::Inner;
use crate::backend::{LeaveArgs, ReleaseArgs, ReleaseReply, RenewArgs};
use crate::error::{BackendError, Released};

pub(super) async fn release(
    inner: Arc<Inner>,
    args: ReleaseArgs,
) -> Result<ReleaseReply, BackendError> {
    inner.check_kind(args.kind)?;
    let reply = |released| ReleaseReply {
        released,
        other_listeners: None,
    };
    let name = inner.server_name(&args.key);
    let Some(session) = inner.sessions.find(&name, &args.owner) else {
        return Ok(reply(Released::NotHeld));
    };
    if args.record.is_some() {
        inner.ensure_records_table().await?;
    }
    let (server_name, on, expected) = (name.clone(), session.clone(), args.expected);
    let (record, stored) = (args.record.clone(), inner.clone());
    let released = session
        .run(move |conn| {
            Box::pin(async move {
                let (count, marked) = on
                    .holds()
                    .get(&server_name)
                    .map_or((0, false), |hold| (hold.count, hold.work_marked));
                if count + 1 == expected {
                    // Re-sent after it took effect.
                    return Ok(Released::StillHeld);
                }
                if count == 0 {
                    return Ok(Released::NotHeld);
                }
                // The last hold: its record stored, or its mark taken back, while the lock
                // is still held (the next holder finds the record).
                if count == 1 {
                    match &record {
                        Some(record) => {
                            records::store(conn, &server_name, record, &stored.records_stored)
                                .await?
                        }
                        None if marked => records::clear_work(conn, &server_name).await?,
                        None => {}
                    }
                }
                let freed: Option<i64> = sqlx::query_scalar(sql::RELEASE_LOCK)
                    .bind(&server_name)
                    .fetch_one(&mut *conn)
                    .await?;
                let mut holds = on.holds();
                if count > 1 {
                    if let Some(hold) = holds.get_mut(&server_name) {
                        hold.count -= 1;
                    }
                    return Ok(Released::StillHeld);
                }
                holds.remove(&server_name);
                Ok(match freed {
                    Some(1) => Released::Unlocked,
                    _ => Released::NotHeld,
                })
            })
        })
        .await;
    released
        .map(reply)
        .map_err(|error| error.into_backend("release a named lock"))
}

pub(super) async fn renew(inner: Arc<Inner>, args: RenewArgs) -> Result<bool, BackendError> {
    inner.check_kind(args.kind)?;
    let name = inner.server_name(&args.key);
    let Some(session) = inner.sessions.find(&name, &args.owner) else {
        return Ok(false);
    };
    let (server_name, on, lease) = (name, session.clone(), args.lease);
    let held = session
        .run(move |conn| {
            Box::pin(async move {
                let holds: Option<i64> = sqlx::query_scalar(sql::HOLDS)
                    .bind(&server_name)
                    .fetch_one(&mut *conn)
                    .await?;
                let mut state = on.holds();
                if holds != Some(1) {
                    // Gone behind the holder (a stray RELEASE_LOCK on its session cannot
                    // happen; a server that lost it can).
                    state.remove(&server_name);
                    return Ok(false);
                }
                if let Some(hold) = state.get_mut(&server_name) {
                    hold.until = Instant::now() + lease;
                }
                Ok(true)
            })
        })
        .await;
    match held {
        Ok(held) => Ok(held),
        // The session ended: the lock went with it (its holder is told).
        Err(_) if !session.is_alive() => Ok(false),
        Err(error) => Err(error.into_backend("renew a named lock")),
    }
}

pub(super) async fn leave_queue(inner: Arc<Inner>, args: LeaveArgs) -> Result<(), BackendError> {
    inner.cancel_wait(&args.key, &args.owner);
    Ok(())
}
