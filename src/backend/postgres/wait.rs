//! A waiting acquisition's statement in the server's lock queue: on a session of its own,
//! until granted, its time is up (its lock timeout), or its acquirer leaves (a cancel).

use std::sync::Arc;

use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use super::session::{Holder, WaitCtl};
use super::sql;
use super::take::{taking, undo_if_held, Took};
use super::Inner;
use crate::backend::AcquireArgs;
use crate::error::BackendError;

/// A waiting acquisition's statement in the server's lock queue, on a session of its own,
/// until granted or `until` (its lock timeout), or until its acquirer leaves (a cancel).
#[allow(clippy::too_many_arguments)]
pub(super) async fn wait_in_server(
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
    let (on, waited) = (session.clone(), ctl.clone());
    let sent = Instant::now();
    taking(&session, key, holder, mode, sent + lease, "wait for a lock", move |conn| {
            Box::pin(async move {
                if waited.has_left() {
                    // Its acquirer left before the statement went out.
                    on.wait_ended(&waited, false).await;
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
                result
            })
        })
        .await
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
