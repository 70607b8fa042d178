//! S11: tower-lock on ZooKeeper (Curator's layout), against the floor of one `exists` round
//! trip and against the recipe's own three requests made directly (create the node, list
//! the directory, delete the node), as Curator's `InterProcessMutex` makes them.

use tower_lock::backend::ZooKeeperBackend;
use zookeeper_client as zk;

use super::other_backends::two_processes;
use super::s2::fresh_name;
use super::*;

pub(super) async fn s11(scale: Scale, report: &mut Report) {
    eprintln!("S11 ZooKeeper…");
    let server = match std::env::var("ZOOKEEPER_HOSTS") {
        Ok(hosts) if !hosts.is_empty() => (hosts, None),
        _ => {
            let server = tokio::task::spawn_blocking(support::zookeeper::start_standalone)
                .await
                .unwrap();
            (server.address(), Some(server))
        }
    };
    let hosts = server.0.as_str();
    let floor = uncontended(hosts, scale, report).await;
    two_processes(hosts, "zk", "S11 ZooKeeper", floor, scale, report).await;
    drop(server);
}

/// The floor (`exists` on one session), an uncontended acquire + release, and the recipe's
/// requests made directly, taking turns; the floor's p50.
async fn uncontended(hosts: &str, scale: Scale, report: &mut Report) -> Duration {
    let client = zk::Client::connect(hosts)
        .await
        .expect("connect to ZooKeeper");
    let locks = LockManager::builder().backend(ZooKeeperBackend::connect(hosts).await.unwrap());
    let name = fresh_name("zk-uncontended");
    let dir = "/bench-s11-direct";
    let _ = client
        .mkdir(
            dir,
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await;
    let node = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let direct = || async {
        let (_, sequence) = client
            .create(&format!("{dir}/_c_bench-lock-"), b"", &node)
            .await
            .unwrap();
        let _ = client.list_children(dir).await.unwrap();
        client
            .delete(&format!("{dir}/_c_bench-lock-{sequence}"), None)
            .await
            .unwrap();
    };
    for _ in 0..50 {
        let guard = locks.lock(&name).acquire().await.unwrap();
        let _ = guard.release().await.unwrap();
        direct().await;
    }
    let (mut floors, mut pairs, mut directs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..scale.s1_iterations {
        let t = Instant::now();
        let _ = client.check_stat("/").await.unwrap();
        floors.push(t.elapsed());
        let t = Instant::now();
        let guard = locks.lock(&name).acquire().await.unwrap();
        let _ = guard.release().await.unwrap();
        pairs.push(t.elapsed());
        let t = Instant::now();
        direct().await;
        directs.push(t.elapsed());
    }
    let floor = percentile(&mut floors, 50.0);
    let pair = percentile(&mut pairs, 50.0);
    let direct = percentile(&mut directs, 50.0);
    report.add(
        "S11 ZooKeeper",
        "exists p50 (floor)",
        us(floor),
        floor.as_secs_f64(),
    );
    report.add(
        "S11 ZooKeeper uncontended",
        "acquire + release p50 ÷ floor",
        format!("{} = {:.2} ×", us(pair), ratio(pair, floor)),
        ratio(pair, floor),
    );
    report.add(
        "S11 ZooKeeper uncontended",
        "the recipe's create + list + delete made directly p50 ÷ floor",
        format!("{} = {:.2} ×", us(direct), ratio(direct, floor)),
        ratio(direct, floor),
    );
    floor
}
