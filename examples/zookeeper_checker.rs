//! Exclusion checker on ZooKeeper: tasks of this process take one lock over and over, and
//! every holder — of this process, another, or a Java process on Curator writing the same
//! file — appends `+` on entry and `-` on exit to a witness file. Two holders at once leave
//! `++` in it.
//!
//! ```text
//! cargo run --features zookeeper --example zookeeper_checker -- <hosts> check <root> <name> <tasks> <rounds> <witness file>
//! cargo run --features zookeeper --example zookeeper_checker -- <hosts> hold <root> <name>   # hold until killed
//! ```
//! `check` prints `acquisitions=… errors=…` and exits 1 on any error; each hold lasts
//! 0–2 ms and every wait up to 60 s. `hold` prints `held` once it holds the lock, then
//! sleeps (for a test to kill it).

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tower_lock::backend::ZooKeeperBackend;
use tower_lock::LockManager;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [hosts, command, root, name, rest @ ..] = args.as_slice() else {
        return usage();
    };
    let backend = match ZooKeeperBackend::builder(hosts.as_str())
        .root(root.as_str())
        .session_timeout(Duration::from_secs(4))
        .connect()
        .await
    {
        Ok(backend) => backend,
        Err(error) => {
            eprintln!("cannot connect to ZooKeeper at {hosts}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let locks = LockManager::builder().backend(backend);
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
        "usage: zookeeper_checker <hosts> check <root> <name> <tasks> <rounds> <witness file>\n       \
         zookeeper_checker <hosts> hold <root> <name>"
    );
    ExitCode::FAILURE
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
