//! The exactly-once checks that both databases' idempotent transactions pass (PostgreSQL's
//! and MySQL's tests give each its app, its count of committed rows and, for a lost lock,
//! how to end the holding session): a handler's row is committed with its stored response,
//! or not at all.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::Notify;
use tower_lock::LockManager;

use super::http::{read, send_body, Reply};

/// `POST path` with the idempotency key `key` (quoted, as the draft's header) and a JSON
/// `body`.
pub async fn post_with_key(addr: SocketAddr, path: &str, key: &str, body: &str) -> Reply {
    let key = format!("\"{key}\"");
    let headers = [
        ("idempotency-key", key.as_str()),
        ("content-type", "application/json"),
    ];
    read(send_body(addr, "POST", path, &headers, body).await).await
}

/// The handler's row and its response are committed together: a repetition is replayed
/// and nothing more is written; a response that is not stored (a 5xx) rolls its writes
/// back, and the retry runs again. `addr` serves the app whose `POST /{status}` writes a
/// row and answers `status`; `committed` counts the rows.
pub async fn committed_with_the_response_or_not_at_all<F, Fut>(
    addr: SocketAddr,
    locks: &LockManager,
    committed: F,
) where
    F: Fn() -> Fut,
    Fut: Future<Output = i64>,
{
    let first = post_with_key(addr, "/201", "k-1", "").await;
    assert_eq!(first.status, 201, "{}", first.body);
    assert_eq!(committed().await, 1);
    let again = post_with_key(addr, "/201", "k-1", "").await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body, first.body);
    assert_eq!(committed().await, 1, "a replay writes nothing");

    let failed = post_with_key(addr, "/503", "k-2", "").await;
    assert_eq!(failed.status, 503);
    assert_eq!(committed().await, 1, "not stored: rolled back");
    let retried = post_with_key(addr, "/503", "k-2", "").await;
    assert_eq!(retried.status, 503);
    assert_eq!(retried.header("idempotent-replayed"), None, "it ran again");
    assert_eq!(committed().await, 1);
    super::nothing_left_behind(locks).await;
}

/// Two apps on one namespace, each on its own manager (two processes): the slow one's
/// handler writes its row, tells `entered`, then waits for `gate`; the fast one answers at
/// once. Each answers `ran by slow` or `ran by fast`.
pub struct LostLock {
    pub slow: SocketAddr,
    pub slow_locks: LockManager,
    pub fast: SocketAddr,
    pub gate: Arc<Notify>,
    pub entered: Arc<Notify>,
}

impl LostLock {
    /// Serves `slow_app` (on `slow_locks`, waiting for `gate`) and `fast_app`.
    pub async fn serve(
        (slow_app, slow_locks): (axum::Router, LockManager),
        fast_app: axum::Router,
        (gate, entered): (Arc<Notify>, Arc<Notify>),
    ) -> LostLock {
        LostLock {
            slow: super::http::serve(slow_app).await,
            slow_locks,
            fast: super::http::serve(fast_app).await,
            gate,
            entered,
        }
    }
}

/// A run whose lock is lost while its handler runs (`end_session` ends the session holding
/// the lock named as given), and a second run of the key that takes the lock and commits
/// first: the first run's commit finds the second's record, rolls back, and answers the
/// second's response. One run's effects.
pub async fn a_lost_lock_rolls_back_behind_the_run_that_committed<E, EFut, C, CFut>(
    apps: LostLock,
    end_session: E,
    committed: C,
) where
    E: FnOnce(String) -> EFut,
    EFut: Future<Output = ()>,
    C: Fn() -> CFut,
    CFut: Future<Output = i64>,
{
    let slow = apps.slow;
    let first = tokio::spawn(async move { post_with_key(slow, "/201", "k", "").await });
    apps.entered.notified().await;
    let lock_name = super::eventually("the first run holds its key", || async {
        apps.slow_locks
            .local_holds()
            .first()
            .map(|hold| hold.key.as_str().to_owned())
    })
    .await;
    // Behind the first run's back.
    end_session(lock_name).await;
    let second = post_with_key(apps.fast, "/201", "k", "").await;
    assert_eq!(second.body, "ran by fast", "the second run took the key");
    apps.gate.notify_one();
    let first = first.await.unwrap();
    assert_eq!(first.status, 201);
    assert_eq!(first.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        first.body, "ran by fast",
        "the first run answers the second's response"
    );
    assert_eq!(committed().await, 1, "one run's effects");
}
