//! Semaphores across real processes (`examples/semaphore_checker.rs`): 64 workers over two
//! processes never have more than the limit inside (a witness counter in Redis) and are
//! all served; the permits of a process killed while it holds them come back within their
//! lease, and a waiter of another process takes them.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::RedisServer;
use tokio::io::{AsyncBufReadExt, BufReader};
use tower_lock::lock::Released;
use tower_lock::LockManager;

fn checker() -> Command {
    Command::new(support::example("semaphore_checker"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_than_the_limit_across_two_processes_and_everyone_served() {
    let server = RedisServer::start();
    let url = server.url();
    let name = support::unique("sem:processes");
    let (workers, rounds) = (32, 5);
    let processes: Vec<_> = (0..2)
        .map(|_| {
            checker()
                .args([
                    &url,
                    "workers",
                    &name,
                    "8",
                    &workers.to_string(),
                    &rounds.to_string(),
                    "2",
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start semaphore_checker (cargo build --examples)")
        })
        .collect();
    for process in processes {
        let output = tokio::task::spawn_blocking(move || process.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let report = String::from_utf8_lossy(&output.stdout).into_owned();
        eprintln!("{report}");
        assert!(output.status.success(), "a checker failed: {report}");
        let field = |name: &str| -> u64 {
            report
                .split_whitespace()
                .find_map(|part| part.strip_prefix(&format!("{name}=")))
                .and_then(|value| value.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {report}"))
        };
        assert_eq!(field("violations"), 0);
        assert!(field("max_inside") <= 8, "{report}");
        assert_eq!(
            field("acquisitions"),
            workers * rounds,
            "every worker is served"
        );
        assert_eq!(field("min_per_worker"), rounds);
    }
    let locks = LockManager::redis(&url).await.unwrap();
    let usage = locks.semaphore_usage(&name).await.unwrap();
    assert_eq!((usage.limit, usage.in_use), (Some(8), 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_permits_come_back_within_their_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let name = support::unique("sem:killed");
    let lease = Duration::from_secs(1);
    let mut holder = tokio::process::Command::new(support::example("semaphore_checker"))
        .args([
            &url,
            "hold",
            &name,
            "8",
            "5",
            &lease.as_millis().to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start semaphore_checker (cargo build --examples)");
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    assert_eq!(lines.next_line().await.unwrap().as_deref(), Some("held"));
    let locks = LockManager::redis(&url).await.unwrap();
    let mine = locks
        .semaphore(&name, 8)
        .permits(3)
        .try_acquire()
        .await
        .unwrap();
    // Past three of its leases the holder still holds: its watchdog renews its permits.
    tokio::time::sleep(lease * 3).await;
    assert!(locks.semaphore(&name, 8).try_acquire().await.is_err());
    assert_eq!(locks.semaphore_usage(&name).await.unwrap().in_use, 8);
    holder.start_kill().unwrap();
    holder.wait().await.unwrap();
    let killed = Instant::now();
    // Its five permits come back when their lease ends: a waiter for all five gets them
    // within a wait of two leases.
    let five = locks
        .semaphore(&name, 8)
        .permits(5)
        .wait(lease * 2)
        .acquire()
        .await
        .expect("the killed process's permits came back within their lease");
    eprintln!(
        "the permits came back {:?} after the kill",
        killed.elapsed()
    );
    assert_eq!(five.release().await.unwrap(), Released::Unlocked);
    assert_eq!(mine.release().await.unwrap(), Released::Unlocked);
}
