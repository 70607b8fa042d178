//! The real Apache Curator (Java), driven over stdin/stdout: `interop/curator/` is a Maven
//! project around a pinned Curator release (its README describes the line protocol). Each
//! test runs its own JVM, killed when its handle drops.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::oneshot;

const HINT: &str = "the Curator interop tests need Java 17+ and Maven: install them with \
`apt-get install -y openjdk-17-jdk-headless maven` (or run `./scripts/test.sh`, which installs \
them when absent)";

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<String>>>>;

/// A JVM with a Curator client connected to ZooKeeper.
pub struct JavaCurator {
    child: Child,
    stdin: ChildStdin,
    pending: Pending,
}

impl JavaCurator {
    /// Builds the jar if needed, starts it against `hosts` (session timeout 10 s) and waits
    /// until it is connected.
    pub async fn start(hosts: &str) -> JavaCurator {
        Self::start_with(hosts, Duration::from_secs(10)).await
    }

    /// As [`start`](Self::start), with the session timeout given.
    pub async fn start_with(hosts: &str, session: Duration) -> JavaCurator {
        let jar = super::redisson_jar::built("curator", "curator-interop.jar", HINT);
        let mut child = tokio::process::Command::new("java")
            .args([
                "-Xmx128m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-jar",
            ])
            .arg(jar)
            .arg(hosts)
            .arg(session.as_millis().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start java: {e}; {HINT}"));
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("Curator connects within a minute")
            .unwrap();
        assert_eq!(first.as_deref(), Some("ready"), "Curator's first line");
        let pending: Pending = Arc::default();
        let replies = pending.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let (id, rest) = line.split_once(' ').unwrap_or((&line, ""));
                if let Some(reply) = replies.lock().unwrap().remove(id) {
                    let _ = reply.send(rest.to_owned());
                }
            }
        });
        JavaCurator {
            child,
            stdin,
            pending,
        }
    }

    /// Sends `<id> <command>`; the answer (without the id) arrives on the receiver.
    pub async fn send(&mut self, id: &str, command: &str) -> oneshot::Receiver<String> {
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id.to_owned(), tx);
        self.stdin
            .write_all(format!("{id} {command}\n").as_bytes())
            .await
            .expect("write to Curator");
        self.stdin.flush().await.unwrap();
        rx
    }

    /// Sends and waits for the answer.
    pub async fn ask(&mut self, id: &str, command: &str) -> String {
        let answer = self.send(id, command).await;
        tokio::time::timeout(Duration::from_secs(120), answer)
            .await
            .unwrap_or_else(|_| panic!("Curator answers `{command}` within two minutes"))
            .expect("Curator's answer")
    }

    /// Kills the JVM (SIGKILL): its session lives until the server expires it.
    pub async fn kill(&mut self) {
        self.child.kill().await.expect("kill the JVM");
    }
}

/// The time in an answer like `acquired <µs>`.
pub fn answer_time(answer: &str) -> SystemTime {
    let micros: u64 = answer
        .split_whitespace()
        .nth(1)
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no time in {answer:?}"));
    UNIX_EPOCH + Duration::from_micros(micros)
}
