//! Real processes on one name: they exclude each other (a witness file they all write),
//! and a holder killed with SIGKILL hands the lock to a waiter of another process as soon as
//! the server sees its connection close.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tower_lock::backend::MySqlBackend;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::{self, mariadb};

fn checker(args: &[&str]) -> Command {
    let mut command = Command::new(support::example("witness_checker"));
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// `field=value` of a checker's summary line.
fn field(stdout: &str, name: &str) -> usize {
    stdout
        .split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_exclude_each_other() {
    let url = mariadb::shared_url();
    let name = support::unique("mysql-processes");
    let file = std::env::temp_dir().join(format!("tower-lock-witness-{name}"));
    let file_arg = file.display().to_string();
    let checkers: Vec<_> = (0..3)
        .map(|_| {
            checker(&[&url, "check", &name, "4", "50", &file_arg])
                .spawn()
                .unwrap()
        })
        .collect();
    let mut total = 0;
    for child in checkers {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "a checker failed: {stdout}");
        assert_eq!(field(&stdout, "errors"), 0, "{stdout}");
        total += field(&stdout, "acquisitions");
    }
    let witness = std::fs::read_to_string(&file).unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(total, 3 * 4 * 50);
    assert!(!witness.contains("++"), "two holders at once");
    assert_eq!(witness, "+-".repeat(total));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_holder_passes_the_lock_on_at_once() {
    let url = mariadb::shared_url();
    let name = support::unique("mysql-killed");
    let mut holder = checker(&[&url, "hold", &name]).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
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
