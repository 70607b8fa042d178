//! A throwaway MariaDB server: `mariadb-install-db` into a temporary directory and
//! `mariadbd` on a free loopback port, from Debian's `mariadb-server` package (installed by
//! `./scripts/test.sh` when absent). It stops, and its directory goes, when it is dropped or
//! when the test process dies (it runs under a shell that stops it once our stdin pipe
//! closes).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How to get MariaDB, in every failure message.
const INSTALL_HINT: &str = "MariaDB is needed for this test: install Debian's package with \
`apt-get install -y mariadb-server` (or run `./scripts/test.sh`, which installs it when absent)";

/// A MariaDB server owned by this test process.
pub struct MariaDb {
    port: u16,
    dir: PathBuf,
    process: Option<(Child, ChildStdin)>,
}

impl MariaDb {
    /// Makes a data directory (database `locks`, user `tower` with password `tower`) and
    /// starts the server; returns once it accepts connections.
    pub fn start() -> MariaDb {
        let port = super::free_port();
        let dir =
            std::env::temp_dir().join(format!("tower-lock-mariadb-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create a directory for MariaDB");
        let data = dir.join("data");
        let installed = Command::new("mariadb-install-db")
            .args([
                "--no-defaults",
                "--user=root",
                "--auth-root-authentication-method=normal",
            ])
            .arg(format!("--datadir={}", data.display()))
            .arg("--skip-test-db")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("run mariadb-install-db: {e}. {INSTALL_HINT}"));
        assert!(
            installed.success(),
            "mariadb-install-db failed ({installed})"
        );
        let socket = dir.join("mysqld.sock");
        // Debian keeps the server in /usr/sbin, off some users' PATH.
        let server = ["/usr/sbin/mariadbd", "/usr/bin/mariadbd"]
            .into_iter()
            .find(|path| std::path::Path::new(path).exists())
            .unwrap_or("mariadbd");
        // The shell starts the server and reads commands on its stdin (`stop`, `start`): at
        // its end (a drop, or our death) it stops it and removes the directory.
        let script = format!(
            "run() {{ '{server}' --no-defaults --user=root --datadir='{data}' --bind-address=127.0.0.1 \
             --port={port} --socket='{socket}' --pid-file='{dir}/mysqld.pid' \
             --log-error='{dir}/error.log' --skip-name-resolve --innodb-buffer-pool-size=32M \
             --max-connections=500 --character-set-server=utf8mb4 \
             --collation-server=utf8mb4_unicode_ci >/dev/null 2>&1 & pid=$!; }}; run; \
             while read -r command; do \
               case \"$command\" in \
                 stop) kill -TERM $pid; wait $pid; echo stopped;; \
                 start) run;; \
               esac; \
             done; kill -KILL $pid; wait $pid; rm -rf '{dir}'",
            data = data.display(),
            socket = socket.display(),
            dir = dir.display(),
        );
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start mariadbd: {e}. {INSTALL_HINT}"));
        let stdin = child.stdin.take().expect("piped stdin");
        let server = MariaDb {
            port,
            dir,
            process: Some((child, stdin)),
        };
        server.wait_until_ready();
        server.sql(
            "CREATE DATABASE locks; CREATE USER 'tower'@'%' IDENTIFIED BY 'tower'; \
             GRANT ALL ON locks.* TO 'tower'@'%';",
        );
        server
    }

    fn wait_until_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.try_sql("SELECT 1") {
            assert!(
                Instant::now() < deadline,
                "MariaDB did not accept connections within a minute (log: {})",
                self.dir.join("error.log").display()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_sql(&self, statements: &str) -> bool {
        Command::new("mariadb")
            .args(["--no-defaults", "-uroot"])
            .arg(format!(
                "--socket={}",
                self.dir.join("mysqld.sock").display()
            ))
            .args(["-e", statements])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Runs `statements` as root through the server's socket.
    pub fn sql(&self, statements: &str) {
        assert!(self.try_sql(statements), "MariaDB refused: {statements}");
    }

    fn command(&mut self, command: &str) {
        let (_, stdin) = self.process.as_mut().expect("running");
        writeln!(stdin, "{command}").expect("tell the mariadb shell");
    }

    /// Stops the server; returns once it is down.
    #[allow(dead_code)] // not every test binary restarts MariaDB
    pub fn stop(&mut self) {
        self.command("stop");
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.try_sql("SELECT 1") {
            assert!(Instant::now() < deadline, "MariaDB did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the stopped server again on the same port and data.
    #[allow(dead_code)] // not every test binary restarts MariaDB
    pub fn start_again(&mut self) {
        self.command("start");
        self.wait_until_ready();
    }

    /// The connection URL (database `locks`, user `tower`).
    pub fn url(&self) -> String {
        format!("mysql://tower:tower@127.0.0.1:{}/locks", self.port)
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.process.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// The URL of a MariaDB shared by this test binary, started once (`MYSQL_URL` when set).
#[allow(dead_code)] // not every test binary uses MariaDB
pub fn shared_url() -> String {
    static SERVER: std::sync::OnceLock<(String, Option<MariaDb>)> = std::sync::OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var("MYSQL_URL") {
            Ok(url) if !url.is_empty() => (url, None),
            _ => {
                let server = MariaDb::start();
                (server.url(), Some(server))
            }
        })
        .0
        .clone()
}
