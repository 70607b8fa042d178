//! The request's transaction on PostgreSQL.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRequestParts;
use http::request::Parts;
use sqlx::postgres::{PgConnection, PgPool, Postgres};
use tokio::sync::MappedMutexGuard;

use super::{not_committed, Ended, Slot};
use crate::backend::PostgresBackend;
use crate::idempotency::rejection::IdempotencyRejection;

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
/// The transaction begins when first asked for ([`conn`](Self::conn)); the layer commits
/// it after the handler answered. The handler must not commit it (it cannot: it only
/// borrows the connection).
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
/// # Rejection
/// [`IdempotencyRejection::NoTransaction`] (500) when the route's layer has no
/// transactions (or has MySQL's).
///
/// [`IdempotencyLayer`]: crate::idempotency::IdempotencyLayer
/// [`transactions`]: crate::idempotency::IdempotencyLayer::transactions
#[derive(Clone)]
pub struct IdempotentTransaction(pub(super) Arc<Slot<Postgres>>);

impl std::fmt::Debug for IdempotentTransaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotentTransaction")
            .finish_non_exhaustive()
    }
}

impl IdempotentTransaction {
    /// The transaction's connection, the transaction begun if this is the first use.
    ///
    /// # Errors
    /// When the transaction cannot be begun (no connection from the pool), or the layer
    /// already ended it (a task of the handler's that outlived its response).
    ///
    /// # Cancel safety
    /// Cancel safe: a transaction begun for a dropped call is the request's all the same.
    pub async fn conn(&self) -> Result<MappedMutexGuard<'_, PgConnection>, sqlx::Error> {
        self.0.conn().await
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotentTransaction {
    type Rejection = IdempotencyRejection;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<IdempotentTransaction>()
            .cloned()
            .ok_or(IdempotencyRejection::NoTransaction)
    }
}

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
