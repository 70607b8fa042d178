//! Redis Cluster failover, Sentinel failover and replica acknowledgement, on local
//! redis-server processes.

mod support;

use std::time::Duration;

use fred::prelude::*;
use support::cluster::RedisCluster;
use support::RedisServer;
use tower_lock::backend::unlock_channel;
use tower_lock::backend::{MissingAck, RedisBackend, ReplicaAck};
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

/// `count` tasks that each wait up to 20 s for `name`, then release it. The default lease
/// is 30 s: a waiter that missed its wake-up times out.
fn spawn_waiters(
    locks: &LockManager,
    name: &'static str,
    count: usize,
) -> Vec<tokio::task::JoinHandle<Result<(), LockError>>> {
    (0..count)
        .map(|_| {
            let locks = locks.clone();
            tokio::spawn(async move {
                let guard = locks
                    .lock(name)
                    .wait(Duration::from_secs(20))
                    .acquire()
                    .await?;
                let _ = guard.release().await.map_err(LockError::Unavailable)?;
                Ok(())
            })
        })
        .collect()
}

fn role(port: u16) -> String {
    let info = RedisCluster::cli(port, &["info", "replication"]);
    info.lines()
        .find_map(|l| l.strip_prefix("role:"))
        .unwrap_or("")
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_failover_while_tasks_wait() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 1))
        .await
        .unwrap();
    let holder_side = LockManager::redis(&cluster.url()).await.unwrap();
    let waiter_side = LockManager::redis(&cluster.url()).await.unwrap();
    let name = "order:{failover}";
    let slot = fred::util::redis_keyslot(name.as_bytes());
    let (master, replica) = cluster.owners(slot);
    let replica = replica.expect("every master has a replica");

    let holder = holder_side.lock(name).acquire().await.unwrap();
    let waiters = spawn_waiters(&waiter_side, name, 5);
    let waiting = support::client(&cluster.url()).await;
    let channel = unlock_channel(holder.key());
    support::eventually("waiters subscribed", || async {
        (waiter_side.waiting(name) == 5 && support::numsub(&waiting, &channel).await >= 1)
            .then_some(())
    })
    .await;

    // Promote the replica of the lock's slot.
    let answer = RedisCluster::cli(replica, &["cluster", "failover"]);
    assert!(answer.contains("OK"), "CLUSTER FAILOVER: {answer}");
    support::eventually("the replica takes over", || async {
        (role(replica) == "master" && role(master) == "slave").then_some(())
    })
    .await;

    // The lock survived the failover (it was replicated); its release wakes the waiters.
    assert!(!holder.is_lost());
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for waiter in waiters {
        waiter
            .await
            .unwrap()
            .expect("every waiter resumes after the failover");
    }
    // New acquisitions work on the new master.
    let guard = holder_side.lock(name).try_acquire().await.unwrap();
    let _ = guard.release().await.unwrap();
}

