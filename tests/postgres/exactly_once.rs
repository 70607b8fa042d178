//! Exactly-once effects: a handler's writes in its request's transaction are committed with
//! the stored response, or not at all — when the response is not stored, when the process
//! crashes between the writes and the commit (the retry runs once), and when the run's lock
//! was lost and another run of the key committed first (it rolls back and answers the
//! first's response).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use sqlx::postgres::PgPool;
use tokio::sync::Notify;
use tower_lock::backend::PostgresBackend;
use tower_lock::idempotency::{
    IdempotencyKey, IdempotencyLayer, IdempotentTransaction, Transactions,
};
use tower_lock::LockManager;

use crate::support;
use crate::support::exactly_once::{
    a_lost_lock_rolls_back_behind_the_run_that_committed,
    committed_with_the_response_or_not_at_all, post_with_key, LostLock,
};
use crate::support::http::serve;

/// A table of effects of its own: one row per handler run that committed.
async fn effects_table(pool: &PgPool) -> String {
    let table = format!("effects_{}", support::unique("e").replace([':', '-'], "_"));
    sqlx::query(&format!(
        "CREATE TABLE {table} (key text NOT NULL, note text NOT NULL)"
    ))
    .execute(pool)
    .await
    .unwrap();
    table
}

async fn committed(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The app: `POST /{status}` writes a row in the request's transaction, then waits for
/// `gate` if given (once), and answers `status` and `ran by <label>`; its idempotency keys
/// are in `namespace`.
fn app(
    backend: &PostgresBackend,
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
                        tx: IdempotentTransaction| {
        let (table, gate, entered) = (table.clone(), gate.clone(), entered.clone());
        async move {
            let mut conn = tx.conn().await.unwrap();
            sqlx::query(&format!("INSERT INTO {table} VALUES ($1, $2)"))
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
            .transactions(Transactions::new(backend)),
    )
}

/// The handler's row and its response are committed together, or not at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn effects_are_committed_with_the_response_or_not_at_all() {
    let url = support::postgres::shared_url();
    let pool = PgPool::connect(&url).await.unwrap();
    let table = effects_table(&pool).await;
    let backend = PostgresBackend::new(&pool);
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

/// A run whose session ends while its handler runs rolls back behind the run that took the
/// key and committed first, and answers that run's response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_lost_its_lock_rolls_back_behind_the_one_that_committed() {
    let url = support::postgres::shared_url();
    let pool = PgPool::connect(&url).await.unwrap();
    let table = effects_table(&pool).await;
    let (slow, fast) = (PostgresBackend::new(&pool), PostgresBackend::new(&pool));
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
        let holders = crate::sessions_of(pool, &lock_name, true).await;
        assert_eq!(holders.len(), 1);
        let _: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(holders[0])
            .fetch_one(pool)
            .await
            .unwrap();
    };
    a_lost_lock_rolls_back_behind_the_run_that_committed(apps, end_session, || {
        committed(pool, &table)
    })
    .await;
}

/// The payments example, killed between a payment's writes and its commit: nothing was
/// applied; the retry after a restart pays once, and a repetition is replayed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_before_the_commit_applies_nothing_and_the_retry_pays_once() {
    let server = support::postgres::Postgres::start();
    let url = server.url();
    let start = |pause: &str| -> (Child, std::net::SocketAddr) {
        let mut child = Command::new(support::example("payments"))
            .env("DATABASE_URL", &url)
            .env("PORT", "0")
            .env("PAUSE_AFTER_WRITE_MS", pause)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
        let first = lines.next().unwrap().unwrap();
        let addr = first
            .strip_prefix("payments on http://")
            .unwrap_or_else(|| panic!("the example's first line: {first}"))
            .parse()
            .unwrap();
        // The rest of its output is read (and dropped), so that it never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        (child, addr)
    };
    let balance = || async {
        let pool = PgPool::connect(&url).await.unwrap();
        let row: (i64, i64) = sqlx::query_as(
            "SELECT (SELECT balance FROM accounts WHERE id = 7), (SELECT count(*) FROM payments)",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        row
    };

    let (mut crashing, addr) = start("600000");
    let pay = tokio::spawn(async move {
        post_with_key(addr, "/accounts/7/pay", "pay-1", r#"{"amount":10}"#).await
    });
    support::eventually("the payment's writes are done", || async {
        let pool = PgPool::connect(&url).await.ok()?;
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle in transaction'",
        )
        .fetch_one(&pool)
        .await
        .ok()?;
        (waiting > 0).then_some(())
    })
    .await;
    crashing.kill().unwrap(); // SIGKILL between the writes and the commit
    let _ = crashing.wait();
    let _ = pay.await; // its client lost the connection
    assert_eq!(
        balance().await,
        (1000, 0),
        "nothing of the crashed payment applied"
    );

    let (mut restarted, addr) = start("0");
    let retry = post_with_key(addr, "/accounts/7/pay", "pay-1", r#"{"amount":10}"#).await;
    assert_eq!(retry.status, 201, "{}", retry.body);
    assert_eq!(retry.header("idempotent-replayed"), None);
    assert_eq!(balance().await, (990, 1), "paid once");
    let again = post_with_key(addr, "/accounts/7/pay", "pay-1", r#"{"amount":10}"#).await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, retry.body);
    assert_eq!(balance().await, (990, 1), "still paid once");
    restarted.kill().unwrap();
    let _ = restarted.wait();
}
