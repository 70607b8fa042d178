//! The session is the lease: a holder cut off from the server is told at once (it can no
//! longer be sure), and the next holder gets in when the server expires the session; an
//! ensemble that loses its leader keeps its sessions, and waiters ride the election out;
//! a thousand waiters each wake once.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tower_lock::backend::ZooKeeperBackend;
use tower_lock::lock::Released;
use tower_lock::LockManager;

use crate::support;
use crate::support::proxy::Proxy;
use crate::support::zookeeper::{self, Ensemble};

async fn manager_on(hosts: &str, session: Duration) -> (ZooKeeperBackend, LockManager) {
    let backend = ZooKeeperBackend::builder(hosts)
        .session_timeout(session)
        .connect()
        .await
        .unwrap();
    (backend.clone(), LockManager::builder().backend(backend))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_is_told_and_the_next_gets_in_when_its_session_expires() {
    let hosts = zookeeper::shared_hosts();
    let port: u16 = hosts.rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port).await;
    let through = proxy.url().trim_start_matches("redis://").to_owned();
    let (_, cut_off) = manager_on(&through, Duration::from_secs(4)).await;
    let (_, next) = manager_on(&hosts, Duration::from_secs(10)).await;
    let name = support::unique("zk-cut-off");
    let guard = cut_off.lock(&name).acquire().await.unwrap();
    proxy.go_silent();
    // The client misses the server's answers to its pings and calls the session suspended.
    tokio::time::timeout(Duration::from_secs(60), guard.lost())
        .await
        .expect("the holder is told once its connection is lost");
    let taken = next
        .lock(&name)
        .wait(Duration::from_secs(60))
        .acquire()
        .await
        .expect("the next holder gets in once the server expires the session");
    assert_eq!(taken.release().await.unwrap(), Released::Unlocked);
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_ride_out_the_loss_of_the_ensembles_leader() {
    let mut ensemble = tokio::task::spawn_blocking(Ensemble::start).await.unwrap();
    let hosts = ensemble.hosts();
    let (_, holder) = manager_on(&hosts, Duration::from_secs(10)).await;
    let (_, waiter) = manager_on(&hosts, Duration::from_secs(10)).await;
    let name = support::unique("zk-failover");
    let held = holder.lock(&name).acquire().await.unwrap();
    let waiting = {
        let (waiter, name) = (waiter.clone(), name.clone());
        tokio::spawn(async move {
            waiter
                .lock(&name)
                .wait(Duration::from_secs(90))
                .acquire()
                .await
        })
    };
    support::eventually("the waiter queued", || async {
        let info = holder.inspect(&name).await.ok()?;
        (info.queued == 1).then_some(())
    })
    .await;
    tokio::task::block_in_place(|| ensemble.leader().kill());
    // The holder lets go once the ensemble serves again (a release that fails meanwhile
    // is finished when its session reconnects).
    let _ = held.release().await;
    let guard = waiting
        .await
        .unwrap()
        .expect("the waiter rides the election out and gets the lock");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    let again = holder
        .lock(&name)
        .wait(Duration::from_secs(60))
        .acquire()
        .await
        .expect("the ensemble serves after the election");
    assert_eq!(again.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_each_wake_once() {
    let (backend, locks) = manager_on(&zookeeper::shared_hosts(), Duration::from_secs(10)).await;
    let name = support::unique("zk-herd");
    let holder = locks.fair_lock(&name).acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiters = 1000;
    let mut tasks = Vec::new();
    for n in 0..waiters {
        let (locks, name, order) = (locks.clone(), name.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let guard = locks
                .fair_lock(&name)
                .wait(Duration::from_secs(300))
                .acquire()
                .await
                .unwrap();
            order.lock().await.push(n);
            assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        }));
    }
    support::eventually("every waiter queued", || async {
        let info = locks.inspect(&name).await.ok()?;
        (info.queued == waiters).then_some(())
    })
    .await;
    let before = backend.watches_fired();
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for task in tasks {
        task.await.unwrap();
    }
    let fired = backend.watches_fired() - before;
    eprintln!("{waiters} waiters: {fired} watches fired");
    assert_eq!(order.lock().await.len(), waiters);
    // Each waiter watches only the node before it: one wake-up each at most (a herd would
    // wake every waiter at every release: about half a million).
    assert!(
        fired <= waiters as u64,
        "{fired} watches fired for {waiters} waiters"
    );
}
