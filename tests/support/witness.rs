//! Real processes on one lock, through `examples/witness_checker.rs`: every holder appends
//! `+` on entry and `-` on exit to one witness file, so two holders at once leave `++`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn checker(args: &[&str]) -> Command {
    let mut command = Command::new(super::example("witness_checker"));
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

/// `processes` checkers on `backend` (`zookeeper://…` or `mysql://…`), each with `tasks`
/// tasks taking the lock `name` `rounds` times: every acquisition made, no error, and the
/// witness file shows one holder at a time.
pub async fn processes_exclude_each_other(
    backend: &str,
    name: &str,
    processes: usize,
    tasks: usize,
    rounds: usize,
) {
    let file = std::env::temp_dir().join(format!("tower-lock-witness-{name}"));
    let file_arg = file.display().to_string();
    let (tasks_arg, rounds_arg) = (tasks.to_string(), rounds.to_string());
    let checkers: Vec<_> = (0..processes)
        .map(|_| {
            checker(&[backend, "check", name, &tasks_arg, &rounds_arg, &file_arg])
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
    assert_eq!(total, processes * tasks * rounds);
    assert!(!witness.contains("++"), "two holders at once");
    assert_eq!(witness, "+-".repeat(total));
}

/// A process on `backend` that holds the lock `name` (returned once it says so), for a test
/// to kill.
pub fn holding_process(backend: &str, name: &str) -> Child {
    let mut holder = checker(&[backend, "hold", name]).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "held");
    holder
}
