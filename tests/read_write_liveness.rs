//! Liveness of the read-write lock across real processes (`examples/read_write_checker.rs`),
//! with CPU hogs beside the test: a mixed load of readers and writers never goes 2 s without a
//! grant while someone waits, and a writer killed while it waits holds nobody back for long.
//!
//! The 2 s bounds are the guarantee itself (a waiting writer's mark lives 1.5 s unless its
//! writer renews it), not a speed: a stall that waits for a lease runs for 30 s.

mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fred::prelude::*;
use support::RedisServer;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The longest time without a grant while someone waits that the mixed load may show.
const STALL: Duration = Duration::from_secs(2);

/// Busy loops in processes of their own, stopped when dropped.
struct CpuHogs(Vec<Child>);

impl CpuHogs {
    fn start(count: usize) -> CpuHogs {
        CpuHogs(
            (0..count)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .expect("start a busy shell loop")
                })
                .collect(),
        )
    }
}

impl Drop for CpuHogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

/// One acquisition of the mixed load: when it was asked, when granted (`None`: it failed),
/// a read or a write (`r`, `w`), and the process.
#[derive(Debug, Clone, Copy)]
struct Acquisition {
    asked: u64,
    granted: Option<u64>,
    side: char,
    process: usize,
}

fn read_events(path: &std::path::Path, process: usize) -> Vec<Acquisition> {
    let text = std::fs::read_to_string(path).expect("the checker's events");
    text.lines()
        .map(|line| {
            let mut fields = line.split(' ');
            let mut field = || fields.next().expect("`<asked> <granted> <r|w>`");
            Acquisition {
                asked: field().parse().unwrap(),
                granted: field().parse().ok(),
                side: field().chars().next().unwrap(),
                process,
            }
        })
        .collect()
}

