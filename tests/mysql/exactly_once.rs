//! Exactly-once effects on MySQL: a handler's writes in its request's transaction are
//! committed with the stored response, or not at all — when the response is not stored,
//! and when the run's lock was lost and another run of the key committed first (it rolls
//! back and answers the first's response).

use std::sync::Arc;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use sqlx::mysql::MySqlPool;
use tokio::sync::Notify;
use tower_lock::backend::{mysql_lock_name, MySqlBackend};
use tower_lock::idempotency::{
    IdempotencyKey, IdempotencyLayer, IdempotentMySqlTransaction, Transactions,
};
use tower_lock::LockManager;

use crate::support::exactly_once::{
    a_lost_lock_rolls_back_behind_the_run_that_committed,
    committed_with_the_response_or_not_at_all, LostLock,
};
use crate::support::http::serve;
use crate::support::{self, mariadb};

/// A table of effects of its own (InnoDB): one row per handler run that committed.
async fn effects_table(pool: &MySqlPool) -> String {
    let table = format!("effects_{}", support::unique("e").replace([':', '-'], "_"));
    sqlx::query(&format!(
        "CREATE TABLE {table} (k VARCHAR(200) NOT NULL, note VARCHAR(200) NOT NULL) ENGINE=InnoDB"
    ))
    .execute(pool)
    .await
    .unwrap();
    table
}

async fn committed(pool: &MySqlPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT COUNT(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The app: `POST /{status}` writes a row in the request's transaction, then waits for
/// `gate` if given (once), and answers `status` and `ran by <label>`.
fn app(
    backend: &MySqlBackend,
    locks: &LockManager,
    table: &str,
    namespace: &str,
    label: &'static str,
    gate: Option<Arc<Notify>>,
    entered: Arc<Notify>,
) -> Router {
    let table = table.to_owned();
    let handler = move |Path(status): Path<u16>,
                        key: axum::Extension<IdempotencyKey>,
                        tx: IdempotentMySqlTransaction| {
        let (table, gate, entered) = (table.clone(), gate.clone(), entered.clone());
        async move {
            let mut conn = tx.conn().await.unwrap();
            sqlx::query(&format!("INSERT INTO {table} VALUES (?, ?)"))
                .bind(&key.0 .0)
                .bind(format!("status {status}"))
                .execute(&mut *conn)
                .await
                .unwrap();
            drop(conn);
            entered.notify_one();
            if let Some(gate) = gate {
                gate.notified().await;
            }
            (
                StatusCode::from_u16(status).unwrap(),
                format!("ran by {label}"),
            )
        }
    };
    Router::new().route("/{status}", post(handler)).route_layer(
        IdempotencyLayer::new()
            .namespace(namespace)
            .manager(locks.clone())
            .transactions(Transactions::mysql(backend)),
    )
}

/// The handler's row and its response are committed together, or not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effects_are_committed_with_the_response_or_not_at_all() {
    let pool = MySqlPool::connect(&mariadb::shared_url()).await.unwrap();
    let table = effects_table(&pool).await;
    let backend = MySqlBackend::new(&pool);
    let locks = LockManager::builder().backend(backend.clone());
    let namespace = support::unique("once");
    let addr = serve(app(
        &backend,
        &locks,
        &table,
        &namespace,
        "the app",
        None,
        Arc::default(),
    ))
    .await;
    committed_with_the_response_or_not_at_all(addr, &locks, || committed(&pool, &table)).await;
}

/// A run whose session is killed while its handler runs rolls back behind the run that
/// took the key and committed first, and answers that run's response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_lost_its_lock_rolls_back_behind_the_one_that_committed() {
    let pool = MySqlPool::connect(&mariadb::shared_url()).await.unwrap();
    let table = effects_table(&pool).await;
    let (slow, fast) = (MySqlBackend::new(&pool), MySqlBackend::new(&pool));
    let slow_locks = LockManager::builder().backend(slow.clone());
    let fast_locks = LockManager::builder().backend(fast.clone());
    let (gate, entered) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    // Both apps share a namespace: the same key is the same lock.
    let namespace = support::unique("lost");
    let slow_app = app(
        &slow,
        &slow_locks,
        &table,
        &namespace,
        "slow",
        Some(gate.clone()),
        entered.clone(),
    );
    let fast_app = app(
        &fast,
        &fast_locks,
        &table,
        &namespace,
        "fast",
        None,
        Arc::default(),
    );
    let apps = LostLock::serve((slow_app, slow_locks), fast_app, (gate, entered)).await;
    let pool = &pool;
    let end_session = move |lock_name: String| async move {
        let holder: Option<i64> = sqlx::query_scalar("SELECT IS_USED_LOCK(?)")
            .bind(mysql_lock_name(&lock_name))
            .fetch_one(pool)
            .await
            .unwrap();
        sqlx::query(&format!("KILL {}", holder.expect("held")))
            .execute(pool)
            .await
            .unwrap();
    };
    a_lost_lock_rolls_back_behind_the_run_that_committed(apps, end_session, || {
        committed(pool, &table)
    })
    .await;
}
