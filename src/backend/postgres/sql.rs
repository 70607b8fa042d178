//! The statements the backend sends, and what the server's errors mean to it. A lock key
//! reaches the server only as bound parameters; the numbers of an advisory key too.

use sqlx::postgres::{PgArguments, Postgres};
use sqlx::query::{Query, QueryScalar};

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use crate::error::BackendError;

/// A new session's setup: no statement time limit of the application's (a wait is bounded
/// by its own lock timeout), a name to be known by in `pg_stat_activity` unless the
/// application gave one; answers the session's server process id.
pub(super) const SESSION_SETUP: &str = "SELECT pg_backend_pid() \
    WHERE set_config('statement_timeout', '0', false) IS NOT NULL \
    AND (current_setting('application_name') <> '' \
         OR set_config('application_name', 'tower-lock', false) IS NOT NULL)";

/// A statement that only shows the session answers.
pub(super) const KEEP_ALIVE: &str = "SELECT 1";

/// Cuts off the statement that session `$1` runs (a wait whose acquirer left).
pub(super) const CANCEL: &str = "SELECT pg_cancel_backend($1)";

/// Whether this session holds the key (in any mode): for a wait whose lock timeout or
/// cancel came just as the server granted it.
pub(super) const HOLDS: &str = "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks \
    WHERE locktype = 'advisory' AND pid = pg_catalog.pg_backend_pid() AND granted \
    AND classid = $1::int8::oid AND objid = $2::int8::oid AND objsubid = $3)";

/// SQLSTATE: the statement was cancelled.
pub(super) const QUERY_CANCELED: &str = "57014";
/// SQLSTATE: the lock timeout ran out.
pub(super) const LOCK_NOT_AVAILABLE: &str = "55P03";

/// The SQLSTATE of a database error.
pub(super) fn sql_state(error: &sqlx::Error) -> Option<String> {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .map(|code| code.into_owned())
}

/// Whether an error leaves the connection unusable: the session, and its locks, are gone
/// (or must be taken for gone).
pub(super) fn ends_session(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // Class 08: connection exceptions; 57P0x: the server ends the session
        // (terminated, shutting down, crashed).
        sqlx::Error::Database(_) => {
            sql_state(error).is_some_and(|code| code.starts_with("08") || code.starts_with("57P"))
        }
        _ => false,
    }
}

/// Binds an advisory key's one or two numbers.
fn bind_key<'q, O>(
    query: QueryScalar<'q, Postgres, O, PgArguments>,
    key: AdvisoryKey,
) -> QueryScalar<'q, Postgres, O, PgArguments> {
    match key {
        AdvisoryKey::Single(key) => query.bind(key),
        AdvisoryKey::Pair(first, second) => query.bind(first).bind(second),
    }
}

fn bind_key_query<'q>(
    query: Query<'q, Postgres, PgArguments>,
    key: AdvisoryKey,
) -> Query<'q, Postgres, PgArguments> {
    match key {
        AdvisoryKey::Single(key) => query.bind(key),
        AdvisoryKey::Pair(first, second) => query.bind(first).bind(second),
    }
}

/// `pg_try_advisory_lock[_shared]`: answers at once whether the session took it.
pub(super) fn try_lock(
    key: AdvisoryKey,
    mode: Mode,
) -> QueryScalar<'static, Postgres, bool, PgArguments> {
    let sql = match (key, mode) {
        (AdvisoryKey::Single(_), Mode::Exclusive) => "SELECT pg_try_advisory_lock($1)",
        (AdvisoryKey::Pair(..), Mode::Exclusive) => "SELECT pg_try_advisory_lock($1, $2)",
        (AdvisoryKey::Single(_), Mode::Shared) => "SELECT pg_try_advisory_lock_shared($1)",
        (AdvisoryKey::Pair(..), Mode::Shared) => "SELECT pg_try_advisory_lock_shared($1, $2)",
    };
    bind_key(sqlx::query_scalar(sql), key)
}

/// A read hold joining the shared hold of this session's other readers, only while nobody
/// waits for the key in the server's queue: the server grants a session more of what it
/// holds without looking at its waiters, and a new reader must not overtake a waiting
/// writer. No row when someone waits; else whether it was taken.
pub(super) fn join_readers(key: AdvisoryKey) -> QueryScalar<'static, Postgres, bool, PgArguments> {
    let sql = match key {
        AdvisoryKey::Single(_) => {
            "SELECT pg_try_advisory_lock_shared($1) WHERE NOT EXISTS (SELECT 1 \
             FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND NOT granted \
             AND classid = $2::int8::oid AND objid = $3::int8::oid AND objsubid = $4 \
             AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))"
        }
        AdvisoryKey::Pair(..) => {
            "SELECT pg_try_advisory_lock_shared($1, $2) WHERE NOT EXISTS (SELECT 1 \
             FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND NOT granted \
             AND classid = $3::int8::oid AND objid = $4::int8::oid AND objsubid = $5 \
             AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database()))"
        }
    };
    let (classid, objid, objsubid) = key.pg_locks_columns();
    bind_key(sqlx::query_scalar(sql), key)
        .bind(i64::from(classid))
        .bind(i64::from(objid))
        .bind(objsubid)
}

