//! A throwaway PostgreSQL server: `initdb` into a temporary directory, `postgres` on a free
//! loopback port, both from Debian's `postgresql` package (installed by
//! `./scripts/test.sh` when absent). It stops, and its directory goes, when it is dropped
//! or when the test process dies (it runs under a shell that stops it once our stdin pipe
//! closes). As root, it runs as the `postgres` user (PostgreSQL refuses root).

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::sync::Mutex;

/// How to get PostgreSQL, in every failure message.
const INSTALL_HINT: &str = "PostgreSQL is needed for this test: install Debian's package with \
`apt-get install -y postgresql` (or run `./scripts/test.sh`, which installs it when absent)";

/// A PostgreSQL server owned by this test process.
pub struct Postgres {
    port: u16,
    process: Option<(Child, ChildStdin)>,
    lines: Mutex<Receiver<String>>,
}

impl Postgres {
    /// Initialises a database cluster (user `tower`, trust authentication on loopback) and
    /// starts it; returns once it accepts connections.
    pub fn start() -> Postgres {
        let bin = binaries();
        let port = super::free_port();
        let dir =
            std::env::temp_dir().join(format!("tower-lock-postgres-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a directory for PostgreSQL");
        let user = run_as();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).expect("chown to postgres");
        }
        let data = dir.join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .args([
                "-U",
                "tower",
                "-A",
                "trust",
                "--no-sync",
                "-E",
                "UTF8",
                "-D",
            ])
            .arg(&data)
            .stdout(Stdio::null());
        as_user(&mut initdb, user);
        let status = initdb
            .status()
            .unwrap_or_else(|e| panic!("run initdb: {e}. {INSTALL_HINT}"));
        assert!(status.success(), "initdb failed ({status})");
        // The shell starts postgres and reads commands on its stdin (`stop`, `start`): at
        // its end (a drop, or our death) it stops postgres fast and removes the directory.
        let script = format!(
            "run() {{ '{postgres}' -D '{data}' -p {port} -k '{dir}' -c listen_addresses=127.0.0.1 \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
             -c max_connections=400 2>&1 & pid=$!; }}; run; \
             while read -r command; do \
               case \"$command\" in \
                 stop) kill -INT $pid; wait $pid; echo stopped;; \
                 start) run;; \
               esac; \
             done; kill -INT $pid; wait $pid; rm -rf '{dir}'",
            postgres = bin.join("postgres").display(),
            data = data.display(),
            dir = dir.display(),
        );
        let mut shell = Command::new("sh");
        shell
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        as_user(&mut shell, user);
        let mut child = shell.spawn().expect("start postgres");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        // The log goes to our pipe: a thread reads it and passes each line on.
        let (lines_tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines_tx.send(line).is_err() {
                    break;
                }
            }
        });
        let server = Postgres {
            port,
            process: Some((child, stdin)),
            lines: Mutex::new(lines),
        };
        server.wait_for_log("ready to accept connections");
        server
    }

    /// Waits until the server's log has a line containing `what`.
    fn wait_for_log(&self, what: &str) {
        let lines = self.lines.lock().unwrap();
        let mut log = Vec::new();
        loop {
            match lines.recv() {
                Ok(line) => {
                    let found = line.contains(what);
                    log.push(line);
                    if found {
                        return;
                    }
                }
                Err(_) => panic!("postgres ended before `{what}`:\n{}", log.join("\n")),
            }
        }
    }

    fn command(&self, command: &str) {
        let (_, stdin) = self.process.as_ref().expect("running");
        let mut stdin = stdin;
        writeln!(stdin, "{command}").expect("tell the postgres shell");
    }

    /// Stops the server (a fast shutdown: sessions are ended); returns once it is down.
    #[allow(dead_code)] // not every test binary restarts PostgreSQL
    pub fn stop(&self) {
        self.command("stop");
        self.wait_for_log("stopped");
    }

    /// Starts the stopped server again on the same port and data; returns once it accepts
    /// connections.
    #[allow(dead_code)] // not every test binary restarts PostgreSQL
    pub fn start_again(&self) {
        self.command("start");
        self.wait_for_log("ready to accept connections");
    }

    /// The connection URL (database `postgres`, user `tower`).
    pub fn url(&self) -> String {
        format!("postgres://tower@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.process.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// The URL of a PostgreSQL shared by this test binary, started once (`DATABASE_URL` when
/// set).
#[allow(dead_code)] // not every test binary uses PostgreSQL
pub fn shared_url() -> String {
    static SERVER: std::sync::OnceLock<(String, Option<Postgres>)> = std::sync::OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var("DATABASE_URL") {
            Ok(url) if !url.is_empty() => (url, None),
            _ => {
                let server = Postgres::start();
                (server.url(), Some(server))
            }
        })
        .0
        .clone()
}

/// The directory of `initdb` and `postgres`: on PATH, else Debian's
/// `/usr/lib/postgresql/<version>/bin` (the newest).
fn binaries() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|dir| dir.join("initdb").exists() && dir.join("postgres").exists())
    });
    if let Some(dir) = on_path {
        return dir;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!("initdb was not found on PATH nor in /usr/lib/postgresql. {INSTALL_HINT}")
    })
}

/// The `postgres` user's ids when running as root (PostgreSQL will not run as root).
fn run_as() -> Option<(u32, u32)> {
    let uid = Command::new("id").arg("-u").output().ok()?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return None;
    }
    let id = |flag: &str| -> u32 {
        let out = Command::new("id")
            .args([flag, "postgres"])
            .output()
            .unwrap_or_else(|e| panic!("id {flag} postgres: {e}"));
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("running as root needs the `postgres` user. {INSTALL_HINT}"))
    };
    Some((id("-u"), id("-g")))
}

fn as_user(command: &mut Command, user: Option<(u32, u32)>) {
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid).env("HOME", "/tmp");
    }
}
