//! The request's transaction on MySQL / MariaDB (InnoDB tables).

use std::time::Duration;

use sqlx::mysql::MySql;

use super::{not_committed, Ended, IdempotentDbTransaction};

/// The key's record in force, locked for this transaction (a run that commits one at the
/// same time waits for it, then reads it).
const RECORD_FOR_UPDATE: &str = "SELECT value FROM tower_lock_records \
    WHERE lock_name = ? AND value IS NOT NULL AND expires_at > NOW(6) FOR UPDATE";
/// The response as the key's record: the name, the record, its retention in microseconds.
const STORE: &str = "INSERT INTO tower_lock_records (lock_name, work, holder, value, expires_at) \
    VALUES (?, NULL, NULL, ?, NOW(6) + INTERVAL ? MICROSECOND) \
    ON DUPLICATE KEY UPDATE work = NULL, holder = NULL, value = VALUES(value), \
    expires_at = VALUES(expires_at)";

/// The request's transaction on MySQL or MariaDB, for a handler behind an
/// [`IdempotencyLayer`] with [`transactions`] made by [`Transactions::mysql`]: what the
/// handler writes with it (in InnoDB tables) is committed together with its stored response,
/// or not at all (see `docs/mysql.md`).
///
/// The transaction begins when first asked for ([`conn`](IdempotentDbTransaction::conn));
/// the layer commits it after the handler answered. The handler must not commit it, nor run
/// statements that commit implicitly (DDL such as `CREATE TABLE`).
///
/// # Examples
///
/// ```no_run
/// use axum::http::StatusCode;
/// use tower_lock::idempotency::IdempotentMySqlTransaction;
///
/// async fn pay(tx: IdempotentMySqlTransaction) -> Result<StatusCode, StatusCode> {
///     let mut conn = tx.conn().await.map_err(|_| StatusCode::SERVICE_UNAVAILABLE)?;
///     sqlx::query("UPDATE accounts SET balance = balance - 10 WHERE id = 7")
///         .execute(&mut *conn)
///         .await
///         .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;
///     Ok(StatusCode::CREATED)
/// }
/// ```
///
/// [`IdempotencyLayer`]: crate::idempotency::IdempotencyLayer
/// [`transactions`]: crate::idempotency::IdempotencyLayer::transactions
/// [`Transactions::mysql`]: crate::idempotency::Transactions::mysql
pub type IdempotentMySqlTransaction = IdempotentDbTransaction<MySql>;

/// Commits `tx` with `record` under `lock_key` (its server name) unless another run
/// committed one first.
pub(super) async fn end(
    mut tx: sqlx::Transaction<'static, MySql>,
    lock_key: &str,
    record: Option<bytes::Bytes>,
    retention: Duration,
) -> Ended {
    let Some(record) = record else {
        let _ = tx.rollback().await;
        return Ended::RolledBack;
    };
    let name = crate::backend::mysql_lock_name(lock_key);
    let first: Result<Option<Vec<u8>>, sqlx::Error> = sqlx::query_scalar(RECORD_FOR_UPDATE)
        .bind(&name)
        .fetch_optional(&mut *tx)
        .await;
    match first {
        Ok(Some(first)) => {
            let _ = tx.rollback().await;
            return Ended::Superseded(first.into());
        }
        Ok(None) => {}
        Err(error) => {
            let _ = tx.rollback().await;
            return not_committed(error);
        }
    }
    let micros = u64::try_from(retention.as_micros()).unwrap_or(u64::MAX);
    let stored = sqlx::query(STORE)
        .bind(&name)
        .bind(record.as_ref())
        .bind(micros)
        .execute(&mut *tx)
        .await;
    match stored {
        Ok(_) => match tx.commit().await {
            Ok(()) => Ended::Committed,
            Err(error) => not_committed(error),
        },
        Err(error) => {
            let _ = tx.rollback().await;
            not_committed(error)
        }
    }
}
