//! Real processes on one name: they exclude each other (a witness file they all write),
//! and a holder killed with SIGKILL hands the lock on once the server expires its session.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tower_lock::backend::ZooKeeperBackend;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::{self, zookeeper};

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
    let backend = format!("zookeeper://{}/tower-lock", zookeeper::shared_hosts());
    let name = support::unique("zk-processes");
    let file = std::env::temp_dir().join(format!("tower-lock-witness-{name}"));
    let file_arg = file.display().to_string();
    let checkers: Vec<_> = (0..3)
        .map(|_| {
            checker(&[&backend, "check", &name, "4", "40", &file_arg])
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
    assert_eq!(total, 3 * 4 * 40);
    assert!(!witness.contains("++"), "two holders at once: {witness}");
    assert_eq!(witness, "+-".repeat(total));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_holder_passes_the_lock_on_when_its_session_expires() {
    let hosts = zookeeper::shared_hosts();
    let name = support::unique("zk-killed");
    let backend = format!("zookeeper://{hosts}/tower-lock");
    let mut holder = checker(&[&backend, "hold", &name]).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
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
