//! The PostgreSQL backend from outside: processes that exclude each other and a killed
//! holder's lock that goes to the next at once (`processes`); sessions ended by the server,
//! a restart, a thousand waiters on a few connections, waiters that send nothing while
//! they wait (`sessions`); a handler's writes committed with its stored response or not at
//! all (`exactly_once`). A real server, started by the test support (`support::postgres`).
//! The conformance suite runs on PostgreSQL in `tests/behaviour`.

#[path = "../support/mod.rs"]
mod support;

mod exactly_once;
mod processes;
mod sessions;

use sqlx::postgres::{PgPool, PgPoolOptions};
use tower_lock::backend::{AdvisoryKey, PostgresBackend};
use tower_lock::manager::LockManagerBuilder;
use tower_lock::LockManager;

/// A pool on `url` that connects when first used (as a process's would).
fn pool(url: &str) -> PgPool {
    PgPoolOptions::new()
        .max_connections(4)
        .connect_lazy(url)
        .expect("a pool for the test PostgreSQL")
}

/// A manager on its own backend (another process's, as far as the server can tell).
fn manager(url: &str) -> (LockManager, PostgresBackend) {
    manager_with(url, |builder| builder)
}

/// [`manager`] with settings of its own.
fn manager_with(
    url: &str,
    configure: impl FnOnce(LockManagerBuilder) -> LockManagerBuilder,
) -> (LockManager, PostgresBackend) {
    let backend = PostgresBackend::new(&pool(url));
    (
        configure(LockManager::builder()).backend(backend.clone()),
        backend,
    )
}

/// The server processes that hold (`granted`) or wait for the advisory key of `name`.
async fn sessions_of(pool: &PgPool, name: &str, granted: bool) -> Vec<i32> {
    let (classid, objid, objsubid) = match AdvisoryKey::from_name(name) {
        AdvisoryKey::Single(key) => ((key >> 32) as u32, key as u32, 1i16),
        AdvisoryKey::Pair(first, second) => (first as u32, second as u32, 2i16),
    };
    sqlx::query_scalar(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted = $4 \
         AND classid = $1::int8::oid AND objid = $2::int8::oid AND objsubid = $3 ORDER BY pid",
    )
    .bind(i64::from(classid))
    .bind(i64::from(objid))
    .bind(objsubid)
    .bind(granted)
    .fetch_all(pool)
    .await
    .expect("read pg_locks")
}

/// The kinds this backend does not have are refused before anything reaches the server,
/// saying why.
#[tokio::test]
async fn missing_kinds_are_refused_with_the_reason() {
    let (locks, backend) = manager(&support::postgres::shared_url());
    for (request, starts) in [
        (
            locks.fair_lock("order:1"),
            "fair locks (an order across processes",
        ),
        (
            locks.semaphore("order:1", 3),
            "semaphore locks (advisory locks cannot count",
        ),
    ] {
        match request.acquire().await {
            Err(tower_lock::LockError::Unsupported { backend, what }) => {
                assert_eq!(backend, "postgres");
                assert!(what.starts_with(starts), "{what}");
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
    assert_eq!(backend.statements_sent(), 0, "nothing reached the server");
}
