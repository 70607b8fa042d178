//! The examples build with the test suite; the demo also runs to completion.

use std::path::PathBuf;
use std::process::Command;

fn example(name: &str) -> PathBuf {
    // target/<profile>/deps/<this test> → target/<profile>/examples/<name>
    let mut path = std::env::current_exe().expect("test executable path");
    path.pop();
    path.pop();
    path.push("examples");
    path.push(name);
    path
}

#[test]
fn demo_runs_and_shows_the_lock_at_work() {
    let demo = example("demo");
    assert!(
        demo.exists(),
        "{} was not built (cargo test builds examples)",
        demo.display()
    );
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
