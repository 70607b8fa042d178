//! Sessions under the server's hand: one ended by `pg_terminate_backend` tells its holders
//! at once and the next holder gets in; a restart loses the holds and the waiters ride it
//! out; a thousand waiters need two connections; a waiter sends nothing while it waits.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::lock::Released;
use tower_lock::LockError;

use crate::support;
use crate::support::postgres::Postgres;

/// A holder whose session the server ends (`pg_terminate_backend`) is told at once, and a
/// waiter of another manager takes the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_session_tells_its_holders_and_the_next_gets_in() {
    let url = support::postgres::shared_url();
    let name = support::unique("terminated");
    let other_name = support::unique("terminated-too");
    // Renewals 200 s apart: the holder is told by the session's end, not by a renewal.
    let (locks, _) = crate::manager_with(&url, |b| b.lease(Duration::from_secs(600)));
    let guard = locks.lock(&name).acquire().await.unwrap();
    // Another hold on the same session: it goes with it.
    let other = locks.lock(&other_name).acquire().await.unwrap();
    let (next_locks, _) = crate::manager(&url);
    let waiter = support::spawn_waiter(&next_locks, &name, Duration::from_secs(60));
    let admin = crate::pool(&url);
    let holders = crate::sessions_of(&admin, &name, true).await;
    assert_eq!(holders.len(), 1, "one session holds it");
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(holders[0])
        .fetch_one(&admin)
        .await
        .unwrap();
    assert!(ended);
    // Both are told (one after the other: each hold's signal is its own).
    tokio::time::timeout(Duration::from_secs(60), async {
        guard.lost().await;
        other.lost().await;
    })
    .await
    .expect("every hold of the session is told when it ends");
    assert!(guard.is_lost() && other.is_lost());
    let next = waiter.await.unwrap().expect("the waiter gets the lock");
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    assert_eq!(other.release().await.unwrap(), Released::NotHeld);
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&locks).await;
    support::nothing_left_behind(&next_locks).await;
}

/// The server restarts while one manager holds a lock and another waits for it: the holder
/// is told it lost the lock; the waiter rides the outage out (its wait lasts) and takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_ride_a_restart_out_and_holders_are_told() {
    let server = Postgres::start();
    let url = server.url();
    let (holder_side, _) = crate::manager_with(&url, |b| b.lease(Duration::from_secs(600)));
    let (waiter_side, _) = crate::manager(&url);
    let guard = holder_side.lock("order:7").acquire().await.unwrap();
    let waiter = support::spawn_waiter(&waiter_side, "order:7", Duration::from_secs(60));
    support::eventually("the waiter queues", || async {
        (waiter_side.waiting("order:7") == 1).then_some(())
    })
    .await;
    server.stop();
    tokio::time::timeout(Duration::from_secs(60), guard.lost())
        .await
        .expect("the holder learns that its session ended");
    // Down for a while: new acquisitions fail at once, the queued waiter waits on.
    support::eventually("the backend knows the server is down", || async {
        match holder_side.lock("other").try_acquire().await {
            Err(LockError::Unavailable(_)) => Some(()),
            _ => None,
        }
    })
    .await;
    assert!(!waiter.is_finished(), "the waiter still waits");
    server.start_again();
    let next = waiter
        .await
        .unwrap()
        .expect("the waiter takes the lock once the server is back");
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
}

