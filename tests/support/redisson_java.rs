//! The real Redisson (Java), driven over stdin/stdout.
//!
//! `interop/redisson/` is a Maven project that builds one runnable jar around a pinned
//! Redisson release; its README describes the line protocol. [`JavaRedisson::start`] builds
//! the jar when it is missing or older than its sources (`mvn package`), starts it against a
//! single server, a cluster or a Sentinel, and waits until it is connected. Each test runs its
//! own JVM; it exits when this handle drops (end of its stdin, and `kill_on_drop`).
//!
//! Java and Maven are required: without them the tests fail with a message saying how to
//! install them, never skip.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::oneshot;

/// Where the Java side connects.
pub enum Deployment {
    /// One server: `redis://host:port`.
    Single(String),
    /// A cluster: tower-lock's `redis-cluster://host:port?node=host:port&…` URL.
    Cluster(String),
    /// Sentinels watching master `mymaster`: their `redis://host:port` addresses.
    Sentinel(Vec<String>),
}

impl Deployment {
    fn arguments(&self) -> Vec<String> {
        match self {
            Deployment::Single(url) => vec!["single".into(), url.clone()],
            Deployment::Cluster(url) => {
                let rest = url
                    .strip_prefix("redis-cluster://")
                    .expect("a redis-cluster:// URL");
                let (first, query) = rest.split_once('?').unwrap_or((rest, ""));
                let mut arguments = vec!["cluster".to_owned(), format!("redis://{first}")];
                arguments.extend(
                    query
                        .split('&')
                        .filter_map(|pair| pair.strip_prefix("node="))
                        .map(|node| format!("redis://{node}")),
                );
                arguments
            }
            Deployment::Sentinel(sentinels) => {
                let mut arguments = vec!["sentinel".to_owned(), "mymaster".to_owned()];
                arguments.extend(sentinels.iter().cloned());
                arguments
            }
        }
    }
}

/// One acquisition attempt's answer.
#[derive(Debug, Clone, Copy)]
pub struct JavaAcquire {
    pub acquired: bool,
    /// When Redisson returned (wall clock, microseconds: comparable across processes of one
    /// machine).
    pub at: SystemTime,
    pub token: Option<u64>,
}

/// One release's answer.
#[derive(Debug, Clone, Copy)]
pub struct JavaRelease {
    /// When `unlock()` was called (wall clock).
    pub started: SystemTime,
}

/// A witness loop's settings: see [`JavaRedisson::witness`].
pub struct Witness {
    pub rounds: u32,
    pub hold: Duration,
    /// The key INCRed on entry and DECRed on exit by every holder of either side.
    pub counter: String,
    /// The list each entry appends its side's mark to.
    pub log: String,
    pub mark: String,
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<String, String>>>>>;

/// A running Redisson client.
pub struct JavaRedisson {
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Pending,
    next_tag: AtomicU64,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// The Redisson version on the jar's class path.
    pub version: String,
    /// The client id: the first part of each owner id it writes.
    pub client_id: String,
    _child: Child,
}

impl JavaRedisson {
    /// Starts Redisson with its default lock watchdog (30 s).
    pub async fn start(deployment: Deployment) -> JavaRedisson {
        Self::start_with(deployment, None).await
    }

    /// Starts Redisson with `lockWatchdogTimeout` = `watchdog` (renewals every third of it).
    pub async fn start_with(deployment: Deployment, watchdog: Option<Duration>) -> JavaRedisson {
        let jar = tokio::task::spawn_blocking(super::redisson_jar::jar)
            .await
            .expect("jar build");
        let mut command = tokio::process::Command::new("java");
        command.args(["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-jar"]);
        command.arg(&jar);
        if let Some(watchdog) = watchdog {
            command.args(["--watchdog-ms".to_owned(), watchdog.as_millis().to_string()]);
        }
        command
            .args(deployment.arguments())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap_or_else(|e| {
            panic!("cannot run java ({e}); {}", super::redisson_jar::JAVA_HINT)
        });
        let stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let mut stderr_lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();

        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr_lines.next_line().await {
                let mut tail = tail.lock().unwrap();
                if tail.len() == 200 {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });

        let ready = tokio::time::timeout(Duration::from_secs(60), stdout.next_line()).await;
        let ready = match ready {
            Ok(Ok(Some(line))) if line.starts_with("ready ") => line,
            other => panic!(
                "Redisson did not start ({other:?}); its stderr:\n{}",
                stderr
                    .lock()
                    .unwrap()
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        };
        let mut words = ready.split_whitespace().skip(1);
        let version = words.next().unwrap_or_default().to_owned();
        let client_id = words.next().unwrap_or_default().to_owned();

        let pending: Pending = Arc::default();
        let answers = pending.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                let mut words = line.splitn(3, ' ');
                let tag = words.next().and_then(|t| t.parse::<u64>().ok());
                let status = words.next();
                let rest = words.next().unwrap_or_default().to_owned();
                let Some(reply) = tag.and_then(|tag| answers.lock().unwrap().remove(&tag)) else {
                    continue;
                };
                let _ = reply.send(if status == Some("ok") {
                    Ok(rest)
                } else {
                    Err(rest)
                });
            }
            // The process ended: every open request fails (its sender drops).
            answers.lock().unwrap().clear();
        });

