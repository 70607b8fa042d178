//! Rust and Java on Curator take the same locks: mutual exclusion both ways (a witness
//! file both write), wake-ups both ways, one queue in arrival order across languages, the
//! read-write lock shared, a Java holder inspected from Rust, and a killed JVM's lock
//! passed on once its session expires.

use std::time::{Duration, Instant, SystemTime};

use tower_lock::backend::{HolderSide, InspectedKind, ZooKeeperBackend};
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::curator::{answer_time, JavaCurator};
use crate::support::{self, zookeeper};

async fn manager() -> LockManager {
    let backend = ZooKeeperBackend::connect(&zookeeper::shared_hosts())
        .await
        .unwrap();
    LockManager::builder().backend(backend)
}

/// Returns once `n` waiters (of either language) wait in the lock `name`'s queue.
async fn queued(locks: &LockManager, name: &str, n: usize) {
    support::eventually("the waiters queued", || async {
        let info = locks.inspect(name).await.unwrap();
        (info.queued == n).then_some(())
    })
    .await
}

/// Curator's path of a tower-lock name under the default root.
fn path(name: &str) -> String {
    format!("/tower-lock/{name}")
}

fn witness_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("tower-lock-witness-{name}"))
}

/// No two holders at once: every `+` is followed by its `-`.
fn assert_no_overlap(witness: &str, holds: usize) {
    assert!(!witness.contains("++"), "two holders at once: {witness}");
    assert_eq!(witness.matches('+').count(), holds, "{witness}");
    assert_eq!(witness, "+-".repeat(holds));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_tower_lock_exclude_each_other() {
    let name = support::unique("curator-witness");
    let file = witness_file(&name);
    let mut java = JavaCurator::start(&zookeeper::shared_hosts()).await;
    let java_rounds = 100;
    let java_done = java
        .send(
            "w",
            &format!("witness {} {java_rounds} 1 {}", path(&name), file.display()),
        )
        .await;
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let locks = manager().await;
        for _ in 0..2 {
            let (locks, name, file) = (locks.clone(), name.clone(), file.clone());
            tasks.push(tokio::spawn(async move {
                use std::io::Write;
                let mut witness = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&file)
                    .unwrap();
                for _ in 0..50 {
                    let guard = locks
                        .lock(&name)
                        .wait(Duration::from_secs(60))
                        .acquire()
                        .await
                        .unwrap();
                    witness.write_all(b"+").unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    witness.write_all(b"-").unwrap();
                    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(java_done.await.unwrap(), "witnessed");
    let witness = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    assert_no_overlap(&witness, java_rounds + 4 * 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_on_either_side_wakes_the_other_sides_waiter() {
    let name = support::unique("curator-wake");
    let locks = manager().await;
    let mut java = JavaCurator::start(&zookeeper::shared_hosts()).await;
    // Java holds, Rust waits, Java releases.
    assert!(java
        .ask("j", &format!("mutex {} 10000", path(&name)))
        .await
        .starts_with("acquired"));
    let waiter = {
        let (locks, name) = (locks.clone(), name.clone());
        tokio::spawn(async move {
            let guard = locks
                .lock(&name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
                .unwrap();
            (guard, SystemTime::now())
        })
    };
    queued(&locks, &name, 1).await;
    let released = answer_time(&java.ask("j", "release").await);
    let (guard, woken) = waiter.await.unwrap();
    let rust_woken = woken.duration_since(released).unwrap_or_default();
    // Rust holds, Java waits, Rust releases.
    let java_waits = java
        .send("k", &format!("mutex {} 60000", path(&name)))
        .await;
    queued(&locks, &name, 1).await;
    let released = SystemTime::now();
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    let answer = java_waits.await.unwrap();
    assert!(answer.starts_with("acquired"), "{answer}");
    let java_woken = answer_time(&answer)
        .duration_since(released)
        .unwrap_or_default();
    eprintln!("wake-up after the other side's release: Rust {rust_woken:?}, Java {java_woken:?}");
    java.ask("k", "release").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_keeps_its_order() {
    let name = support::unique("curator-order");
    let (first, second) = (manager().await, manager().await);
    let mut java = JavaCurator::start(&zookeeper::shared_hosts()).await;
    assert!(java
        .ask("holder", &format!("mutex {} 10000", path(&name)))
        .await
        .starts_with("acquired"));
    let rust_waiter = |locks: LockManager, fair: bool| {
        let name = name.clone();
        tokio::spawn(async move {
            let request = if fair {
                locks.fair_lock(&name)
            } else {
                locks.lock(&name)
            };
            let guard = request
                .wait(Duration::from_secs(60))
                .acquire()
                .await
                .unwrap();
            let at = SystemTime::now();
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
            at
        })
    };
    let rust_first = rust_waiter(first.clone(), false);
    queued(&first, &name, 1).await;
    let java_second = java
        .send("second", &format!("mutex {} 60000", path(&name)))
        .await;
    queued(&first, &name, 2).await;
    let rust_third = rust_waiter(second.clone(), true);
    queued(&first, &name, 3).await;
    java.ask("holder", "release").await;
    let java_at = answer_time(&java_second.await.unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;
    java.ask("second", "release").await;
    let (first_at, third_at) = (rust_first.await.unwrap(), rust_third.await.unwrap());
    assert!(first_at < java_at, "the first Rust waiter went first");
    assert!(
        java_at < third_at,
        "the Java waiter went before the Rust waiter behind it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_write_lock_is_shared_across_languages() {
    let name = support::unique("curator-rw");
    let locks = manager().await;
    let mut java = JavaCurator::start(&zookeeper::shared_hosts()).await;
    assert!(java
        .ask("r", &format!("read {} 10000", path(&name)))
        .await
        .starts_with("acquired"));
    let read = locks
        .read_lock(&name)
        .try_acquire()
        .await
        .expect("readers share");
    assert!(matches!(
        locks.write_lock(&name).try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    assert_eq!(
        java.ask("w", &format!("write {} 200", path(&name))).await,
        "timeout"
    );
    assert_eq!(read.release().await.unwrap(), Released::Unlocked);
    java.ask("r", "release").await;
    let write = locks
        .write_lock(&name)
        .try_acquire()
        .await
        .expect("free now");
    assert_eq!(
        java.ask("r", &format!("read {} 200", path(&name))).await,
        "timeout"
    );
    let java_writer = java
        .send("w", &format!("write {} 60000", path(&name)))
        .await;
    assert_eq!(write.release().await.unwrap(), Released::Unlocked);
    assert!(java_writer.await.unwrap().starts_with("acquired"));
    assert!(matches!(
        locks.read_lock(&name).try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    java.ask("w", "release").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_curator_holder_is_inspected_and_force_unlocked_from_rust() {
    let name = support::unique("curator-inspect");
    let locks = manager().await;
    let mut java = JavaCurator::start(&zookeeper::shared_hosts()).await;
    assert!(java
        .ask("j", &format!("mutex {} 10000", path(&name)))
        .await
        .starts_with("acquired"));
    let info = locks.inspect(&name).await.unwrap();
    assert_eq!(info.kind, Some(InspectedKind::Lock), "{info:?}");
    assert_eq!(info.holders.len(), 1, "{info:?}");
    let holder = &info.holders[0];
    assert_eq!(holder.side, HolderSide::Exclusive);
    // Curator writes the client's address into its node; the node's name follows.
    assert!(holder.owner.starts_with("127.0.0.1:_c_"), "{holder:?}");
    assert!(holder.owner.contains("-lock-"), "{holder:?}");
    assert!(info.fencing_token.is_some());
    let freed = locks.force_unlock(&name, "test").await.unwrap();
    assert_eq!(freed.freed, 1);
    let guard = locks
        .lock(&name)
        .try_acquire()
        .await
        .expect("free after the force-unlock");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_curator_process_passes_its_lock_on() {
    let name = support::unique("curator-killed");
    let locks = manager().await;
    let mut java =
        JavaCurator::start_with(&zookeeper::shared_hosts(), Duration::from_secs(4)).await;
    assert!(java
        .ask("j", &format!("mutex {} 10000", path(&name)))
        .await
        .starts_with("acquired"));
    assert!(matches!(
        locks.lock(&name).try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    java.kill().await;
    let killed = Instant::now();
    let guard = locks
        .lock(&name)
        .wait(Duration::from_secs(60))
        .acquire()
        .await
        .expect("the dead holder's node goes with its session");
    eprintln!(
        "a killed JVM's lock passed on {:?} after the kill",
        killed.elapsed()
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}
