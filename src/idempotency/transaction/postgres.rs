//! The request's transaction on PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgPool, Postgres};

use super::{not_committed, Ended, IdempotentDbTransaction};
use crate::backend::PostgresBackend;

/// The pool and the statements of a PostgreSQL backend's records.
#[derive(Clone)]
pub(super) struct PgTransactions {
    pub(super) pool: PgPool,
    store: Arc<str>,
    read: Arc<str>,
}

impl PgTransactions {
    pub(super) fn new(backend: &PostgresBackend) -> Self {
        PgTransactions {
            pool: backend.pool().clone(),
            store: backend.record_in_transaction_sql().into(),
            read: backend.record_of_sql().into(),
        }
    }
}

/// The request's transaction on PostgreSQL, for a handler behind an [`IdempotencyLayer`]
/// with [`transactions`]: what the handler writes with it is committed together with its
/// stored response, or not at all (see `docs/postgres.md`).
///
/// The transaction begins when first asked for ([`conn`](IdempotentDbTransaction::conn));
/// the layer commits it after the handler answered. The handler must not commit it (it
/// cannot: it only borrows the connection).
///
/// # Examples
///
/// ```no_run
/// use axum::http::StatusCode;
/// use tower_lock::idempotency::IdempotentTransaction;
///
/// async fn pay(tx: IdempotentTransaction) -> Result<StatusCode, StatusCode> {
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
pub type IdempotentTransaction = IdempotentDbTransaction<Postgres>;

/// Commits `tx` with `record` under `lock_key` unless another run committed one first.
pub(super) async fn end(
    pg: &PgTransactions,
    mut tx: sqlx::Transaction<'static, Postgres>,
    lock_key: &str,
    record: Option<bytes::Bytes>,
    retention: Duration,
) -> Ended {
    let Some(record) = record else {
        let _ = tx.rollback().await;
        return Ended::RolledBack;
    };
    let retention = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
    let stored = sqlx::query(&pg.store)
        .bind(lock_key)
        .bind(record.as_ref())
        .bind(retention)
        .execute(&mut *tx)
        .await;
    match stored {
        Ok(done) if done.rows_affected() == 1 => match tx.commit().await {
            Ok(()) => Ended::Committed,
            Err(error) => not_committed(error),
        },
        Ok(_) => {
            let _ = tx.rollback().await;
            match sqlx::query_scalar::<_, Vec<u8>>(&pg.read)
                .bind(lock_key)
                .fetch_optional(&pg.pool)
                .await
            {
                Ok(Some(first)) => Ended::Superseded(first.into()),
                Ok(None) => not_committed(sqlx::Error::RowNotFound),
                Err(error) => not_committed(error),
            }
        }
        Err(error) => {
            let _ = tx.rollback().await;
            not_committed(error)
        }
    }
}