/// A master and a replica in sync with it.
fn master_with_replica() -> (RedisServer, RedisServer) {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(
        support::free_port(),
        &["--replicaof", "127.0.0.1", &master.port().to_string()],
    );
    support::eventually_sync("the replica is in sync", || {
        RedisCluster::cli(replica.port(), &["info", "replication"])
            .contains("master_link_status:up")
    });
    (master, replica)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover() {
    let (master, replica) = master_with_replica();
    let sentinel = RedisServer::start_sentinel(master.port());
    let url = format!(
        "redis-sentinel://127.0.0.1:{}?sentinelServiceName=mymaster",
        sentinel.port()
    );
    let holder_side = LockManager::redis(&url).await.unwrap();
    let waiter_side = LockManager::redis(&url).await.unwrap();

    let holder = holder_side.lock("sentinel").acquire().await.unwrap();
    let waiters = spawn_waiters(&waiter_side, "sentinel", 5);
    support::eventually("waiters queued", || async {
        (waiter_side.waiting("sentinel") == 5).then_some(())
    })
    .await;
    // The lock is on the replica before the failover.
    support::eventually_sync("the lock replicated", || {
        RedisCluster::cli(replica.port(), &["exists", "sentinel"]).trim() == "1"
    });

    // The sentinel must have discovered the replica before it can promote it.
    support::eventually("the sentinel accepts the failover", || async {
        let answer = RedisCluster::cli(sentinel.port(), &["sentinel", "failover", "mymaster"]);
        assert!(
            answer.contains("OK") || answer.contains("NOGOODSLAVE"),
            "SENTINEL FAILOVER: {answer}"
        );
        answer.contains("OK").then_some(())
    })
    .await;
    support::eventually("the replica is promoted", || async {
        let addr = RedisCluster::cli(
            sentinel.port(),
            &["sentinel", "get-master-addr-by-name", "mymaster"],
        );
        (addr.contains(&replica.port().to_string()) && role(replica.port()) == "master")
            .then_some(())
    })
    .await;

    // The clients reconnect through the sentinel: once the holder's side answers again,
    // release through the new master.
    let probe = support::eventually("the holder's side reaches the new master", || async {
        holder_side.lock("probe").try_acquire().await.ok()
    })
    .await;
    let _ = probe.release().await.unwrap();
    assert_eq!(holder.release().await.unwrap(), Released::Unlocked);
    for waiter in waiters {
        waiter
            .await
            .unwrap()
            .expect("every waiter resumes after the failover");
    }
    let guard = support::eventually("a new acquisition on the new master", || async {
        holder_side.lock("after").try_acquire().await.ok()
    })
    .await;
    let _ = guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_acknowledgement_policies() {
    let (master, replica) = master_with_replica();
    let ack = |on_missing| ReplicaAck {
        replicas: 1,
        timeout: Duration::from_millis(300),
        on_missing,
    };
    let strict = LockManager::builder().backend(
        RedisBackend::connect(&master.url())
            .await
            .unwrap()
            .replica_ack(ack(MissingAck::Release)),
    );
    let lenient_backend = RedisBackend::connect(&master.url())
        .await
        .unwrap()
        .replica_ack(ack(MissingAck::Proceed));
    let lenient = LockManager::builder().backend(lenient_backend.clone());
    let plain = LockManager::redis(&master.url()).await.unwrap();

    // With the replica up, acquisitions are acknowledged.
    let guard = strict.lock("acked").acquire().await.unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);

    // A paused replica acknowledges nothing.
    replica.pause();
    match strict.lock("strict").acquire().await {
        Err(LockError::Unavailable(error)) => {
            assert!(error.to_string().contains("0 of 1 replicas"), "{error}")
        }
        other => panic!("expected Unavailable without acknowledgement, got {other:?}"),
    }
    // ... and the strict policy released it.
    let other = plain
        .lock("strict")
        .try_acquire()
        .await
        .expect("released after the missing acknowledgement");
    let _ = other.release().await.unwrap();
    // The same for both sides of a read-write lock.
    for write in [false, true] {
        let request = if write {
            strict.write_lock("strict-rw")
        } else {
            strict.read_lock("strict-rw")
        };
        match request.acquire().await {
            Err(LockError::Unavailable(error)) => {
                assert!(error.to_string().contains("0 of 1 replicas"), "{error}")
            }
            other => panic!("expected Unavailable without acknowledgement, got {other:?}"),
        }
        let other = plain
            .write_lock("strict-rw")
            .try_acquire()
            .await
            .expect("released after the missing acknowledgement");
        let _ = other.release().await.unwrap();
    }

    // And for the fair lock, whose first attempt fails at once like the plain lock's.
    match strict
        .fair_lock("strict-fair")
        .wait(Duration::from_secs(20))
        .acquire()
        .await
    {
        Err(LockError::Unavailable(error)) => {
            assert!(error.to_string().contains("0 of 1 replicas"), "{error}")
        }
        other => panic!("expected Unavailable without acknowledgement, got {other:?}"),
    }
    let other = plain
        .fair_lock("strict-fair")
        .try_acquire()
        .await
        .expect("released, and out of the queue, after the missing acknowledgement");
    let _ = other.release().await.unwrap();

    let kept = lenient
        .lock("lenient")
        .acquire()
        .await
        .expect("kept without acknowledgement");
    assert_eq!(lenient_backend.unacknowledged_acquisitions(), 1);
    assert!(
        plain.lock("lenient").try_acquire().await.is_err(),
        "the lenient lock is held"
    );
    replica.unpause();
    assert_eq!(kept.release().await.unwrap(), Released::Unlocked);
    let admin = support::client(&master.url()).await;
    let _: () = admin.ping(None).await.unwrap();
}
