//! Exactly-once effects on PostgreSQL: a handler's writes and its stored response in one
//! transaction ([`IdempotentTransaction`]), committed together or not at all.
//!
//! The layer begins the transaction when the handler first asks for it, on the pool of the
//! PostgreSQL backend ([`Transactions`]). Once the handler has answered, the layer writes
//! the response as the key's record in that transaction and commits: the effects and the
//! record land in one commit. A crash, a lost session or a failed commit rolls both back,
//! so a retry with the key runs the handler again with nothing half-done. The record is
//! written only if no run of the key committed one first (a run whose lock was lost while
//! another took the key): the later commit finds it and rolls back, and its client gets the
//! first run's response. A response that is not stored (a `5xx`, `no-store`) rolls the
//! transaction back.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;
use sqlx::postgres::{PgConnection, PgPool, Postgres};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use super::rejection::IdempotencyRejection;
use crate::backend::PostgresBackend;

/// How soon to retry a request whose work could not be committed.
const NOT_COMMITTED_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Handlers' transactions for an idempotency layer, on the pool and tables of a
/// PostgreSQL backend (give it to [`IdempotencyLayer::transactions`]).
///
/// [`IdempotencyLayer::transactions`]: super::IdempotencyLayer::transactions
#[derive(Clone)]
pub struct Transactions {
    pool: PgPool,
    store: Arc<str>,
    read: Arc<str>,
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions").finish_non_exhaustive()
    }
}

impl Transactions {
    /// Transactions on `backend`'s pool, with the response stored in its tables (the
    /// layer's manager must be on this backend, or one with the same schema).
    pub fn new(backend: &PostgresBackend) -> Self {
        Transactions {
            pool: backend.pool().clone(),
            store: backend.record_in_transaction_sql().into(),
            read: backend.record_of_sql().into(),
        }
    }
}

/// The request's transaction, for a handler behind an [`IdempotencyLayer`] with
/// [`transactions`]: what the handler writes with it is committed together with its stored
/// response, or not at all (see `docs/postgres.md`).
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
/// transactions.
///
/// [`IdempotencyLayer`]: super::IdempotencyLayer
/// [`transactions`]: super::IdempotencyLayer::transactions
#[derive(Clone)]
pub struct IdempotentTransaction(Arc<Slot>);

/// The request's transaction slot.
struct Slot {
    pool: PgPool,
    state: Mutex<State>,
}

/// Where the request's transaction stands.
enum State {
    NotBegun,
    Open(sqlx::Transaction<'static, Postgres>),
    /// The layer ended it (or found none) once the handler answered.
    Ended,
}

impl std::fmt::Debug for IdempotentTransaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotentTransaction")
            .finish_non_exhaustive()
    }
}

impl IdempotentTransaction {
    fn new(transactions: &Transactions) -> Self {
        IdempotentTransaction(Arc::new(Slot {
            pool: transactions.pool.clone(),
            state: Mutex::new(State::NotBegun),
        }))
    }

    /// The transaction's connection, the transaction begun if this is the first use.
    ///
    /// # Errors
    /// When the transaction cannot be begun (no connection from the pool), or the layer
    /// already ended it (a task of the handler's that outlived its response).
    ///
    /// # Cancel safety
    /// Cancel safe: a transaction begun for a dropped call is the request's all the same.
    pub async fn conn(&self) -> Result<MappedMutexGuard<'_, PgConnection>, sqlx::Error> {
        let mut state = self.0.state.lock().await;
        match *state {
            State::Open(_) => {}
            State::NotBegun => *state = State::Open(self.0.pool.begin().await?),
            State::Ended => {
                return Err(sqlx::Error::Protocol(
                    "the request's transaction was already ended by the idempotency layer \
                     (its handler had answered)"
                        .into(),
                ))
            }
        }
        MutexGuard::try_map(state, |state| match state {
            State::Open(tx) => Some(&mut **tx),
            _ => None,
        })
        .map_err(|_| sqlx::Error::Protocol("the request's transaction is not open".into()))
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

/// The request's transaction slot, put in its extensions for the handler.
pub(super) fn slot(transactions: &Transactions, parts: &mut Parts) -> IdempotentTransaction {
    let slot = IdempotentTransaction::new(transactions);
    parts.extensions.insert(slot.clone());
    slot
}

/// What became of a handler's transaction once it answered.
pub(super) enum Ended {
    /// The handler never began one: the response is stored the usual way.
    NotBegun,
    /// Committed with the response as the key's record.
    Committed,
    /// Rolled back: the response was not to be stored.
    RolledBack,
    /// Rolled back: another run of the key committed first; this is its record.
    Superseded(bytes::Bytes),
    /// Not committed: nothing was applied.
    Failed(Response),
}

/// Ends the handler's transaction: commits it with `record` (the response to store, under
/// `lock_key`, kept `retention`), or rolls it back when there is nothing to store.
pub(super) async fn end(
    transactions: &Transactions,
    slot: IdempotentTransaction,
    lock_key: &str,
    record: Option<bytes::Bytes>,
    retention: Duration,
) -> Ended {
    let mut tx = match std::mem::replace(&mut *slot.0.state.lock().await, State::Ended) {
        State::Open(tx) => tx,
        State::NotBegun | State::Ended => return Ended::NotBegun,
    };
    let Some(record) = record else {
        let _ = tx.rollback().await;
        return Ended::RolledBack;
    };
    let retention = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
    let stored = sqlx::query(&transactions.store)
        .bind(lock_key)
        .bind(record.as_ref())
        .bind(retention)
        .execute(&mut *tx)
        .await;
    let failed = |error: sqlx::Error| {
        Ended::Failed(axum::response::IntoResponse::into_response(
            IdempotencyRejection::NotCommitted {
                error: error.to_string(),
                retry_after: NOT_COMMITTED_RETRY_AFTER,
            },
        ))
    };
    match stored {
        Ok(done) if done.rows_affected() == 1 => match tx.commit().await {
            Ok(()) => Ended::Committed,
            Err(error) => failed(error),
        },
        Ok(_) => {
            let _ = tx.rollback().await;
            match sqlx::query_scalar::<_, Vec<u8>>(&transactions.read)
                .bind(lock_key)
                .fetch_optional(&transactions.pool)
                .await
            {
                Ok(Some(first)) => Ended::Superseded(first.into()),
                Ok(None) => failed(sqlx::Error::RowNotFound),
                Err(error) => failed(error),
            }
        }
        Err(error) => {
            let _ = tx.rollback().await;
            failed(error)
        }
    }
}
