//! Test support: real `redis-server` processes on free loopback ports.
//!
//! `REDIS_URL` points the shared server at an existing Redis instead. Tests that stop or
//! restart Redis always start their own server.
#![allow(dead_code)]

pub mod cluster;
pub mod curator;
pub mod exactly_once;
pub mod http;
pub mod mariadb;
pub mod order;
pub mod postgres;
pub mod proxy;
pub mod redisson_jar;
pub mod redisson_java;
pub mod redisson_scripts;
pub mod subjects;
pub mod suite;
pub mod trace;
pub mod witness;
pub mod zookeeper;

// Shared with the conformance suite: waiting for an event, and every count back to zero.
#[allow(unused_imports)] // not every test binary uses each of them
pub use tower_lock::conformance::{background_releases_done, eventually, nothing_left_behind};

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use fred::prelude::*;

/// How to get redis-server, in every failure message.
const INSTALL_HINT: &str = "redis-server is needed for these tests: install it with \
`apt-get install -y redis-server` (or run `./scripts/test.sh`, which installs it when absent), \
or set REDIS_URL to an existing server";

/// A redis-server process owned by this test process. It stops when dropped, and also when
/// the test process dies (it runs under a shell that kills it once our stdin pipe closes).
pub struct RedisServer {
    port: u16,
    dir: std::path::PathBuf,
    /// Extra `redis-server` arguments (cluster mode, replication…).
    extra: Vec<String>,
    /// Runs as a Sentinel watching the master on this port.
    sentinel_of: Option<u16>,
    process: Option<(Child, ChildStdin)>,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it accepts connections. A
    /// port taken meanwhile by another listener (another test's server, a cluster bus) is
    /// given up for another.
    pub fn start() -> RedisServer {
        Self::start_with_retries(&[])
    }

    /// Starts a server on `port`.
    pub fn start_on(port: u16) -> RedisServer {
        Self::start_with(port, &[])
    }

    /// Starts a server on `port` with extra `redis-server` arguments.
    pub fn start_with(port: u16, extra: &[&str]) -> RedisServer {
        Self::try_start_with(port, extra).unwrap_or_else(|failure| panic!("{failure}"))
    }

    /// [`start`](Self::start) with extra arguments: on free ports, trying others while
    /// the one picked turns out taken.
    pub fn start_with_retries(extra: &[&str]) -> RedisServer {
        let mut last = String::new();
        for _ in 0..20 {
            match Self::try_start_with(free_port(), extra) {
                Ok(server) => return server,
                Err(StartFailure::PortTaken(why)) => last = why,
                Err(StartFailure::Other(why)) => panic!("{why}"),
            }
        }
        panic!("no free port for redis-server in 20 tries: {last}");
    }

    /// Starts a server on `port` with extra arguments, or says why it did not start.
    pub fn try_start_with(port: u16, extra: &[&str]) -> Result<RedisServer, StartFailure> {
        let dir =
            std::env::temp_dir().join(format!("tower-lock-redis-{}-{port}", std::process::id()));
        let mut server = RedisServer {
            port,
            dir,
            extra: extra.iter().map(|a| format!("'{a}'")).collect(),
            sentinel_of: None,
            process: None,
        };
        server.try_resume()?;
        Ok(server)
    }

