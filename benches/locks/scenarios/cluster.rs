//! S1 and S2 on a local Redis Cluster.

use super::s1::s1_redis;
use super::s2::{burst, fresh_name};
use super::*;

/// S1 and S2 (W = 32) on a local 3-master Redis Cluster (sharded pub/sub).
pub(super) async fn cluster(scale: Scale, report: &mut Report) {
    eprintln!("S1/S2 on a local cluster…");
    let cluster = tokio::task::spawn_blocking(|| support::cluster::RedisCluster::start(3, 0))
        .await
        .expect("start a local cluster");
    let url = cluster.url();
    let floor = s1_redis(&url, "S1 cluster", scale, report).await;
    for processes in [1, 2] {
        let scenario = format!("S2 cluster W=32 {processes}p");
        let mut spans = burst(&url, "tower", &fresh_name("cluster"), 32, processes, None).await;
        let stats = hold_stats(&mut spans, 32);
        report.add(
            &scenario,
            "tower efficiency",
            format!("{:.2}", stats.efficiency),
            stats.efficiency,
        );
        let r = ratio(stats.gap_p50, floor);
        report.add(
            &scenario,
            "tower hand-over p50 ÷ EVAL floor",
            format!("{} = {r:.2} ×", us(stats.gap_p50)),
            r,
        );
        report.violations(&scenario, "tower exclusion violations", stats.violations);
    }
    drop(cluster);
}
