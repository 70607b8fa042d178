//! A lock lasts as long as its session: a `KILL`ed session's holders are told at once (the
//! session's watch) and the next holder gets in at once; a waiter called off leaves the server's queue; a server
//! restarted under waiters is ridden out, and its holders are told.

use std::time::Duration;

use sqlx::mysql::MySqlPool;
use tower_lock::backend::MySqlBackend;
use tower_lock::lock::Released;
use tower_lock::LockManager;

use crate::support::{self, mariadb};

/// A manager whose watchdog renews every second (a lease of 3 s): a holder learns of its
/// session's end at its next renewal.
async fn manager(url: &str) -> LockManager {
    let pool = MySqlPool::connect(url).await.unwrap();
    LockManager::builder()
        .lease(Duration::from_secs(3))
        .backend(MySqlBackend::new(&pool))
}

/// How many sessions wait in a `GET_LOCK` for a lock now, as the server lists them (the
/// sessions' watches left out).
async fn waiting_in_server(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
         WHERE INFO LIKE 'SELECT GET_LOCK%' AND INFO NOT LIKE '%session_watch%' \
         AND ID <> CONNECTION_ID()",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn holder_of(pool: &MySqlPool, name: &str) -> Option<u64> {
    sqlx::query_scalar::<_, Option<i64>>("SELECT IS_USED_LOCK(?)")
        .bind(tower_lock::backend::mysql_lock_name(name))
        .fetch_one(pool)
        .await
        .unwrap()
        .map(|id| id as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_session_tells_its_holder_and_the_next_gets_in() {
    let url = mariadb::shared_url();
    let admin = MySqlPool::connect(&url).await.unwrap();
    // A lease of ten minutes: its renewals would tell the holder after 200 s; the session's
    // watch tells it at once.
    let locks = LockManager::builder()
        .lease(Duration::from_secs(600))
        .backend(MySqlBackend::new(&MySqlPool::connect(&url).await.unwrap()));
    let next = manager(&url).await;
    let name = support::unique("mysql-kill");
    let guard = locks.lock(&name).acquire().await.unwrap();
    let waiter = {
        let (next, name) = (next.clone(), name.clone());
        tokio::spawn(async move {
            next.lock(&name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    let id = holder_of(&admin, &name).await.expect("held");
    sqlx::query(&format!("KILL {id}"))
        .execute(&admin)
        .await
        .unwrap();
    let taken = waiter.await.unwrap().expect("the next holder gets in");
    tokio::time::timeout(Duration::from_secs(60), guard.lost())
        .await
        .expect("the killed session's holder is told (by the session's watch)");
    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_called_off_leaves_the_servers_queue() {
    // A server of its own: the count of waiting sessions is this test's alone.
    let server = tokio::task::spawn_blocking(mariadb::MariaDb::start)
        .await
        .unwrap();
    let url = server.url();
    let admin = MySqlPool::connect(&url).await.unwrap();
    let (locks, other) = (manager(&url).await, manager(&url).await);
    let name = support::unique("mysql-called-off");
    let guard = locks.lock(&name).acquire().await.unwrap();
    let waiting = {
        let (other, name) = (other.clone(), name.clone());
        tokio::spawn(async move {
            other
                .lock(&name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    support::eventually("the waiter waits in the server", || async {
        (waiting_in_server(&admin).await == 1).then_some(())
    })
    .await;
    waiting.abort();
    let _ = waiting.await;
    support::eventually("the waiter left the server's queue", || async {
        (waiting_in_server(&admin).await == 0).then_some(())
    })
    .await;
    // Released now, the name is not granted to the waiter that went away.
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    support::eventually("the name is free", || async {
        holder_of(&admin, &name).await.is_none().then_some(())
    })
    .await;
    let again = locks.lock(&name).try_acquire().await.expect("free");
    assert_eq!(again.release().await.unwrap(), Released::Unlocked);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_is_ridden_out_by_waiters_and_told_to_holders() {
    let mut server = tokio::task::spawn_blocking(mariadb::MariaDb::start)
        .await
        .unwrap();
    let url = server.url();
    let (locks, other) = (manager(&url).await, manager(&url).await);
    let name = support::unique("mysql-restart");
    let guard = locks.lock(&name).acquire().await.unwrap();
    let waiter = {
        let (other, name) = (other.clone(), name.clone());
        tokio::spawn(async move {
            other
                .lock(&name)
                .wait(Duration::from_secs(90))
                .acquire()
                .await
        })
    };
    let admin = MySqlPool::connect(&url).await.unwrap();
    support::eventually("the waiter waits in the server", || async {
        (waiting_in_server(&admin).await == 1).then_some(())
    })
    .await;
    admin.close().await;
    let server = tokio::task::spawn_blocking(move || {
        server.stop();
        server.start_again();
        server
    })
    .await
    .unwrap();
    tokio::time::timeout(Duration::from_secs(30), guard.lost())
        .await
        .expect("the holder is told its session ended");
    let taken = waiter
        .await
        .unwrap()
        .expect("the waiter gets the lock after the restart");
    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
    drop(server);
}

/// A released hold's timer (its lease's end) stops with the release: many locks taken and
/// released leave no task behind, though their leases would end half a minute later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_holds_leave_no_timer_running() {
    let pool = MySqlPool::connect(&mariadb::shared_url()).await.unwrap();
    let locks = LockManager::builder().backend(MySqlBackend::new(&pool));
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let name = support::unique("mysql-timers");
    let warm = locks.lock(&name).acquire().await.unwrap();
    assert_eq!(warm.release().await.unwrap(), Released::Unlocked);
    let before = tasks();
    for n in 0..200 {
        let guard = locks.lock(format!("{name}-{n}")).acquire().await.unwrap();
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    support::eventually("the released holds' timers stop", || async {
        (tasks() <= before).then_some(())
    })
    .await;
}
