//! The statements, and what a server error means: whether it ends the session.

use std::time::Duration;

use crate::error::BackendError;

/// This session's id (what `KILL` names, and what `IS_USED_LOCK` answers), and the server's
/// version.
pub(super) const CONNECTION_ID: &str = "SELECT CONNECTION_ID(), VERSION()";
/// Take a named lock, waiting up to `?` seconds (0: a try). 1 taken, 0 timed out, NULL error.
pub(super) const GET_LOCK: &str = "SELECT GET_LOCK(?, ?)";
/// A session's watch: its connection waits for the session's private lock (told apart from
/// lock waits in the server's process list by its column's name).
pub(super) const WATCH: &str = "SELECT GET_LOCK(?, ?) AS session_watch";
/// Give one hold of a named lock back. 1 released, 0 not ours, NULL no such lock.
pub(super) const RELEASE_LOCK: &str = "SELECT RELEASE_LOCK(?)";
/// The session holding a named lock (NULL: free).
pub(super) const IS_USED_LOCK: &str = "SELECT IS_USED_LOCK(?)";
/// Whether this session holds the named lock.
pub(super) const HOLDS: &str = "SELECT IS_USED_LOCK(?) = CONNECTION_ID()";

/// The fencing tokens' table.
pub(super) const TOKENS_TABLE: &str = "CREATE TABLE IF NOT EXISTS tower_lock_fencing_tokens (\
    lock_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, \
    token BIGINT UNSIGNED NOT NULL)";
/// The next token of a lock (read with [`LAST_TOKEN`] on the same session).
pub(super) const NEXT_TOKEN: &str = "INSERT INTO tower_lock_fencing_tokens (lock_name, token) \
    VALUES (?, LAST_INSERT_ID(1)) ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1)";
pub(super) const LAST_TOKEN: &str = "SELECT LAST_INSERT_ID()";
/// The last token given for a lock.
pub(super) const TOKEN_OF: &str = "SELECT token FROM tower_lock_fencing_tokens WHERE lock_name = ?";

/// The records' table: a lock's stored record (the idempotency layer's response) until it
/// expires, or while it is held for some work, that work and its holder's session.
pub(super) const RECORDS_TABLE: &str = "CREATE TABLE IF NOT EXISTS tower_lock_records (\
    lock_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PRIMARY KEY, \
    work VARBINARY(255) NULL, holder BIGINT UNSIGNED NULL, value LONGBLOB NULL, \
    expires_at TIMESTAMP(6) NULL, INDEX tower_lock_records_expires_at (expires_at))";
/// A lock's record in force.
pub(super) const RECORD_OF: &str = "SELECT value FROM tower_lock_records \
    WHERE lock_name = ? AND value IS NOT NULL AND expires_at > NOW(6)";
/// The holder's session marks the lock as held for its work (a row whose record expired is
/// reused).
pub(super) const MARK_WORK: &str = "INSERT INTO tower_lock_records \
    (lock_name, work, holder, value, expires_at) VALUES (?, ?, CONNECTION_ID(), NULL, NULL) \
    ON DUPLICATE KEY UPDATE value = NULL, expires_at = NULL, work = VALUES(work), \
    holder = VALUES(holder)";
/// The work a lock is held for, if its marking session still holds it.
pub(super) const WORK_OF_HOLDER: &str = "SELECT work FROM tower_lock_records \
    WHERE lock_name = ? AND value IS NULL AND holder = IS_USED_LOCK(?)";
/// The holder's session stores the record (before it releases the lock): `?` the name,
/// the record, its retention in microseconds.
pub(super) const STORE_RECORD: &str = "INSERT INTO tower_lock_records \
    (lock_name, work, holder, value, expires_at) \
    VALUES (?, NULL, NULL, ?, NOW(6) + INTERVAL ? MICROSECOND) \
    ON DUPLICATE KEY UPDATE work = NULL, holder = NULL, value = VALUES(value), \
    expires_at = VALUES(expires_at)";
/// The holder's mark taken back (released without a record).
pub(super) const CLEAR_WORK: &str = "DELETE FROM tower_lock_records \
    WHERE lock_name = ? AND value IS NULL AND holder = CONNECTION_ID()";
/// Expired records, a hundred at a time.
pub(super) const SWEEP: &str = "DELETE FROM tower_lock_records WHERE expires_at < NOW(6) LIMIT 100";

/// A wait as `GET_LOCK`'s timeout, in seconds: MariaDB takes fractions (at least a
/// millisecond: 0 is a try); MySQL whole seconds, so a wait is rounded up there (the
/// acquirer calls it off at its own deadline), never down to a try that would leave the
/// waiter with nothing to wake it.
pub(super) fn timeout_seconds(wait: Duration, fractions: bool) -> f64 {
    if fractions {
        (wait.as_secs_f64() * 1000.0).ceil().max(1.0) / 1000.0
    } else {
        wait.as_secs_f64().ceil().max(1.0)
    }
}

/// Whether `error` ends the session (the connection broke, the server ended it): its holds
/// are gone with it.
pub(super) fn ends_session(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) => true,
        sqlx::Error::Database(db) => {
            let number = db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .map(|e| e.number());
            // Server shutdown in progress; connection killed; lost connection.
            matches!(number, Some(1053 | 1927 | 2006 | 2013))
        }
        _ => false,
    }
}

/// Whether `error` says the lock name is too long for the server.
pub(super) fn name_too_long(error: &sqlx::Error) -> bool {
    let number = error
        .as_database_error()
        .and_then(|db| db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>())
        .map(|e| e.number());
    matches!(number, Some(1059 | 3057))
}

/// A server error as the backend's, saying what was being done.
pub(super) fn failed(what: &str, error: sqlx::Error) -> BackendError {
    BackendError::with_source(format!("MySQL: could not {what}"), error)
}
