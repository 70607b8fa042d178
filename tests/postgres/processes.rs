//! Real processes on one name: they exclude each other (a witness row counts who is
//! inside), and a holder killed with SIGKILL hands the lock to a waiter of another process
//! as soon as the server ends its session.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tower_lock::lock::Released;

use crate::support;

fn checker(args: &[&str]) -> Command {
    let mut command = Command::new(support::example("postgres_checker"));
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

/// `field=value` of a checker's summary line.
fn field(stdout: &str, name: &str) -> u64 {
    stdout
        .split_whitespace()
        .find_map(|f| f.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {stdout}"))
}

async fn processes_exclude_each_other(processes: usize) {
    let url = support::postgres::shared_url();
    let name = support::unique(&format!("processes-{processes}"));
    let checkers: Vec<_> = (0..processes)
        .map(|_| checker(&[&url, "check", &name, "8", "3"]).spawn().unwrap())
        .collect();
    let mut total = 0;
    for child in checkers {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "a checker failed: {stdout}");
        assert_eq!(field(&stdout, "violations"), 0, "{stdout}");
        assert_eq!(field(&stdout, "errors"), 0, "{stdout}");
        assert!(field(&stdout, "acquisitions") > 0, "{stdout}");
        total += field(&stdout, "acquisitions");
    }
    eprintln!("{processes} processes: {total} acquisitions in all");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_exclude_each_other() {
    processes_exclude_each_other(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_exclude_each_other() {
    processes_exclude_each_other(4).await;
}

/// A holder process SIGKILLed: the server ends its session and hands the lock to the
/// waiter of another process, which was waiting in the server's queue and sent nothing
/// more meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_lock_goes_to_the_waiting_process() {
    let url = support::postgres::shared_url();
    let name = support::unique("killed");
    let mut holder = checker(&[&url, "hold", &name]).spawn().unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    let (locks, backend) = crate::manager(&url);
    let waiter = support::spawn_waiter(&locks, &name, Duration::from_secs(60));
    let watcher = crate::pool(&url);
    support::eventually("the waiter waits in the server's queue", || async {
        (!crate::sessions_of(&watcher, &name, false).await.is_empty()).then_some(())
    })
    .await;
    let sent = backend.statements_sent();
    let killed = Instant::now();
    holder.kill().unwrap(); // SIGKILL while it holds the lock
    let _ = holder.wait();
    let guard = waiter
        .await
        .unwrap()
        .expect("the waiter gets the lock once the server ends the holder's session");
    eprintln!(
        "the waiter held the lock {:?} after the holder was killed",
        killed.elapsed()
    );
    assert_eq!(
        backend.statements_sent(),
        sent,
        "the waiter was handed the lock by the server: it sent nothing more"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    support::nothing_left_behind(&locks).await;
}