/// What happened around a stall that began at `since` and lasted `stall` µs: who waited,
/// and who was granted the lock at its end.
fn around(acquisitions: &[Acquisition], since: u64, stall: u64) -> String {
    let end = since + stall;
    let mut lines: Vec<String> = acquisitions
        .iter()
        .filter(|a| a.asked <= end && a.granted.is_none_or(|g| g >= since))
        .map(|a| {
            let granted = a.granted.map_or("never".to_owned(), |g| {
                format!("{:+} ms", (g as i64 - since as i64) / 1000)
            });
            format!(
                "  process {} {}: asked {:+} ms, granted {granted}",
                a.process,
                a.side,
                (a.asked as i64 - since as i64) / 1000
            )
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

/// The longest time (µs) during which someone waited and nobody was granted the lock, with
/// when it began.
fn longest_stall(acquisitions: &[Acquisition]) -> (u64, u64) {
    // (time, +1 a wait begins / -1 it ends, whether it ended in a grant)
    let mut events: Vec<(u64, i32, bool)> = Vec::new();
    for &Acquisition { asked, granted, .. } in acquisitions {
        events.push((asked, 1, false));
        match granted {
            Some(granted) => events.push((granted, -1, true)),
            // A failed wait lasted 10 s at most; the run fails on it anyway.
            None => events.push((asked + 10_000_000, -1, false)),
        }
    }
    events.sort_unstable();
    let (mut waiting, mut since, mut longest) = (0i64, 0u64, (0u64, 0u64));
    for (at, change, granted) in events {
        if waiting > 0 && (granted || change < 0) {
            longest = longest.max((at - since, since));
        }
        if granted || waiting == 0 {
            since = at;
        }
        waiting += i64::from(change);
        if waiting == 0 {
            since = at;
        }
    }
    longest
}

fn mix(url: &str, name: &str, tasks: u32, seconds: u32, events: &std::path::Path) -> Child {
    Command::new(support::example("read_write_checker"))
        .args([url, "mix", name, &tasks.to_string(), &seconds.to_string()])
        .arg(events)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start read_write_checker")
}

/// Runs the mixed load in `processes` processes of `tasks` tasks each, three rounds of 20 s
/// beside two CPU hogs: every acquisition granted within its wait, no overlap, and never
/// `STALL` without a grant while someone waits.
fn mixed_load(processes: usize, tasks: u32) {
    let server = RedisServer::start();
    let url = server.url();
    let dir = std::env::temp_dir().join(format!("tower-lock-rw-{}", support::unique("mix")));
    std::fs::create_dir_all(&dir).unwrap();
    let _hogs = CpuHogs::start(2);
    for round in 1..=3 {
        let name = format!("rw:mix:{round}");
        let files: Vec<_> = (0..processes)
            .map(|p| dir.join(format!("{round}-{p}.events")))
            .collect();
        let checkers: Vec<_> = files
            .iter()
            .map(|file| mix(&url, &name, tasks, 20, file))
            .collect();
        let mut acquisitions = Vec::new();
        for (process, (checker, file)) in checkers.into_iter().zip(&files).enumerate() {
            let output = checker.wait_with_output().expect("the checker ends");
            let summary = String::from_utf8_lossy(&output.stdout);
            eprintln!("round {round}: {}", summary.trim());
            assert!(
                output.status.success(),
                "round {round}: a checker failed (violations, time-outs or errors): {summary}"
            );
            acquisitions.extend(read_events(file, process));
        }
        let (stall, since) = longest_stall(&acquisitions);
        eprintln!(
            "round {round}: {} acquisitions, longest time without a grant while someone \
             waited: {} ms",
            acquisitions.len(),
            stall / 1000
        );
        if stall > 100_000 {
            eprintln!("{}", around(&acquisitions, since, stall));
        }
        assert!(
            Duration::from_micros(stall) < STALL,
            "round {round}: nobody was granted the lock for {} ms (from {since} µs after the \
             epoch) while someone waited",
            stall / 1000
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_processes_of_readers_and_writers_never_stall() {
    mixed_load(2, 16);
}

#[test]
fn one_process_of_readers_and_writers_never_stalls() {
    mixed_load(1, 32);
}

/// The lines a child prints, read as they come.
fn lines(child: &mut Child) -> tokio::io::Lines<BufReader<tokio::process::ChildStdout>> {
    let stdout = child.stdout.take().expect("piped stdout");
    let stdout = tokio::process::ChildStdout::from_std(stdout).expect("a Tokio pipe");
    BufReader::new(stdout).lines()
}

async fn expect_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    want: &str,
    who: &str,
) {
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("{who} printed nothing within 30 s"))
        .expect("read the child's output");
    assert_eq!(line.as_deref(), Some(want), "{who}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_killed_while_it_waits_holds_readers_back_for_seconds_not_a_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let _hogs = CpuHogs::start(2);
    let name = "rw:dead-writer";
    let marks = format!("{{{name}}}:tower_lock:waiting_writers");

    // A: one long read, and overlapping readers of 200 ms beside it.
    let mut reader_a = Command::new(support::example("read_write_checker"))
        .args([url.as_str(), "stream", name, "8", "200", "long"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start read_write_checker");
    expect_line(&mut lines(&mut reader_a), "reading", "process A").await;
    support::eventually("A's readers read", || async {
        (support::counter(&redis, &format!("{name}:reads")).await >= 8).then_some(())
    })
    .await;

    // B asks to write (and marks its wait behind A's long read), and is killed 500 ms later.
    let mut writer_b = Command::new(support::example("lock_checker"))
        .args([url.as_str(), "hold", name, "30000", "write"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lock_checker");
    support::eventually("B marks its wait", || async {
        let marked: i64 = redis.zcard(&marks).await.unwrap();
        (marked == 1).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let marked: i64 = redis.zcard(&marks).await.unwrap();
    assert_eq!(
        marked, 1,
        "B still waits when it is killed (A's long read keeps it out)"
    );
    // C asks to read while B's mark holds new readers back.
    let mut reader_c = Command::new(support::example("read_write_checker"))
        .args([url.as_str(), "read", name])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start read_write_checker");
    let mut c_lines = lines(&mut reader_c);
    expect_line(&mut c_lines, "asking", "process C").await;

    writer_b.kill().unwrap();
    let killed = Instant::now();
    let _ = writer_b.wait();
    let reads_at_kill = support::counter(&redis, &format!("{name}:reads")).await;
    expect_line(&mut c_lines, "held", "process C").await;
    let c_waited = killed.elapsed();
    eprintln!("C held its read {c_waited:?} after B was killed");
    assert!(
        c_waited < STALL,
        "C held its read {c_waited:?} after the waiting writer was killed: its mark must end \
         within about {STALL:?}, not one lease"
    );
    support::eventually("A's readers read on", || async {
        (support::counter(&redis, &format!("{name}:reads")).await > reads_at_kill + 8).then_some(())
    })
    .await;
    for child in [&mut reader_a, &mut reader_c] {
        child.kill().unwrap();
        let _ = child.wait();
    }
}