    /// Starts a Sentinel on a free port watching the master at `master_port` as
    /// `mymaster` (quorum 1, down after 1 s).
    pub fn start_sentinel(master_port: u16) -> RedisServer {
        for _ in 0..20 {
            let port = free_port();
            let dir = std::env::temp_dir()
                .join(format!("tower-lock-sentinel-{}-{port}", std::process::id()));
            let mut server = RedisServer {
                port,
                dir,
                extra: Vec::new(),
                sentinel_of: Some(master_port),
                process: None,
            };
            match server.try_resume() {
                Ok(()) => return server,
                Err(StartFailure::PortTaken(_)) => continue,
                Err(StartFailure::Other(why)) => panic!("{why}"),
            }
        }
        panic!("no free port for a Sentinel in 20 tries");
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (SIGKILL: no persistence, as after a crash).
    pub fn stop(&mut self) {
        if let Some((mut child, stdin)) = self.process.take() {
            drop(stdin);
            let _ = child.wait();
        }
        // The shell kills redis-server when its stdin closes; wait until the port is free.
        for _ in 0..500 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("redis-server on port {} did not stop", self.port);
    }

    /// Whether the server runs (it was not stopped, or was resumed).
    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// Starts the server again on the same port (empty: nothing was persisted).
    pub fn resume(&mut self) {
        if let Err(failure) = self.try_resume() {
            panic!("{failure}");
        }
    }

    /// Starts the server process and waits until it is ready, or says why it is not: its
    /// port taken (it exits at once), or anything else it printed before it gave up.
    fn try_resume(&mut self) -> Result<(), StartFailure> {
        assert!(self.process.is_none(), "the server is running");
        // The shell removes it once the server is killed (see `stopping`).
        std::fs::create_dir_all(&self.dir).expect("create a directory for redis-server");
        let (script, ready_line) = match self.sentinel_of {
            Some(master) => {
                let conf = self.dir.join("sentinel.conf");
                std::fs::write(
                    &conf,
                    format!(
                        "port {port}\nbind 127.0.0.1\ndir {dir}\n\
                         sentinel monitor mymaster 127.0.0.1 {master} 1\n\
                         sentinel down-after-milliseconds mymaster 1000\n\
                         sentinel failover-timeout mymaster 5000\n",
                        port = self.port,
                        dir = self.dir.display()
                    ),
                )
                .expect("write sentinel.conf");
                (
                    format!(
                        "redis-server '{}' --sentinel & pid=$!; {}",
                        conf.display(),
                        self.stopping()
                    ),
                    "+monitor master",
                )
            }
            None => (self.server_script(), "Ready to accept connections"),
        };
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            panic!("{INSTALL_HINT}");
        }
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run sh to start redis-server ({e}); {INSTALL_HINT}")
            });
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        // Its output is read on a thread of its own (and drained for as long as it runs, so
        // that it never blocks on a full pipe): a server that exits without a word cannot
        // leave this waiting for ever (the shell around it keeps the pipe open).
        let (lines_tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines_tx = Some(lines_tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // Once nobody listens, it only drains.
                if lines_tx.as_ref().is_some_and(|tx| tx.send(line).is_err()) {
                    lines_tx = None;
                }
            }
        });
        let mut seen = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let failure = loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    let ready = line.contains(ready_line);
                    let taken = line.contains("Address already in use");
                    seen.push(line);
                    if ready {
                        self.process = Some((child, stdin));
                        return Ok(());
                    }
                    if taken {
                        break StartFailure::PortTaken(format!(
                            "port {} is taken: {}",
                            self.port,
                            seen.last().unwrap()
                        ));
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    break StartFailure::Other(format!(
                        "redis-server on port {} was not ready within 60 s:\n{}",
                        self.port,
                        seen.join("\n")
                    ))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break StartFailure::Other(format!(
                        "redis-server on port {} exited before it was ready:\n{}",
                        self.port,
                        seen.join("\n")
                    ))
                }
            }
        };
        // Closing its stdin ends the shell (and the server, if it runs).
        drop(stdin);
        let _ = child.wait();
        Err(failure)
    }

    fn server_script(&self) -> String {
        let script = format!(
            "redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no --dir '{dir}' {extra} & \
             pid=$!; {stopping}",
            port = self.port,
            dir = self.dir.display(),
            extra = self.extra.join(" "),
            stopping = self.stopping()
        );
        script
    }

    /// The end of the shell script: once our stdin pipe closes (on `stop`, on drop, or when
    /// the test process exits, also for servers kept in statics that are never dropped),
    /// kill the server and remove its directory (a cluster node writes its nodes file
    /// there).
    fn stopping(&self) -> String {
        format!(
            "read _; kill -9 $pid; wait $pid 2>/dev/null; rm -rf '{}'",
            self.dir.display()
        )
    }

    /// Suspends the server process (SIGSTOP) until [`unpause`](Self::unpause).
    pub fn pause(&self) {
        self.signal("STOP");
    }

    pub fn unpause(&self) {
        self.signal("CONT");
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!(
                // The bracket keeps pkill from matching this very shell command.
                "pkill -{signal} -f '[r]edis-server 127.0.0.1:{}'",
                self.port
            ))
            .status()
            .expect("pkill");
        assert!(
            status.success(),
            "no redis-server on port {} to signal",
            self.port
        );
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.process.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// Why a server did not start.
#[derive(Debug)]
pub enum StartFailure {
    /// Another listener has its port: try another.
    PortTaken(String),
    /// Anything else: what it printed.
    Other(String),
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartFailure::PortTaken(why) | StartFailure::Other(why) => f.write_str(why),
        }
    }
}

