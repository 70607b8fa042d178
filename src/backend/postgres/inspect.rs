//! What operators ask: a name's holders and waiters as the server's `pg_locks` shows them
//! (the sessions of this backend named by their holders), freeing a name by ending the
//! sessions that hold it, and the names the server can give back.

use std::sync::Arc;

use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::Inner;
use crate::backend::glob::glob;
use crate::backend::{
    ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, QueuedWaiter, LISTED_MAX,
};
use crate::error::BackendError;
use crate::key::LockKey;

/// The sessions that hold or wait for one advisory key in this database, waiters in the
/// order their statements started.
const ENTRIES: &str = "SELECT l.pid, l.mode, l.granted, coalesce(a.application_name, '') \
    FROM pg_catalog.pg_locks l LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid \
    WHERE l.locktype = 'advisory' \
    AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()) \
    AND l.classid = $1::int8::oid AND l.objid = $2::int8::oid AND l.objsubid = $3 \
    ORDER BY l.granted DESC, a.query_start, l.pid";

/// The advisory keys held or waited for in this database.
const KEYS: &str = "SELECT DISTINCT l.classid::int8, l.objid::int8, l.objsubid \
    FROM pg_catalog.pg_locks l WHERE l.locktype = 'advisory' \
    AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())";

/// SQLSTATE: no such table (the tables are made on first use).
const UNDEFINED_TABLE: &str = "42P01";

type Entry = (i32, String, bool, String);

async fn entries(inner: &Inner, key: AdvisoryKey) -> Result<Vec<Entry>, BackendError> {
    let (classid, objid, objsubid) = key.pg_locks_columns();
    sqlx::query_as(ENTRIES)
        .bind(i64::from(classid))
        .bind(i64::from(objid))
        .bind(objsubid)
        .fetch_all(inner.sessions.control())
        .await
        .map_err(|error| BackendError::with_source("could not read PostgreSQL's pg_locks", error))
}

pub(super) async fn inspect(inner: Arc<Inner>, key: LockKey) -> Result<LockInfo, BackendError> {
    let advisory = AdvisoryKey::from_name(key.as_str());
    let entries = entries(&inner, advisory).await?;
    let mut info = LockInfo::free(key.clone());
    let now = Instant::now();
    for (pid, mode, granted, application) in &entries {
        let shared = mode == "ShareLock";
        if !granted {
            info.queued += 1;
            if info.queue.len() < LISTED_MAX {
                info.queue.push(QueuedWaiter {
                    owner: format!("{application}:{pid}"),
                    place_lasts: None,
                });
            }
            continue;
        }
        info.kind = Some(match (info.kind, shared) {
            (Some(InspectedKind::ReadWrite), _) | (_, true) => InspectedKind::ReadWrite,
            _ => InspectedKind::Lock,
        });
        let side = if shared {
            HolderSide::Read
        } else {
            HolderSide::Exclusive
        };
        // A session of this backend: its holders by owner id; another's by its process.
        let ours: Vec<HolderInfo> = inner
            .sessions
            .holders_on(*pid)
            .into_iter()
            .filter(|(held, holder, ..)| *held == advisory && holder.key == key)
            .filter_map(|(_, holder, exclusive, shared_holds, deadline)| {
                let holds = if shared { shared_holds } else { exclusive };
                (holds > 0).then(|| HolderInfo {
                    owner: holder.owner.to_string(),
                    side,
                    holds,
                    lease: Some(deadline.saturating_duration_since(now)),
                })
            })
            .collect();
        if ours.is_empty() {
            info.holders.push(HolderInfo {
                owner: format!("{application}:{pid}"),
                side,
                holds: 1,
                lease: None,
            });
        } else {
            info.holders.extend(ours);
        }
    }
    let token: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(&inner.tables.token_of)
        .bind(key.as_str())
        .fetch_optional(inner.sessions.control())
        .await;
    info.fencing_token = match token {
        Ok(token) => token.map(|token| token.max(0) as u64),
        Err(error) if super::sql::sql_state(&error).as_deref() == Some(UNDEFINED_TABLE) => None,
        Err(error) => {
            return Err(BackendError::with_source(
                "could not read a fencing token",
                error,
            ))
        }
    };
    Ok(info)
}

/// Ends every session that holds `key` (`pg_terminate_backend`): the server frees the key
/// and everything else those sessions held; their holders learn it at once if they are
/// this backend's, at their next statement otherwise.
pub(super) async fn force_unlock(
    inner: Arc<Inner>,
    key: LockKey,
) -> Result<ForceUnlocked, BackendError> {
    let advisory = AdvisoryKey::from_name(key.as_str());
    let entries = entries(&inner, advisory).await?;
    let holders: Vec<&Entry> = entries.iter().filter(|entry| entry.2).collect();
    let kind = match holders.iter().any(|entry| entry.1 == "ShareLock") {
        _ if holders.is_empty() => None,
        true => Some(InspectedKind::ReadWrite),
        false => Some(InspectedKind::Lock),
    };
    let mut freed = 0;
    for (pid, ..) in holders {
        // With a time limit the server answers once the session has ended (its locks
        // gone), not when the signal was sent: "freed" means free (PostgreSQL 14 or later).
        let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1, 5000)")
            .bind(pid)
            .fetch_one(inner.sessions.control())
            .await
            .map_err(|error| {
                BackendError::with_source("could not end a PostgreSQL session", error)
            })?;
        freed += u32::from(ended);
    }
    Ok(ForceUnlocked {
        kind,
        freed,
        left_alone: None,
    })
}

/// The keys held or waited for in this database that match `pattern`, at most `limit + 1`:
/// this backend's own by their names, the others by their advisory key's text (see
/// [`AdvisoryKey`]'s `Display`: short ASCII names are their own text).
pub(super) async fn list_names(
    inner: Arc<Inner>,
    pattern: String,
    limit: usize,
) -> Result<Vec<LockKey>, BackendError> {
    let rows: Vec<(i64, i64, i16)> = sqlx::query_as(KEYS)
        .fetch_all(inner.sessions.control())
        .await
        .map_err(|error| {
            BackendError::with_source("could not read PostgreSQL's pg_locks", error)
        })?;
    let mut names = Vec::new();
    for (classid, objid, objsubid) in rows {
        let Some(key) = AdvisoryKey::from_pg_locks(classid as u32, objid as u32, objsubid) else {
            continue;
        };
        // This backend's own holds by their names; the server knows only the key.
        let mine = inner.sessions.names_of(key);
        let found = if mine.is_empty() {
            LockKey::joined("", &[&key.to_string()], usize::MAX)
                .into_iter()
                .collect()
        } else {
            mine
        };
        names.extend(
            found
                .into_iter()
                .filter(|name| glob(pattern.as_bytes(), name.as_str().as_bytes())),
        );
        if names.len() > limit {
            break;
        }
    }
    Ok(names)
}