        JavaRedisson {
            stdin: tokio::sync::Mutex::new(stdin),
            pending,
            next_tag: AtomicU64::new(1),
            stderr,
            version,
            client_id,
            _child: child,
        }
    }

    /// Sends one command (without its tag) and waits for its answer: `Ok(fields)`, or
    /// `Err("<exception> <message>")` when Redisson threw.
    pub async fn call(&self, command: &str) -> Result<String, String> {
        let tag = self.next_tag.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(tag, tx);
        let written = {
            let mut stdin = self.stdin.lock().await;
            match stdin
                .write_all(format!("{tag} {command}\n").as_bytes())
                .await
            {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            }
        };
        if let Err(e) = written {
            panic!("Redisson's stdin closed ({e}); {}", self.stderr_tail());
        }
        match rx.await {
            Ok(answer) => answer,
            Err(_) => panic!("Redisson exited during `{command}`; {}", self.stderr_tail()),
        }
    }

    async fn expect(&self, command: &str) -> String {
        match self.call(command).await {
            Ok(fields) => fields,
            Err(error) => panic!(
                "Redisson failed `{command}`: {error}; {}",
                self.stderr_tail()
            ),
        }
    }

    /// `lock`: waits `wait` (`None`: forever) for lock `kind` of `name` as `holder` (one
    /// Java thread per holder), with `lease` (`None`: Redisson's watchdog).
    pub async fn lock(
        &self,
        holder: &str,
        kind: &str,
        name: &str,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> JavaAcquire {
        let fields = self
            .expect(&format!(
                "lock {holder} {kind} {} {} {}",
                word(name),
                millis(wait),
                millis(lease)
            ))
            .await;
        JavaAcquire {
            acquired: fields.starts_with("acquired"),
            at: epoch(field(&fields, "at_us").expect("at_us")),
            token: field(&fields, "token"),
        }
    }

    /// `unlock()` as `holder`; `Err` carries Redisson's exception (e.g. not held).
    pub async fn unlock(
        &self,
        holder: &str,
        kind: &str,
        name: &str,
    ) -> Result<JavaRelease, String> {
        let fields = self
            .call(&format!("unlock {holder} {kind} {}", word(name)))
            .await?;
        Ok(JavaRelease {
            started: epoch(field(&fields, "start_us").expect("start_us")),
        })
    }

    /// `getHoldCount()` of `holder`.
    pub async fn hold_count(&self, holder: &str, kind: &str, name: &str) -> u64 {
        let count = self
            .expect(&format!("hold_count {holder} {kind} {}", word(name)))
            .await;
        count.parse().expect("a count")
    }

    /// `isHeldByCurrentThread()` of `holder`.
    pub async fn held(&self, holder: &str, kind: &str, name: &str) -> bool {
        self.expect(&format!("held {holder} {kind} {}", word(name)))
            .await
            == "true"
    }

    /// The owner id `holder`'s holds are stored under (`<client id>:<thread id>`).
    pub async fn owner(&self, holder: &str) -> String {
        self.expect(&format!("owner {holder}")).await
    }

    /// `isLocked()`.
    pub async fn is_locked(&self, kind: &str, name: &str) -> bool {
        self.expect(&format!("is_locked {kind} {}", word(name)))
            .await
            == "true"
    }

    /// `forceUnlock()`: whether there was a lock to delete.
    pub async fn force_unlock(&self, kind: &str, name: &str) -> bool {
        self.expect(&format!("force_unlock {kind} {}", word(name)))
            .await
            == "true"
    }

    /// Takes the lock `witness.rounds` times as `holder`; inside each hold INCRs the witness
    /// counter (a value other than 1 is a violation), appends its mark to the witness log,
    /// holds `witness.hold`, DECRs. Returns the violations Redisson's side saw.
    pub async fn witness(&self, holder: &str, kind: &str, name: &str, witness: &Witness) -> u64 {
        let fields = self
            .expect(&format!(
                "witness {holder} {kind} {} {} {} {} {} {}",
                word(name),
                witness.rounds,
                witness.hold.as_micros(),
                word(&witness.counter),
                word(&witness.log),
                word(&witness.mark)
            ))
            .await;
        field(&fields, "violations").expect("violations")
    }

    /// `threads` Java threads taking `name` in turn for `duration`, each holding it `hold`
    /// and asking again at once, INCRing `counter` inside: each thread's holds, and the
    /// violations seen (a counter other than 1 on entry).
    pub async fn contend(
        &self,
        kind: &str,
        name: &str,
        threads: usize,
        hold: Duration,
        duration: Duration,
        counter: &str,
    ) -> (Vec<u64>, u64) {
        let fields = self
            .expect(&format!(
                "contend {kind} {} {threads} {} {} {}",
                word(name),
                hold.as_micros(),
                duration.as_millis(),
                word(counter)
            ))
            .await;
        let holds = fields
            .split_whitespace()
            .find_map(|f| f.strip_prefix("holds="))
            .expect("holds=")
            .split(',')
            .map(|n| n.parse().expect("a count"))
            .collect();
        (holds, field(&fields, "violations").expect("violations"))
    }

    fn stderr_tail(&self) -> String {
        let tail = self.stderr.lock().unwrap();
        format!(
            "Redisson's stderr (last lines):\n{}",
            tail.iter().cloned().collect::<Vec<_>>().join("\n")
        )
    }
}

/// The protocol splits on whitespace: names must not contain any.
fn word(name: &str) -> &str {
    assert!(
        !name.is_empty() && !name.contains(char::is_whitespace),
        "interop names are single words: {name:?}"
    );
    name
}

fn millis(duration: Option<Duration>) -> String {
    duration.map_or("-1".to_owned(), |d| d.as_millis().to_string())
}

fn field<T: std::str::FromStr>(fields: &str, name: &str) -> Option<T> {
    fields
        .split_whitespace()
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

fn epoch(micros: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(micros)
}

/// Microseconds from `earlier` to `later` (negative when `later` came first).
pub fn micros_between(earlier: SystemTime, later: SystemTime) -> i64 {
    match later.duration_since(earlier) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}
