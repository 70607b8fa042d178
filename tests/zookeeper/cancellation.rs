//! An acquisition dropped at any await leaves no node behind: a waiting one's node is
//! deleted when its acquirer leaves, a try that took the lock is released in the background,
//! a fair waiter's place is deleted.

use std::time::Duration;

use tower_lock::backend::ZooKeeperBackend;
use tower_lock::lock::Released;
use tower_lock::LockManager;
use zookeeper_client as zk;

use crate::support::{self, zookeeper};

/// The children of a name's directory, as the server has them.
async fn nodes(client: &zk::Client, name: &str) -> Vec<String> {
    match client.list_children(&format!("/tower-lock/{name}")).await {
        Ok(children) => children,
        Err(zk::Error::NoNode) => Vec::new(),
        Err(error) => panic!("list {name}: {error}"),
    }
}

async fn manager() -> LockManager {
    let backend = ZooKeeperBackend::connect(&zookeeper::shared_hosts())
        .await
        .unwrap();
    LockManager::builder().backend(backend)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_dropped_at_any_point_leave_no_node_behind() {
    let client = zk::Client::connect(&zookeeper::shared_hosts())
        .await
        .unwrap();
    let (locks, other) = (manager().await, manager().await);
    let (busy, free) = (
        support::unique("zk-drop-busy"),
        support::unique("zk-drop-free"),
    );
    let holder = other.lock(&busy).acquire().await.unwrap();
    // Dropped after 0, 100, 200, … µs: before its node is made, while it is made, while
    // it waits behind the holder; a try on a free name before or after it took the lock.
    for step in 0..40u64 {
        let after = Duration::from_micros(step * 100);
        let waiting = locks.lock(&busy).wait(Duration::from_secs(60)).acquire();
        assert!(tokio::time::timeout(after, waiting).await.is_err());
        let fair = locks
            .fair_lock(&busy)
            .wait(Duration::from_secs(60))
            .acquire();
        assert!(tokio::time::timeout(after, fair).await.is_err());
        let trying = locks.lock(&free).try_acquire();
        if let Ok(Ok(guard)) = tokio::time::timeout(after, trying).await {
            assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        }
    }
    support::eventually("the dropped acquisitions' nodes are deleted", || async {
        let (busy_nodes, free_nodes) = (nodes(&client, &busy).await, nodes(&client, &free).await);
        (busy_nodes.len() == 1 && free_nodes.is_empty()).then_some(())
    })
    .await;
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    assert!(nodes(&client, &busy).await.is_empty());
    support::nothing_left_behind(&locks).await;
}

/// A released hold's timer (its lease's end) stops with the release: a thousand locks taken
/// and released leave no task behind, though their leases would end half a minute later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_holds_leave_no_timer_running() {
    let locks = manager().await;
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let name = support::unique("zk-timers");
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
