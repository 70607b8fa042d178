//! A local Redis Cluster: redis-server processes with `--cluster-enabled yes` on loopback
//! ports, joined by `redis-cli --cluster create`.

use std::net::TcpListener;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::{RedisServer, StartFailure};

pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

/// A port `p` with `p` and its cluster bus port `p + 10000` both free.
/// A free port for a cluster node whose bus port (the port + 10,000) is free too: nodes take
/// 20,000–22,767 and their buses 30,000–32,767, out of the plain servers' range
/// (`free_port`) and below the kernel's ephemeral range (32768–), so that no listener bound
/// to port 0 can take a bus port.
fn cluster_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 20_000;
    const PORTS: u32 = 2_768;
    let seed = std::process::id().wrapping_mul(7919);
    for _ in 0..PORTS {
        let port = (FIRST + (seed + NEXT.fetch_add(1, Ordering::Relaxed) * 383) % PORTS) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok()
        {
            return port;
        }
    }
    panic!("no free port pair for a cluster node");
}

fn redis_cli(args: &[String]) -> String {
    let output = Command::new("redis-cli").args(args).output().expect(
        "redis-cli is needed for cluster tests (it comes with Debian's redis-server package)",
    );
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

impl RedisCluster {
    /// `masters` masters with `replicas` replicas each.
    pub fn start(masters: usize, replicas: usize) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| {
                // A port (or its bus port) taken meanwhile by another test's node: another.
                for _ in 0..20 {
                    let port = cluster_port();
                    let conf = format!("nodes-{port}.conf");
                    let extra = [
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        &conf,
                        "--cluster-node-timeout",
                        "2000",
                    ];
                    match RedisServer::try_start_with(port, &extra) {
                        Ok(node) => return node,
                        Err(StartFailure::PortTaken(_)) => continue,
                        Err(failure) => panic!("{failure}"),
                    }
                }
                panic!("no free port pair for a cluster node in 20 tries")
            })
            .collect();
        let mut args = vec!["--cluster".to_owned(), "create".to_owned()];
        args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())));
        args.extend([
            "--cluster-replicas".to_owned(),
            replicas.to_string(),
            "--cluster-yes".to_owned(),
        ]);
        let created = redis_cli(&args);
        assert!(
            created.contains("All 16384 slots covered"),
            "cluster create failed:\n{created}"
        );
        let cluster = RedisCluster { nodes };
        for _ in 0..400 {
            if cluster.is_ready() {
                return cluster;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("the cluster did not become ready");
    }

    fn is_ready(&self) -> bool {
        self.nodes.iter().all(|node| {
            let port = node.port().to_string();
            let info = redis_cli(&["-p".into(), port.clone(), "cluster".into(), "info".into()]);
            let replication = redis_cli(&["-p".into(), port, "info".into(), "replication".into()]);
            info.contains("cluster_state:ok")
                && (replication.contains("role:master")
                    || replication.contains("master_link_status:up"))
        })
    }

    /// `redis-cluster://127.0.0.1:<p1>?node=127.0.0.1:<p2>&…`
    pub fn url(&self) -> String {
        let mut url = format!("redis-cluster://127.0.0.1:{}", self.nodes[0].port());
        for (i, node) in self.nodes.iter().enumerate().skip(1) {
            url.push(if i == 1 { '?' } else { '&' });
            url.push_str(&format!("node=127.0.0.1:{}", node.port()));
        }
        url
    }

    /// The port of the master serving `slot`, and of one of its replicas (if any).
    pub fn owners(&self, slot: u16) -> (u16, Option<u16>) {
        let mut master = None;
        for node in &self.nodes {
            let nodes = redis_cli(&[
                "-p".into(),
                node.port().to_string(),
                "cluster".into(),
                "nodes".into(),
            ]);
            let owns = nodes.lines().any(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                fields.len() > 8
                    && fields[2].contains("myself")
                    && fields[2].contains("master")
                    && fields[8..].iter().any(|range| {
                        let (a, b) = range.split_once('-').unwrap_or((range, range));
                        matches!((a.parse::<u16>(), b.parse::<u16>()), (Ok(a), Ok(b)) if a <= slot && slot <= b)
                    })
            });
            if owns {
                master = Some(node.port());
            }
        }
        let master = master.expect("a master owns every slot");
        let replica = self.nodes.iter().map(|n| n.port()).find(|port| {
            let replication = redis_cli(&[
                "-p".into(),
                port.to_string(),
                "info".into(),
                "replication".into(),
            ]);
            replication.contains(&format!("master_port:{master}"))
        });
        (master, replica)
    }

    /// Runs `redis-cli -p <port> <args…>`.
    pub fn cli(port: u16, args: &[&str]) -> String {
        let mut all = vec!["-p".to_owned(), port.to_string()];
        all.extend(args.iter().map(|a| a.to_string()));
        redis_cli(&all)
    }
}

/// A 3-master cluster shared by the tests of one binary.
pub fn shared_cluster_url() -> String {
    static CLUSTER: OnceLock<(String, RedisCluster)> = OnceLock::new();
    CLUSTER
        .get_or_init(|| {
            let cluster = RedisCluster::start(3, 0);
            (cluster.url(), cluster)
        })
        .0
        .clone()
}