/// A loopback port free now, below the range the kernel hands out for listeners bound to
/// port 0 and for outgoing connections (32768–60999 by default), so that such sockets of
/// other tests cannot take it before the server binds it (or while it is stopped); and
/// below the cluster nodes' ports (see `cluster`). A port that another test's server takes
/// first is noticed when the server starts, and another is tried.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 10_000;
    const PORTS: u32 = 10_000;
    let seed = std::process::id().wrapping_mul(7919);
    for _ in 0..PORTS {
        let port = (FIRST + (seed + NEXT.fetch_add(1, Ordering::Relaxed) * 613) % PORTS) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!(
        "no free loopback port between {FIRST} and {}",
        FIRST + PORTS
    );
}

/// `REDIS_URL`, or a server started now (kept alive by the returned handle).
pub fn redis_from_env_or_start() -> (String, Option<RedisServer>) {
    match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let server = RedisServer::start();
            (server.url(), Some(server))
        }
    }
}

/// The URL of a Redis shared by this test binary: `REDIS_URL`, or a server started once.
pub fn shared_redis_url() -> String {
    static SERVER: OnceLock<(String, Option<RedisServer>)> = OnceLock::new();
    SERVER.get_or_init(redis_from_env_or_start).0.clone()
}

/// A plain fred client for inspecting Redis in tests.
pub async fn client(url: &str) -> Client {
    let client = Builder::from_config(Config::from_url(url).expect("valid url"))
        .build()
        .expect("build client");
    client.init().await.expect("connect to redis");
    client
}

/// A connected subscriber client (to listen to unlock messages).
#[allow(dead_code)] // not every test binary listens
pub async fn subscriber(url: &str) -> fred::clients::SubscriberClient {
    let subscriber = Builder::from_config(Config::from_url(url).expect("valid url"))
        .build_subscriber_client()
        .expect("build subscriber client");
    subscriber.init().await.expect("connect to redis");
    subscriber
}

/// The fair lock's waiter list and deadline set for `name` (Redisson's names; `name` has
/// no braces of its own).
#[allow(dead_code)] // not every test binary has fair locks
pub fn fair_keys(name: &str) -> (String, String) {
    (
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
    )
}

/// The fenced lock's token counter for `name` (Redisson's name; `name` has no braces).
#[allow(dead_code)]
pub fn fencing_tokens_key(name: &str) -> String {
    format!("redisson_lock_token:{{{name}}}")
}

/// The owners queued for the fair lock `name`, first come first.
#[allow(dead_code)]
pub async fn fair_places(redis: &Client, name: &str) -> Vec<String> {
    redis.lrange(fair_keys(name).0, 0, -1).await.unwrap()
}

/// Waits until the fair lock `name`'s queue holds `count` waiters (the barrier between
/// waiters started one after another); returns them.
#[allow(dead_code)]
pub async fn fair_queued(redis: &Client, name: &str, count: usize) -> Vec<String> {
    eventually(&format!("{count} waiters queued for {name}"), || async {
        let now = fair_places(redis, name).await;
        (now.len() == count).then_some(now)
    })
    .await
}

