//! Leases that run out: the server keeps a named lock for as long as the session lives, so
//! a hold whose owner stops renewing it (a fixed lease, a stuck task) is released here when
//! its lease ends, and its holder is told, as on every backend.

use std::sync::{Arc, Weak};

use tokio::time::Instant;

use super::session::Session;
use super::sql;
use super::Inner;
use crate::abort::AbortOnDrop;

/// Releases the hold of `name` on `session` once its lease has ended unrenewed (each
/// renewal moves the end on; released or ended meanwhile, nothing is done). The timer
/// belongs to the hold: it stops when the hold goes (a release).
pub(super) fn expire_later(inner: &Arc<Inner>, session: &Arc<Session>, name: &str) {
    let (held_on, held) = (session.clone(), name.to_owned());
    let (inner, session, name): (Weak<Inner>, Weak<Session>, String) = (
        Arc::downgrade(inner),
        Arc::downgrade(session),
        name.to_owned(),
    );
    let task = tokio::spawn(async move {
        loop {
            let until = {
                let Some(session) = session.upgrade() else {
                    return;
                };
                let holds = session.holds();
                let Some(hold) = holds.get(&name) else {
                    return;
                };
                hold.until
            };
            if until > Instant::now() {
                tokio::time::sleep_until(until).await;
                continue;
            }
            let (Some(session), Some(inner)) = (session.upgrade(), inner.upgrade()) else {
                return;
            };
            let expired = {
                let mut holds = session.holds();
                match holds.get(&name) {
                    Some(hold) if hold.until <= Instant::now() => holds.remove(&name),
                    _ => None,
                }
            };
            let Some(hold) = expired else {
                continue;
            };
            let (server_name, count) = (name.clone(), hold.count);
            let _ = session
                .run(move |conn| {
                    Box::pin(async move {
                        for _ in 0..count {
                            let _: Option<i64> = sqlx::query_scalar(sql::RELEASE_LOCK)
                                .bind(&server_name)
                                .fetch_one(&mut *conn)
                                .await?;
                        }
                        Ok(())
                    })
                })
                .await;
            if let Some(notices) = inner.sessions.shared.notices.get() {
                notices.lost(&hold.key, &hold.owner);
            }
            return;
        }
    });
    let mut holds = held_on.holds();
    if let Some(hold) = holds.get_mut(&held) {
        hold.expiry = Some(AbortOnDrop::new(task));
    }
}
