//! Real processes on one name: they exclude each other (a witness file they all write),
//! and a holder killed with SIGKILL hands the lock to a waiter of another process as soon as
//! the server sees its connection close.

use std::time::{Duration, Instant};

use tower_lock::backend::MySqlBackend;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::{self, mariadb, witness};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_exclude_each_other() {
    let backend = mariadb::shared_url();
    let name = support::unique("mysql-processes");
    witness::processes_exclude_each_other(&backend, &name, 3, 4, 50).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_holder_passes_the_lock_on_at_once() {
    let url = mariadb::shared_url();
    let name = support::unique("mysql-killed");
    let mut holder = witness::holding_process(&url, &name);
    let locks = LockManager::builder().backend(MySqlBackend::connect(&url).await.unwrap());
    assert!(matches!(
        locks.lock(&name).try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    let waiter = {
        let (locks, name) = (locks.clone(), name.clone());
        tokio::spawn(async move {
            locks
                .lock(&name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
        })
    };
    holder.kill().unwrap();
    let _ = holder.wait();
    let killed = Instant::now();
    let guard = waiter
        .await
        .unwrap()
        .expect("the killed holder's lock goes with its connection");
    eprintln!(
        "a killed holder's lock passed on {:?} after the kill",
        killed.elapsed()
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}
