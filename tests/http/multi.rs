//! `MultiLocked<(A, B)>` over HTTP: transfers between two accounts locked crosswise never
//! overlap nor deadlock; one account named twice is taken once; a busy account is the plain
//! lock's 409 and leaves the other account free; a bad value is a 400.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use axum::{Extension, Router};
use http::StatusCode;
use tower_lock::extract::{KeySource, Lockable, MultiLocked};
use tower_lock::lock::Released;
use tower_lock::LockManager;

use crate::helpers::oneshot;
use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

/// The account money leaves (path parameter `from`), locked as `account:<id>`.
pub struct From(pub u64);
/// The account money goes to (path parameter `to`), locked as `account:<id>`.
pub struct To(pub u64);

impl Lockable for From {
    fn source() -> KeySource {
        KeySource::path("from")
    }
    fn parse(raw: &str) -> Result<Self, String> {
        raw.parse()
            .map(From)
            .map_err(|_| format!("`{raw}` is not an account"))
    }
    fn lock_name(&self) -> String {
        format!("account:{}", self.0)
    }
}

impl Lockable for To {
    fn source() -> KeySource {
        KeySource::path("to")
    }
    fn parse(raw: &str) -> Result<Self, String> {
        raw.parse()
            .map(To)
            .map_err(|_| format!("`{raw}` is not an account"))
    }
    fn lock_name(&self) -> String {
        format!("account:{}", self.0)
    }
}

fn app(locks: LockManager, inside: Arc<[AtomicUsize; 2]>) -> Router {
    let transfer = move |accounts: MultiLocked<(From, To)>| {
        let inside = inside.clone();
        async move {
            let (from, to) = &*accounts;
            for id in [from.0, to.0] {
                if id < 2 {
                    assert_eq!(inside[id as usize].fetch_add(1, Ordering::SeqCst), 0);
                }
            }
            tokio::task::yield_now().await;
            for id in [from.0, to.0] {
                if id < 2 {
                    inside[id as usize].fetch_sub(1, Ordering::SeqCst);
                }
            }
            format!("{} keys", accounts.guard().map_or(0, |g| g.parts().len()))
        }
    };
    Router::new()
        .route("/transfers/{from}/{to}", post(transfer))
        .layer(Extension(locks))
}

async fn transfers_lock_both_accounts(backend: BackendUnderTest) {
    let builder = LockManager::builder()
        .wait(Duration::from_secs(30))
        .key_prefix(support::unique("multi") + ":");
    let locks = backend.manager(builder).await;
    let inside = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let app = app(locks.clone(), inside);
    let mut tasks = Vec::new();
    for n in 0..100 {
        let app = app.clone();
        let uri = if n % 2 == 0 {
            "/transfers/0/1"
        } else {
            "/transfers/1/0"
        };
        tasks.push(tokio::spawn(
            async move { oneshot(&app, "POST", uri).await },
        ));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), (StatusCode::OK, "2 keys".to_owned()));
    }
    assert_eq!(oneshot(&app, "POST", "/transfers/3/3").await.1, "1 keys");
    let (status, body) = oneshot(&app, "POST", "/transfers/x/3").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    // The extractor's guard is dropped with the handler: released in the background.
    crate::support::eventually("every lock released", || async {
        (locks.stats() == Default::default()).then_some(())
    })
    .await;
}

async fn a_busy_account_is_409_and_leaves_the_other_free(backend: BackendUnderTest) {
    // A prefix of its own: other tests lock `account:9` on the shared Redis too.
    let builder = LockManager::builder()
        .wait(Duration::from_millis(50))
        .key_prefix(support::unique("multi") + ":");
    let locks = backend.manager(builder).await;
    let app = app(
        locks.clone(),
        Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]),
    );
    let held = locks.lock("account:9").acquire().await.unwrap();
    let (status, _) = oneshot(&app, "POST", "/transfers/8/9").await;
    assert_eq!(status, StatusCode::CONFLICT);
    let other = locks
        .lock("account:8")
        .try_acquire()
        .await
        .expect("account 8 left free");
    assert_eq!(other.release().await.unwrap(), Released::Unlocked);
    assert_eq!(held.release().await.unwrap(), Released::Unlocked);
    assert_eq!(
        oneshot(&app, "POST", "/transfers/8/9").await.0,
        StatusCode::OK
    );
}

backend_suite!(
    [Memory, Redis, Postgres]
    transfers_lock_both_accounts,
    a_busy_account_is_409_and_leaves_the_other_free,
);
