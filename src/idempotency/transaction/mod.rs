//! Exactly-once effects on a database: a handler's writes and its stored response in one
//! transaction, committed together or not at all (PostgreSQL: [`IdempotentTransaction`];
//! MySQL / MariaDB: [`IdempotentMySqlTransaction`]).
//!
//! The layer begins the transaction when the handler first asks for it, on the pool of the
//! backend ([`Transactions`]). Once the handler has answered, the layer writes the response
//! as the key's record in that transaction and commits: the effects and the record land in
//! one commit. A crash, a lost session or a failed commit rolls both back, so a retry with
//! the key runs the handler again with nothing half-done. The record is written only if no
//! run of the key committed one first (a run whose lock was lost while another took the
//! key): the later run finds it and rolls back, and its client gets the first run's
//! response. A response that is not stored (a `5xx`, `no-store`) rolls the transaction back.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::FromRequestParts;
use axum::response::Response;
use http::request::Parts;
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use super::rejection::IdempotencyRejection;

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;

#[cfg(feature = "mysql")]
pub use mysql::IdempotentMySqlTransaction;
#[cfg(feature = "postgres")]
pub use postgres::IdempotentTransaction;

/// How soon to retry a request whose work could not be committed.
const NOT_COMMITTED_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Handlers' transactions for an idempotency layer, on the pool and tables of a PostgreSQL
/// or MySQL backend (give it to [`IdempotencyLayer::transactions`]).
///
/// [`IdempotencyLayer::transactions`]: super::IdempotencyLayer::transactions
#[derive(Clone)]
pub struct Transactions(Database);

#[derive(Clone)]
enum Database {
    #[cfg(feature = "postgres")]
    Postgres(postgres::PgTransactions),
    #[cfg(feature = "mysql")]
    MySql(sqlx::mysql::MySqlPool),
}

impl std::fmt::Debug for Transactions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transactions").finish_non_exhaustive()
    }
}

impl Transactions {
    /// Transactions on a PostgreSQL backend's pool, with the response stored in its tables
    /// (the layer's manager must be on this backend, or one with the same schema). Handlers
    /// take [`IdempotentTransaction`].
    #[cfg(feature = "postgres")]
    pub fn new(backend: &crate::backend::PostgresBackend) -> Self {
        Transactions(Database::Postgres(postgres::PgTransactions::new(backend)))
    }

    /// Transactions on a MySQL backend's pool, with the response stored in its records'
    /// table (the layer's manager must be on this backend's server). Handlers take
    /// [`IdempotentMySqlTransaction`].
    #[cfg(feature = "mysql")]
    pub fn mysql(backend: &crate::backend::MySqlBackend) -> Self {
        Transactions(Database::MySql(backend.pool().clone()))
    }
}

/// A request's transaction on the database `DB`, for a handler behind an
/// [`IdempotencyLayer`](super::IdempotencyLayer) with
/// [`transactions`](super::IdempotencyLayer::transactions): what the handler writes with it
/// is committed together with its stored response, or not at all. Named per database:
/// `IdempotentTransaction` (PostgreSQL), `IdempotentMySqlTransaction` (MySQL).
///
/// # Rejection
/// [`IdempotencyRejection::NoTransaction`] (500) when the route's layer has no transactions
/// on this database.
pub struct IdempotentDbTransaction<DB: sqlx::Database>(Arc<Slot<DB>>);

impl<DB: sqlx::Database> Clone for IdempotentDbTransaction<DB> {
    fn clone(&self) -> Self {
        IdempotentDbTransaction(self.0.clone())
    }
}

impl<DB: sqlx::Database> std::fmt::Debug for IdempotentDbTransaction<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdempotentDbTransaction")
            .field("database", &DB::NAME)
            .finish_non_exhaustive()
    }
}

impl<DB: sqlx::Database> IdempotentDbTransaction<DB> {
    /// The transaction's connection, the transaction begun if this is the first use.
    ///
    /// # Errors
    /// When the transaction cannot be begun (no connection from the pool), or the layer
    /// already ended it (a task of the handler's that outlived its response).
    ///
    /// # Cancel safety
    /// Cancel safe: a transaction begun for a dropped call is the request's all the same.
    pub async fn conn(&self) -> Result<MappedMutexGuard<'_, DB::Connection>, sqlx::Error> {
        self.0.conn().await
    }
}

