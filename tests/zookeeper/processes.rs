//! Real processes on one name: they exclude each other (a witness file they all write),
//! and a holder killed with SIGKILL hands the lock on once the server expires its session.

use std::time::{Duration, Instant};

use tower_lock::backend::ZooKeeperBackend;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::{self, witness, zookeeper};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_exclude_each_other() {
    let backend = format!("zookeeper://{}/tower-lock", zookeeper::shared_hosts());
    let name = support::unique("zk-processes");
    witness::processes_exclude_each_other(&backend, &name, 3, 4, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_holder_passes_the_lock_on_when_its_session_expires() {
    let hosts = zookeeper::shared_hosts();
    let name = support::unique("zk-killed");
    let backend = format!("zookeeper://{hosts}/tower-lock");
    let mut holder = witness::holding_process(&backend, &name);
    let backend = ZooKeeperBackend::connect(&hosts).await.unwrap();
    let locks = LockManager::builder().backend(backend);
    assert!(matches!(
        locks.lock(&name).try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    holder.kill().unwrap();
    let _ = holder.wait();
    let killed = Instant::now();
    let guard = locks
        .lock(&name)
        .wait(Duration::from_secs(60))
        .acquire()
        .await
        .expect("the killed holder's node goes with its session");
    eprintln!(
        "a killed holder's lock passed on {:?} after the kill (session timeout 4 s)",
        killed.elapsed()
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}
