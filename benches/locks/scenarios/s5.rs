//! S5: many waiters on one name in one process.

use super::s2::fresh_name;
use super::*;

pub(super) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// S5: many waiters on one name in one process.
pub(super) async fn s5(url: &str, admin: &Client, scale: Scale, report: &mut Report) {
    eprintln!("S5 many waiters…");
    let locks = LockManager::redis(url).await.expect("connect");
    let mut per_handover = Vec::new();
    for waiters in [100, scale.s5_waiters] {
        let name = fresh_name("s5");
        let holder = locks.lock(&name).acquire().await.unwrap();
        let rss_before = rss_bytes();
        let acquired = Arc::new(AtomicU64::new(0));
        let tasks: Vec<_> = (0..waiters)
            .map(|_| {
                let (locks, name, acquired) = (locks.clone(), name.clone(), acquired.clone());
                tokio::spawn(async move {
                    let guard = locks
                        .lock(&name)
                        .wait(Duration::from_secs(600))
                        .acquire()
                        .await
                        .unwrap();
                    acquired.fetch_add(1, Ordering::Relaxed);
                    let _ = guard.release().await.unwrap();
                })
            })
            .collect();
        while locks.waiting(&name) < waiters {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let rss_full = rss_bytes();
        let channel = tower_lock::backend::unlock_channel(&locks.key(&name).unwrap());
        while support::numsub(admin, &channel).await == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let subscriptions = support::numsub(admin, &channel).await;
        let before = client_commands(admin, "tower").await;
        let t = Instant::now();
        let _ = holder.release().await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        let drained = t.elapsed();
        let commands = client_commands(admin, "tower").await - before;
        let per = commands as f64 / waiters as f64;
        per_handover.push(per);
        if waiters == scale.s5_waiters {
            let scenario = format!("S5 {waiters} waiters");
            let per_waiter = rss_full.saturating_sub(rss_before) as f64 / waiters as f64;
            report.goal(
                &scenario,
                "memory per waiter (RSS delta ÷ waiters)",
                format!("{per_waiter:.0} B"),
                per_waiter,
                "≤ 2 KiB",
                per_waiter <= 2048.0,
            );
            report.goal(
                &scenario,
                "subscriptions for the name",
                subscriptions.to_string(),
                subscriptions as f64,
                "1",
                subscriptions == 1,
            );
            let all = acquired.load(Ordering::Relaxed);
            report.goal(
                &scenario,
                "waiters that acquired",
                all.to_string(),
                all as f64,
                &format!("{waiters}"),
                all == waiters as u64,
            );
            report.add(
                &scenario,
                "drain time / hand-overs per second",
                format!(
                    "{} / {:.0}",
                    ms(drained),
                    waiters as f64 / drained.as_secs_f64()
                ),
                drained.as_secs_f64(),
            );
            let r = per_handover[1] / per_handover[0];
            report.goal(
                &scenario,
                "commands per hand-over ÷ those at 100 waiters",
                format!("{:.2} ÷ {:.2} = {r:.2}", per_handover[1], per_handover[0]),
                r,
                "≈ 1 (≤ 1.5)",
                r <= 1.5,
            );
        }
    }
}
