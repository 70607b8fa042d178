//! Redis gone or silent: holders are told before their lease can end, acquisitions fail at
//! once while the client knows the connection is down, and a wait that ends during an
//! outage reports the backend unavailable, not the lock busy.

mod support;

use std::time::{Duration, Instant};

use fred::prelude::*;
use support::proxy::Proxy;
use support::RedisServer;
use tower_lock::backend::RedisBackend;
use tower_lock::lock::{LossMargin, Released};
use tower_lock::{LockError, LockManager};

/// Far longer than any bound these tests put on an answer: with it, an answer that waits
/// for the command time limit cannot pass for a prompt one.
const COMMAND_LIMIT: Duration = Duration::from_secs(30);
/// How long an answer may take while the client knows Redis is down.
const PROMPT: Duration = Duration::from_secs(2);

async fn manager(
    url: &str,
    configure: impl FnOnce(
        tower_lock::manager::LockManagerBuilder,
    ) -> tower_lock::manager::LockManagerBuilder,
) -> LockManager {
    let backend = RedisBackend::connect(url)
        .await
        .unwrap()
        .command_timeout(COMMAND_LIMIT);
    configure(LockManager::builder()).backend(backend)
}

fn assert_unavailable<T: std::fmt::Debug>(what: &str, result: Result<T, LockError>) {
    assert!(
        matches!(result, Err(LockError::Unavailable(_))),
        "{what}: {result:?}"
    );
}

/// A holder cut off from Redis (a proxy stops forwarding, so no renewal arrives) is told
/// of the loss while Redis still holds the lock for it: nobody else can have taken it yet.
/// The loss used to fire at the instant the lease could end, when another process could
/// already acquire it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_from_redis_is_told_before_its_lease_can_end() {
    let server = RedisServer::start();
    let proxy = Proxy::start(server.port()).await;
    let lease = Duration::from_secs(3);
    let margin = LossMargin {
        per_lease: 0.0,
        fixed: Duration::from_millis(800),
    };
    let locks = LockManager::builder()
        .lease(lease)
        .loss_margin(margin)
        .redis(&proxy.url())
        .await
        .unwrap();
    let other = LockManager::redis(&server.url()).await.unwrap();
    let admin = support::client(&server.url()).await;
    let name = support::unique("cut-off");
    let guard = locks.lock(&name).acquire().await.unwrap();
    proxy.go_silent();

    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("told of the loss");
    let pttl: i64 = admin.pttl(&name).await.unwrap();
    assert!(
        pttl > 0,
        "told while Redis still holds the lock for it (pttl {pttl} ms)"
    );
    assert!(
        matches!(
            other.lock(&name).try_acquire().await,
            Err(LockError::TimedOut { .. })
        ),
        "nobody else can have it yet"
    );
    assert!(guard.is_lost());
    // Once the lease has ended in Redis, another process gets it.
    let next = other
        .lock(&name)
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .expect("free once the lease ended");
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
    drop(guard);
}

/// With Redis killed, every acquisition answers `Unavailable` at once: a single try, a
/// waiting one, a newcomer behind a holder of this process, and a manager that never
/// reached Redis. They used to take the command time limit each (3 s by default) while
/// fred waited for a reconnect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_fail_at_once_while_redis_is_down() {
    let mut server = RedisServer::start();
    let locks = manager(&server.url(), |b| b).await;
    let name = support::unique("down");
    let holder = locks.lock(&name).acquire().await.unwrap();
    server.stop();
    // The client learns of the loss of its connection from the closed socket.
    support::eventually("the client sees the connection down", || async {
        let started = Instant::now();
        let result = locks.lock("probe").try_acquire().await;
        (matches!(result, Err(LockError::Unavailable(_))) && started.elapsed() < PROMPT)
            .then_some(())
    })
    .await;

    let lazy = LockManager::builder().backend(
        RedisBackend::connect_lazy(&format!("redis://127.0.0.1:{}", support::free_port()))
            .await
            .unwrap()
            .command_timeout(COMMAND_LIMIT),
    );
    for round in 0..10 {
        let attempts = [
            (
                "a single try",
                locks
                    .lock(format!("other:{round}"))
                    .wait(Duration::ZERO)
                    .acquire(),
            ),
            (
                "a waiting acquisition",
                locks
                    .lock(format!("other:{round}"))
                    .wait(Duration::from_secs(20))
                    .acquire(),
            ),
            (
                "a newcomer behind a holder here",
                locks.lock(&name).wait(Duration::from_secs(20)).acquire(),
            ),
            (
                "a manager that never reached Redis",
                lazy.lock("never").wait(Duration::from_secs(20)).acquire(),
            ),
        ];
        for (what, attempt) in attempts {
            let started = Instant::now();
            let result = tokio::time::timeout(PROMPT, attempt)
                .await
                .unwrap_or_else(|_| panic!("{what}: no answer within {PROMPT:?}"));
            assert_unavailable(what, result);
            assert!(started.elapsed() < PROMPT);
        }
    }

    // Back without restarting anything.
    server.resume();
    let guard = support::eventually("served again", || async {
        locks
            .lock("again")
            .wait(Duration::from_secs(1))
            .acquire()
            .await
            .ok()
    })
    .await;
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    assert_eq!(holder.release().await.unwrap(), Released::NotHeld);
}

/// A waiter queued behind a holder whose wait ends while Redis is down reports the
/// backend unavailable: whether the lock is busy is not known then (it used to answer
/// `TimedOut`, a 409 over HTTP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_ends_during_an_outage_is_unavailable_not_busy() {
    let mut server = RedisServer::start();
    let locks = manager(&server.url(), |b| b).await;
    let other = manager(&server.url(), |b| b).await;
    let name = support::unique("outage-wait");
    let holder = other.lock(&name).acquire().await.unwrap();
    let waiter = support::spawn_waiter(&locks, &name, Duration::from_secs(1));
    support::eventually("queued", || async {
        (locks.waiting(&name) == 1).then_some(())
    })
    .await;
    server.stop();
    let result = waiter.await.unwrap();
    assert_unavailable("a wait that ended during the outage", result);
    drop(holder);
}
