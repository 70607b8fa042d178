//! Exclusion checker on ZooKeeper or MySQL / MariaDB: tasks of this process take one lock
//! over and over, and every holder — of this process, another, or a Java process on Curator
//! writing the same file — appends `+` on entry and `-` on exit to a witness file. Two
//! holders at once leave `++` in it.
//!
//! ```text
//! cargo run --features zookeeper --example witness_checker -- zookeeper://<hosts>/<root> check <name> <tasks> <rounds> <witness file>
//! cargo run --features mysql --example witness_checker -- mysql://<user>:<password>@<host>/<database> hold <name>   # hold until killed
//! ```
//! `check` prints `acquisitions=… errors=…` and exits 1 on any error; each hold lasts
//! 0–2 ms and every wait up to 60 s. `hold` prints `held` once it holds the lock, then
//! sleeps (for a test to kill it). ZooKeeper sessions here time out after 4 s.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::LockManager;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [backend, command, name, rest @ ..] = args.as_slice() else {
        return usage();
    };
    let locks = match manager(backend).await {
        Ok(locks) => locks,
        Err(error) => {
            eprintln!("cannot use {backend}: {error}");
            return ExitCode::FAILURE;
        }
    };
    match (command.as_str(), rest) {
        ("hold", []) => {
            let _guard = locks
                .lock(name)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
                .expect("acquire");
            println!("held");
            std::future::pending::<()>().await;
            ExitCode::SUCCESS
        }
        ("check", [tasks, rounds, witness]) => {
            let (Ok(tasks), Ok(rounds)) = (tasks.parse::<usize>(), rounds.parse::<u64>()) else {
                return usage();
            };
            check(&locks, name, tasks, rounds, witness).await
        }
        _ => usage(),
    }
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: witness_checker <backend> check <name> <tasks> <rounds> <witness file>\n       \
         witness_checker <backend> hold <name>\n\
         <backend>: zookeeper://<hosts>/<root> or mysql://<user>:<password>@<host>/<database>"
    );
    ExitCode::FAILURE
}

/// A manager on the backend `spec` names.
async fn manager(spec: &str) -> Result<LockManager, String> {
    if let Some(rest) = spec.strip_prefix("zookeeper://") {
        return zookeeper(rest).await;
    }
    if spec.starts_with("mysql://") {
        return mysql(spec).await;
    }
    Err("not a zookeeper:// or mysql:// address".into())
}

#[cfg(feature = "zookeeper")]
async fn zookeeper(hosts_and_root: &str) -> Result<LockManager, String> {
    let (hosts, root) = hosts_and_root
        .split_once('/')
        .map_or((hosts_and_root, "/tower-lock".to_owned()), |(h, r)| {
            (h, format!("/{r}"))
        });
    let backend = tower_lock::backend::ZooKeeperBackend::builder(hosts)
        .root(root)
        .session_timeout(Duration::from_secs(4))
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    Ok(LockManager::builder().backend(backend))
}

#[cfg(not(feature = "zookeeper"))]
async fn zookeeper(_: &str) -> Result<LockManager, String> {
    Err("built without ZooKeeper: run it with `--features zookeeper`".into())
}

#[cfg(feature = "mysql")]
async fn mysql(url: &str) -> Result<LockManager, String> {
    let backend = tower_lock::backend::MySqlBackend::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    Ok(LockManager::builder().backend(backend))
}

#[cfg(not(feature = "mysql"))]
async fn mysql(_: &str) -> Result<LockManager, String> {
    Err("built without MySQL: run it with `--features mysql`".into())
}

async fn check(
    locks: &LockManager,
    name: &str,
    tasks: usize,
    rounds: u64,
    witness: &str,
) -> ExitCode {
    let (acquisitions, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let runs: Vec<_> = (0..tasks)
        .map(|task| {
            let (locks, name, witness) = (locks.clone(), name.to_owned(), witness.to_owned());
            let (acquisitions, errors) = (acquisitions.clone(), errors.clone());
            tokio::spawn(async move {
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&witness)
                    .expect("open the witness file");
                for round in 0..rounds {
                    let guard = match locks
                        .lock(&name)
                        .wait(Duration::from_secs(60))
                        .acquire()
                        .await
                    {
                        Ok(guard) => guard,
                        Err(error) => {
                            eprintln!("task {task}: {error}");
                            errors.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    file.write_all(b"+").expect("witness");
                    tokio::time::sleep(Duration::from_micros((round % 3) * 700)).await;
                    file.write_all(b"-").expect("witness");
                    acquisitions.fetch_add(1, Ordering::Relaxed);
                    if let Err(error) = guard.release().await {
                        eprintln!("task {task}: {error}");
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for run in runs {
        let _ = run.await;
    }
    let (acquisitions, errors) = (
        acquisitions.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
    );
    println!("acquisitions={acquisitions} errors={errors}");
    if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
