//! Throwaway ZooKeeper servers from Debian's `zookeeper` package (installed by
//! `./scripts/test.sh` when absent): a standalone server, or a three-node ensemble, each
//! node a JVM on free loopback ports with its own data directory, started as a child of a
//! shell that stops it (and removes the directory) when it is dropped or this test process
//! dies (the shell's stdin, our pipe, closes).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How to get ZooKeeper, in every failure message.
const INSTALL_HINT: &str = "ZooKeeper is needed for this test: install Debian's package with \
`apt-get install -y zookeeper` (or run `./scripts/test.sh`, which installs it when absent)";

const JARS: &str = "/usr/share/java/zookeeper.jar";

/// One ZooKeeper server owned by this test process.
pub struct ZooKeeperNode {
    port: u16,
    dir: PathBuf,
    process: Option<(Child, ChildStdin)>,
}

impl ZooKeeperNode {
    /// The `host:port` clients connect to.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn command(&mut self, command: &str) {
        let (_, stdin) = self.process.as_mut().expect("running");
        writeln!(stdin, "{command}").expect("tell the zookeeper shell");
    }

    /// Kills the server with SIGKILL (its sessions live on in the others, if any).
    #[allow(dead_code)] // not every test binary kills a server
    pub fn kill(&mut self) {
        self.command("kill");
        wait_until(
            || !serving(self.port),
            "the killed ZooKeeper to stop serving",
        );
    }

    /// Starts the killed server again on its ports and data.
    #[allow(dead_code)] // not every test binary restarts a server
    pub fn start_again(&mut self) {
        self.command("start");
        wait_until(|| serving(self.port), "ZooKeeper to serve again");
    }

    /// Its mode as `srvr` says (`standalone`, `leader`, `follower`), if it serves.
    pub fn mode(&self) -> Option<String> {
        srvr(self.port)?
            .lines()
            .find_map(|line| line.strip_prefix("Mode: ").map(str::to_owned))
    }

    #[allow(dead_code)]
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for ZooKeeperNode {
    fn drop(&mut self) {
        if let Some((mut child, stdin)) = self.process.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }
}

/// Starts a standalone server; returns once it serves.
pub fn start_standalone() -> ZooKeeperNode {
    let port = super::free_port();
    let node = spawn(port, &[], None);
    wait_until(|| serving(port), "ZooKeeper to serve");
    node
}

/// A three-node ensemble on loopback.
pub struct Ensemble {
    pub nodes: Vec<ZooKeeperNode>,
}

impl Ensemble {
    /// Starts three nodes; returns once all serve.
    #[allow(dead_code)] // not every test binary runs an ensemble
    pub fn start() -> Ensemble {
        let ports: Vec<(u16, u16, u16)> = (0..3)
            .map(|_| (super::free_port(), super::free_port(), super::free_port()))
            .collect();
        let servers: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(at, (_, quorum, election))| {
                format!("server.{}=127.0.0.1:{quorum}:{election}", at + 1)
            })
            .collect();
        let nodes: Vec<ZooKeeperNode> = ports
            .iter()
            .enumerate()
            .map(|(at, (client, ..))| spawn(*client, &servers, Some(at + 1)))
            .collect();
        for node in &nodes {
            wait_until(|| serving(node.port), "every ensemble node to serve");
        }
        Ensemble { nodes }
    }

    /// The connect string of all nodes.
    #[allow(dead_code)]
    pub fn hosts(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(ZooKeeperNode::address).collect();
        hosts.join(",")
    }

    /// The node that leads now.
    #[allow(dead_code)]
    pub fn leader(&mut self) -> &mut ZooKeeperNode {
        self.nodes
            .iter_mut()
            .find(|node| node.mode().as_deref() == Some("leader"))
            .expect("a leader")
    }
}

fn spawn(port: u16, servers: &[String], id: Option<usize>) -> ZooKeeperNode {
    if !Path::new(JARS).exists() {
        panic!("{JARS} is missing. {INSTALL_HINT}");
    }
    let dir = std::env::temp_dir().join(format!("tower-lock-zk-{}-{port}", std::process::id()));
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("create a directory for ZooKeeper");
    if let Some(id) = id {
        std::fs::write(data.join("myid"), format!("{id}\n")).expect("write myid");
    }
    let mut config = format!(
        "tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir={}\nclientPort={port}\n\
         clientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
         4lw.commands.whitelist=srvr,stat,mntr,wchc,wchs\nmaxClientCnxns=0\n",
        data.display()
    );
    for server in servers {
        config.push_str(server);
        config.push('\n');
    }
    std::fs::write(dir.join("zoo.cfg"), config).expect("write zoo.cfg");
    let script = format!(
        "run() {{ java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp '{JARS}' \
         org.apache.zookeeper.server.quorum.QuorumPeerMain '{cfg}' >'{log}' 2>&1 & pid=$!; }}; run; \
         while read -r command; do \
           case \"$command\" in \
             kill) kill -KILL $pid; wait $pid;; \
             start) run;; \
           esac; \
         done; kill -KILL $pid; wait $pid; rm -rf '{dir}'",
        cfg = dir.join("zoo.cfg").display(),
        log = dir.join("server.log").display(),
        dir = dir.display(),
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start ZooKeeper: {e}. {INSTALL_HINT}"));
    let stdin = child.stdin.take().expect("piped stdin");
    ZooKeeperNode {
        port,
        dir,
        process: Some((child, stdin)),
    }
}

/// `srvr`'s answer, if the server serves (a four-letter word, with a time limit).
fn srvr(port: u16) -> Option<String> {
    four_letters(port, "srvr").filter(|answer| answer.contains("Mode: "))
}

/// A four-letter command's answer (`None`: no answer within a second).
pub fn four_letters(port: u16, word: &str) -> Option<String> {
    use std::io::Read;
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream =
        std::net::TcpStream::connect_timeout(&address, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(word.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

fn serving(port: u16) -> bool {
    srvr(port).is_some()
}

fn wait_until(mut done: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `host:port` of a standalone server shared by this test binary, started once
/// (`ZOOKEEPER_HOSTS` when set).
#[allow(dead_code)] // not every test binary uses ZooKeeper
pub fn shared_hosts() -> String {
    static SERVER: std::sync::OnceLock<(String, Option<ZooKeeperNode>)> =
        std::sync::OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var("ZOOKEEPER_HOSTS") {
            Ok(hosts) if !hosts.is_empty() => (hosts, None),
            _ => {
                let server = start_standalone();
                (server.address(), Some(server))
            }
        })
        .0
        .clone()
}
