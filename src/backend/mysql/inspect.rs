//! What operators ask: who holds a name (this process's holders by their owner ids, another
//! session as `mysql:<connection id>`), freeing a name (`KILL` of the holding session: the
//! server frees everything it held), and the names held (this backend's; with MySQL's
//! `performance_schema`, every session's).

use std::sync::Arc;

use tokio::time::Instant;

use super::sql;
use super::Inner;
use crate::backend::glob::glob;
use crate::backend::{
    ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, QueuedWaiter,
};
use crate::error::BackendError;
use crate::key::LockKey;

/// The connection id of the session holding `name`, if any.
async fn holder_of(inner: &Inner, name: &str) -> Result<Option<u64>, BackendError> {
    let name = name.to_owned();
    let id = inner
        .sessions
        .control("read who holds a named lock", move |conn| {
            Box::pin(async move {
                sqlx::query_scalar::<_, Option<i64>>(sql::IS_USED_LOCK)
                    .bind(name)
                    .fetch_one(&mut *conn)
                    .await
            })
        })
        .await?;
    Ok(id.map(|id| id.max(0) as u64))
}

pub(super) async fn inspect(inner: Arc<Inner>, key: LockKey) -> Result<LockInfo, BackendError> {
    let name = inner.server_name(&key);
    let mut info = LockInfo::free(key);
    // This backend's waiters (the server does not list a name's waiters).
    for session in inner.sessions.all() {
        let waiting = session
            .waiting_on
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some((_, owner)) = waiting.filter(|(waits_for, _)| *waits_for == name) {
            info.queued += 1;
            info.queue.push(QueuedWaiter {
                owner: owner.to_string(),
                place_lasts: None,
            });
        }
    }
    let Some(id) = holder_of(&inner, &name).await? else {
        info.fencing_token = last_token(&inner, &name).await;
        return Ok(info);
    };
    info.kind = Some(InspectedKind::Lock);
    let now = Instant::now();
    let ours = inner
        .sessions
        .all()
        .into_iter()
        .find(|session| session.id == id)
        .and_then(|session| session.holds().get(&name).cloned());
    info.holders.push(match ours {
        Some(hold) => HolderInfo {
            owner: hold.owner.to_string(),
            side: HolderSide::Exclusive,
            holds: hold.count,
            lease: Some(hold.until.saturating_duration_since(now)),
        },
        None => HolderInfo {
            owner: format!("mysql:{id}"),
            side: HolderSide::Exclusive,
            holds: 1,
            lease: None,
        },
    });
    info.fencing_token = last_token(&inner, &name).await;
    Ok(info)
}

/// The last fencing token given for `name` (none before the first, or without the table).
async fn last_token(inner: &Inner, name: &str) -> Option<u64> {
    let name = name.to_owned();
    inner
        .sessions
        .control("read a fencing token", move |conn| {
            Box::pin(async move {
                sqlx::query_scalar::<_, u64>(sql::TOKEN_OF)
                    .bind(name)
                    .fetch_optional(&mut *conn)
                    .await
            })
        })
        .await
        .ok()
        .flatten()
}

pub(super) async fn force_unlock(
    inner: Arc<Inner>,
    key: LockKey,
) -> Result<ForceUnlocked, BackendError> {
    let name = inner.server_name(&key);
    let Some(id) = holder_of(&inner, &name).await? else {
        return Ok(ForceUnlocked {
            kind: None,
            freed: 0,
            left_alone: None,
        });
    };
    inner
        .sessions
        .control("end the holding session", move |conn| {
            Box::pin(async move {
                sqlx::query(&format!("KILL {id}"))
                    .execute(&mut *conn)
                    .await
                    .map(|_| ())
            })
        })
        .await?;
    // The server frees the name as the session ends; answer once it has.
    for _ in 0..500 {
        if holder_of(&inner, &name).await? != Some(id) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    Ok(ForceUnlocked {
        kind: Some(InspectedKind::Lock),
        freed: 1,
        left_alone: None,
    })
}

pub(super) async fn list_names(
    inner: Arc<Inner>,
    pattern: String,
    limit: usize,
) -> Result<Vec<LockKey>, BackendError> {
    let mut names: Vec<LockKey> = inner
        .sessions
        .all()
        .iter()
        .flat_map(|session| {
            session
                .holds()
                .values()
                .map(|hold| hold.key.clone())
                .collect::<Vec<_>>()
        })
        .filter(|key| glob(pattern.as_bytes(), key.as_str().as_bytes()))
        .collect();
    names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    names.dedup();
    names.truncate(limit + 1);
    Ok(names)
}
