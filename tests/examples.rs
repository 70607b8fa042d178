//! The examples build with the test suite; the demo also runs to completion.

mod support;

use std::process::Command;

#[test]
fn demo_runs_and_shows_the_lock_at_work() {
    let demo = support::example("demo");
    let output = Command::new(&demo)
        .env_remove("REDIS_URL")
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
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