/// `pg_advisory_unlock[_shared]`: one hold fewer; `false` if the session held none.
pub(super) fn unlock(
    key: AdvisoryKey,
    mode: Mode,
) -> QueryScalar<'static, Postgres, bool, PgArguments> {
    let sql = match (key, mode) {
        (AdvisoryKey::Single(_), Mode::Exclusive) => "SELECT pg_advisory_unlock($1)",
        (AdvisoryKey::Pair(..), Mode::Exclusive) => "SELECT pg_advisory_unlock($1, $2)",
        (AdvisoryKey::Single(_), Mode::Shared) => "SELECT pg_advisory_unlock_shared($1)",
        (AdvisoryKey::Pair(..), Mode::Shared) => "SELECT pg_advisory_unlock_shared($1, $2)",
    };
    bind_key(sqlx::query_scalar(sql), key)
}

/// `pg_advisory_lock[_shared]` under a lock timeout of `timeout_ms` set in the same
/// statement: waits in the server's queue until granted (an answer) or the timeout (an
/// error, `55P03`).
pub(super) fn lock(
    key: AdvisoryKey,
    mode: Mode,
    timeout_ms: u64,
) -> Query<'static, Postgres, PgArguments> {
    // The filter runs before the select list: the timeout is set before the wait starts.
    let sql = match (key, mode) {
        (AdvisoryKey::Single(_), Mode::Exclusive) => {
            "SELECT pg_advisory_lock($2) WHERE set_config('lock_timeout', $1, false) IS NOT NULL"
        }
        (AdvisoryKey::Pair(..), Mode::Exclusive) => {
            "SELECT pg_advisory_lock($2, $3) WHERE set_config('lock_timeout', $1, false) IS NOT NULL"
        }
        (AdvisoryKey::Single(_), Mode::Shared) => {
            "SELECT pg_advisory_lock_shared($2) WHERE set_config('lock_timeout', $1, false) IS NOT NULL"
        }
        (AdvisoryKey::Pair(..), Mode::Shared) => {
            "SELECT pg_advisory_lock_shared($2, $3) WHERE set_config('lock_timeout', $1, false) IS NOT NULL"
        }
    };
    bind_key_query(sqlx::query(sql).bind(timeout_setting(timeout_ms)), key)
}

/// A `lock_timeout` value: milliseconds, at least 1 (0 would mean no limit).
pub(super) fn timeout_setting(timeout_ms: u64) -> String {
    format!("{}ms", timeout_ms.clamp(1, i32::MAX as u64))
}

/// Whether this session holds `key` (see [`HOLDS`]).
pub(super) fn holds(key: AdvisoryKey) -> QueryScalar<'static, Postgres, bool, PgArguments> {
    let (classid, objid, objsubid) = key.pg_locks_columns();
    sqlx::query_scalar(HOLDS)
        .bind(i64::from(classid))
        .bind(i64::from(objid))
        .bind(objsubid)
}

/// `$n` placeholders for an advisory key starting at `first`, and the next free number.
pub(super) fn key_params(key: AdvisoryKey, first: usize) -> (String, usize) {
    match key {
        AdvisoryKey::Single(_) => (format!("${first}"), first + 1),
        AdvisoryKey::Pair(..) => (format!("${first}, ${}", first + 1), first + 2),
    }
}

/// Binds an advisory key into a statement made with [`key_params`].
pub(super) fn bind_key_scalar<'q, O>(
    query: QueryScalar<'q, Postgres, O, PgArguments>,
    key: AdvisoryKey,
) -> QueryScalar<'q, Postgres, O, PgArguments> {
    bind_key(query, key)
}

/// A schema or table name as an SQL identifier, quoted.
pub(super) fn identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Why a statement on a session has no answer.
#[derive(Debug)]
pub(super) enum SessionError {
    /// The session ended (before or while it ran): whatever it held is gone.
    Ended,
    /// The statement failed (the session may have ended with it: see `is_alive`).
    Sql(sqlx::Error),
}

impl SessionError {
    pub(super) fn into_backend_error(self, what: &str) -> BackendError {
        match self {
            SessionError::Ended => BackendError::new(format!(
                "PostgreSQL ended the session that {what} (a broken connection, a terminated \
                 backend or a restart)"
            )),
            SessionError::Sql(error) => {
                BackendError::with_source(format!("PostgreSQL failed to {what}"), error)
            }
        }
    }
}