impl<S: Send + Sync, DB: sqlx::Database> FromRequestParts<S> for IdempotentDbTransaction<DB> {
    type Rejection = IdempotencyRejection;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<IdempotentDbTransaction<DB>>()
            .cloned()
            .ok_or(IdempotencyRejection::NoTransaction)
    }
}

/// One request's transaction: begun when first asked for, ended by the layer.
pub(crate) struct Slot<DB: sqlx::Database> {
    pool: sqlx::Pool<DB>,
    state: Mutex<State<DB>>,
}

/// Where the request's transaction stands.
enum State<DB: sqlx::Database> {
    NotBegun,
    Open(sqlx::Transaction<'static, DB>),
    /// The layer ended it (or found none) once the handler answered.
    Ended,
}

impl<DB: sqlx::Database> Slot<DB> {
    fn new(pool: sqlx::Pool<DB>) -> Arc<Self> {
        Arc::new(Slot {
            pool,
            state: Mutex::new(State::NotBegun),
        })
    }

    /// The transaction's connection, the transaction begun if this is the first use.
    async fn conn(&self) -> Result<MappedMutexGuard<'_, DB::Connection>, sqlx::Error> {
        let mut state = self.state.lock().await;
        match *state {
            State::Open(_) => {}
            State::NotBegun => *state = State::Open(self.pool.begin().await?),
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

    /// The open transaction, taken for the layer to end (`None`: never begun).
    async fn take(&self) -> Option<sqlx::Transaction<'static, DB>> {
        match std::mem::replace(&mut *self.state.lock().await, State::Ended) {
            State::Open(tx) => Some(tx),
            State::NotBegun | State::Ended => None,
        }
    }
}

/// A request's transaction slot, on the layer's side.
pub(crate) enum SlotHandle {
    #[cfg(feature = "postgres")]
    Postgres(Arc<Slot<sqlx::Postgres>>),
    #[cfg(feature = "mysql")]
    MySql(Arc<Slot<sqlx::MySql>>),
}

/// The request's transaction slot, put in its extensions for the handler.
pub(super) fn slot(transactions: &Transactions, parts: &mut Parts) -> SlotHandle {
    match &transactions.0 {
        #[cfg(feature = "postgres")]
        Database::Postgres(pg) => {
            let slot = Slot::new(pg.pool.clone());
            parts
                .extensions
                .insert(IdempotentDbTransaction(slot.clone()));
            SlotHandle::Postgres(slot)
        }
        #[cfg(feature = "mysql")]
        Database::MySql(pool) => {
            let slot = Slot::new(pool.clone());
            parts
                .extensions
                .insert(IdempotentDbTransaction(slot.clone()));
            SlotHandle::MySql(slot)
        }
    }
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

/// The answer to a transaction that could not be committed.
fn not_committed(error: sqlx::Error) -> Ended {
    Ended::Failed(axum::response::IntoResponse::into_response(
        IdempotencyRejection::NotCommitted {
            error: error.to_string(),
            retry_after: NOT_COMMITTED_RETRY_AFTER,
        },
    ))
}

/// Ends the handler's transaction: commits it with `record` (the response to store, under
/// `lock_key`, kept `retention`), or rolls it back when there is nothing to store.
pub(super) async fn end(
    transactions: &Transactions,
    slot: SlotHandle,
    lock_key: &str,
    record: Option<bytes::Bytes>,
    retention: Duration,
) -> Ended {
    match (&transactions.0, slot) {
        #[cfg(feature = "postgres")]
        (Database::Postgres(pg), SlotHandle::Postgres(slot)) => match slot.take().await {
            Some(tx) => postgres::end(pg, tx, lock_key, record, retention).await,
            None => Ended::NotBegun,
        },
        #[cfg(feature = "mysql")]
        (Database::MySql(_), SlotHandle::MySql(slot)) => match slot.take().await {
            Some(tx) => mysql::end(tx, lock_key, record, retention).await,
            None => Ended::NotBegun,
        },
        #[allow(unreachable_patterns)]
        _ => Ended::NotBegun,
    }
}