/// A thousand waiters of one manager on one name: one waits in the server's queue, the rest
/// in the process's; the backend keeps two sessions (the holder's, the first waiter's), and
/// while nothing changes nothing is sent. Then every waiter takes the lock in turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_wait_on_two_sessions_and_send_nothing() {
    let url = support::postgres::shared_url();
    let name = support::unique("thousand");
    let (locks, backend) = crate::manager(&url);
    // A fixed lease: no renewal (and no keep-alive) while the waiters wait.
    let holder = locks
        .lock(&name)
        .fixed_lease(Duration::from_secs(600))
        .acquire()
        .await
        .unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let (locks, name) = (locks.clone(), name.clone());
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            tokio::spawn(async move {
                let guard = locks
                    .lock(&name)
                    .wait(Duration::from_secs(120))
                    .acquire()
                    .await
                    .expect("every waiter gets the lock");
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                inside.fetch_sub(1, Ordering::SeqCst);
                assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
            })
        })
        .collect();
    support::eventually("a thousand waiters queue", || async {
        (locks.waiting(&name) == 1000).then_some(())
    })
    .await;
    let admin = crate::pool(&url);
    support::eventually("the first waiter waits in the server's queue", || async {
        (crate::sessions_of(&admin, &name, false).await.len() == 1).then_some(())
    })
    .await;
    assert_eq!(
        backend.open_sessions(),
        2,
        "the holder's session and the first waiter's"
    );
    // Nothing changes for a while (what is tested is that time passes with nothing sent):
    // the same waiting statement, and no other.
    let waiting_since = || async {
        let pids = crate::sessions_of(&admin, &name, false).await;
        let since: Vec<Option<String>> = sqlx::query_scalar(
            "SELECT query_start::text FROM pg_stat_activity WHERE pid = ANY($1) ORDER BY pid",
        )
        .bind(&pids)
        .fetch_all(&admin)
        .await
        .unwrap();
        (pids, since)
    };
    let sent = backend.statements_sent();
    let before = waiting_since().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        backend.statements_sent(),
        sent,
        "an idle waiter sends nothing"
    );
    assert_eq!(locks.waiting(&name), 1000);
    assert_eq!(
        waiting_since().await,
        before,
        "the same statement waits in the server's queue"
    );
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for waiter in waiters {
        waiter.await.unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0);
    assert!(
        backend.open_sessions() <= 3,
        "a few sessions served a thousand waiters: {}",
        backend.open_sessions()
    );
    support::nothing_left_behind(&locks).await;
}

/// A waiter dropped while it waits in the server's queue (its request went away) is taken
/// out of the queue at once, not at the end of its 600 s wait; the lock works on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_waiter_leaves_the_servers_queue_at_once() {
    let url = support::postgres::shared_url();
    let name = support::unique("dropped-waiter");
    let (locks, _) = crate::manager(&url);
    let (other, _) = crate::manager(&url);
    let holder = locks.lock(&name).acquire().await.unwrap();
    let admin = crate::pool(&url);
    for _ in 0..3 {
        let waiter = support::spawn_waiter(&other, &name, Duration::from_secs(600));
        support::eventually("the waiter waits in the server's queue", || async {
            (crate::sessions_of(&admin, &name, false).await.len() == 1).then_some(())
        })
        .await;
        waiter.abort();
        support::eventually("the dropped waiter left the server's queue", || async {
            crate::sessions_of(&admin, &name, false)
                .await
                .is_empty()
                .then_some(())
        })
        .await;
    }
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    let next = other.lock(&name).try_acquire().await.expect("free");
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&locks).await;
    support::nothing_left_behind(&other).await;
}

/// A writer may read (a downgrade) and reenter while a writer of another process waits in
/// the server's queue: a session's own holds go before its waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_downgrades_and_reenters_while_another_writer_waits() {
    let url = support::postgres::shared_url();
    let name = support::unique("downgrade");
    let (locks, _) = crate::manager(&url);
    let (other, _) = crate::manager(&url);
    let write = locks.write_lock(&name).acquire().await.unwrap();
    let waiting = {
        let (other, name) = (other.clone(), name.clone());
        tokio::spawn(async move {
            other
                .write_lock(&name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    let admin = crate::pool(&url);
    support::eventually("the other writer waits in the server's queue", || async {
        (crate::sessions_of(&admin, &name, false).await.len() == 1).then_some(())
    })
    .await;
    let again = write.write_lock().await.expect("a reentry");
    let read = write.read_lock().await.expect("a downgrade");
    assert_eq!(again.release().await.unwrap(), Released::StillHeld);
    assert_eq!(write.release().await.unwrap(), Released::Unlocked);
    assert!(!waiting.is_finished(), "still reading");
    assert_eq!(read.release().await.unwrap(), Released::Unlocked);
    let next = waiting.await.unwrap().expect("the other writer gets in");
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
}