/// `INFO commandstats` calls of one command (e.g. "evalsha") that the server ran: not
/// counting those it refused (a script call before the script was loaded: the client loads
/// it and sends the call again).
pub async fn command_calls(client: &Client, command: &str) -> u64 {
    let info: String = client
        .custom(fred::cmd!("INFO"), vec!["commandstats"])
        .await
        .expect("INFO commandstats");
    let prefix = format!("cmdstat_{command}:");
    let Some(line) = info.lines().find_map(|line| line.strip_prefix(&prefix)) else {
        return 0;
    };
    let field = |name: &str| -> u64 {
        line.split(',')
            .find_map(|pair| pair.strip_prefix(name))
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    field("calls=").saturating_sub(field("failed_calls="))
}

/// A unique name for this test run, so tests sharing a server never collide.
pub fn unique(name: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "test:{}:{}:{name}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn stdout_flush() {
    let _ = std::io::stdout().flush();
}

/// Subscribes `subscriber` to `channel` (sharded on a cluster, as tower-lock does there) and
/// returns once Redis counts the subscription (seen through `admin`): fred answers SUBSCRIBE
/// as soon as it is written, so a message published before Redis read it would be missed.
pub async fn subscribe_confirmed(
    admin: &Client,
    subscriber: &fred::clients::SubscriberClient,
    channel: &str,
) {
    if admin.is_clustered() {
        subscriber.ssubscribe(channel).await.unwrap();
    } else {
        subscriber.subscribe(channel).await.unwrap();
    }
    eventually(&format!("the subscription to {channel}"), || async {
        (numsub(admin, channel).await >= 1).then_some(())
    })
    .await;
}

/// How many connections subscribe to `channel`: `PUBSUB NUMSUB`, or on a cluster
/// `PUBSUB SHARDNUMSUB` at the node of the channel's slot (tower-lock uses sharded pub/sub
/// there).
pub async fn numsub(client: &Client, channel: &str) -> i64 {
    let reply: Vec<Value> = if client.is_clustered() {
        let slot = fred::util::redis_keyslot(channel.as_bytes());
        client
            .custom(
                fred::cmd!("PUBSUB", hash: fred::types::ClusterHash::Custom(slot)),
                vec!["SHARDNUMSUB", channel],
            )
            .await
            .expect("PUBSUB SHARDNUMSUB")
    } else {
        client
            .custom(fred::cmd!("PUBSUB"), vec!["NUMSUB", channel])
            .await
            .expect("PUBSUB NUMSUB")
    };
    reply.get(1).and_then(|v| v.as_i64()).unwrap_or(-1)
}

/// The path of a built example (cargo test builds them next to the test binaries).
pub fn example(name: &str) -> std::path::PathBuf {
    // target/<profile>/deps/<test binary> → target/<profile>/examples/<name>
    let mut path = std::env::current_exe().expect("test executable path");
    path.pop();
    path.pop();
    path.push("examples");
    path.push(name);
    assert!(
        path.exists(),
        "{} was not built: run the tests with `cargo test`, which builds the examples",
        path.display()
    );
    path
}

/// The integer at `key`, 0 when it is not set (counters the checker examples keep in Redis).
pub async fn counter(redis: &Client, key: &str) -> i64 {
    let value: Option<i64> = redis.get(key).await.unwrap();
    value.unwrap_or(0)
}

/// The blocking form of [`eventually`], for conditions checked with `redis-cli`.
pub fn eventually_sync(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..400 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what}: not within 20 s");
}

/// A task that waits up to `wait` for the lock `name` of `locks` and returns its guard.
pub fn spawn_waiter(
    locks: &tower_lock::LockManager,
    name: &str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<tower_lock::lock::LockGuard, tower_lock::LockError>> {
    tokio::spawn(locks.lock(name).wait(wait).acquire())
}
