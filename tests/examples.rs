//! The examples build with the test suite; the demo also runs to completion, in memory and
//! on PostgreSQL.

mod support;

use std::process::Command;

#[test]
fn demo_runs_and_shows_the_lock_at_work() {
    demo_works(None);
}

/// The demo on PostgreSQL (`DATABASE_URL`).
#[test]
fn the_demo_runs_on_postgres() {
    demo_works(Some(support::postgres::shared_url()));
}

fn demo_works(database: Option<String>) {
    let demo = support::example("demo");
    let mut command = Command::new(&demo);
    command.env_remove("REDIS_URL").env_remove("DATABASE_URL");
    if let Some(url) = &database {
        command.env("DATABASE_URL", url);
    }
    let output = command.output().expect("run the demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    if database.is_some() {
        assert!(stdout.contains("backend: PostgreSQL"), "{stdout}");
    }
    assert!(
        output.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("same order overlapping in the handler: 0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("OK: the lock serialised each order"),
        "{stdout}"
    );
}

/// The operators' command line against a real Redis: inspect, list, unlock, and its exit
/// codes for nothing there and bad usage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_locks_command_inspects_lists_and_unlocks() {
    let server = support::RedisServer::start();
    let url = server.url();
    // A lease of 1 s, renewed every third of it: the holder learns of the unlock quickly.
    let locks = tower_lock::LockManager::builder()
        .lease(std::time::Duration::from_secs(1))
        .redis(&url)
        .await
        .unwrap();
    let guard = locks.lock("order:42").acquire().await.unwrap();
    let run = |args: &[&str]| {
        let output = Command::new(support::example("locks"))
            .args(args)
            .env("REDIS_URL", &url)
            .output()
            .expect("run the locks example");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
        )
    };
    let (code, out) = run(&["inspect", "order:42"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("order:42: lock"), "{out}");
    assert!(out.contains(guard.owner().as_str()), "{out}");
    let (code, out) = run(&["list", "order:*"]);
    assert_eq!((code, out.trim()), (Some(0), "order:42"));
    let (code, out) = run(&["unlock", "order:42"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("freed 1 hold(s) of the lock"), "{out}");
    guard.lost().await;
    let (code, out) = run(&["inspect", "order:42"]);
    assert_eq!(code, Some(3), "{out}");
    let (code, _) = run(&["frobnicate"]);
    assert_eq!(code, Some(2));
}
