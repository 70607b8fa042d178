//! S6: read-write locks. 32 readers holding 2 ms at once against one reader alone (they
//! share), and a 90 % read / 10 % write mix on one name against the plain lock on the same
//! mix (same run, taking turns), with the read-write lock's Redis commands per acquisition.

use super::*;

const READERS: usize = 32;
const MIX_WORKERS: u64 = 32;

/// One acquisition of `kind` (plain, read, write) held for `HOLD`.
async fn hold_once(locks: &LockManager, name: &str, kind: tower_lock::lock::LockKind) {
    let request = match kind {
        tower_lock::lock::LockKind::Read => locks.read_lock(name),
        tower_lock::lock::LockKind::Write => locks.write_lock(name),
        _ => locks.lock(name),
    };
    let guard = request
        .wait(Duration::from_secs(30))
        .acquire()
        .await
        .unwrap();
    tokio::time::sleep(HOLD).await;
    let _ = guard.release().await.unwrap();
}

/// Time for `readers` readers started together to each hold the lock for `HOLD`.
async fn makespan(locks: &LockManager, name: &str, readers: usize) -> Duration {
    let start = Instant::now();
    let tasks: Vec<_> = (0..readers)
        .map(|_| {
            let (locks, name) = (locks.clone(), name.to_owned());
            tokio::spawn(
                async move { hold_once(&locks, &name, tower_lock::lock::LockKind::Read).await },
            )
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

pub(super) async fn s6(url: &str, admin: &Client, scale: Scale, report: &mut Report) {
    eprintln!("S6 read-write locks…");
    let locks = LockManager::redis(url).await.expect("connect");
    let rounds = if scale.quick { 5 } else { 20 };
    let (mut one, mut many) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let name = format!("bench:s6:makespan:{round}");
        one.push(makespan(&locks, &name, 1).await);
        many.push(makespan(&locks, &name, READERS).await);
    }
    one.sort_unstable();
    many.sort_unstable();
    let (one, many) = (one[one.len() / 2], many[many.len() / 2]);
    let r = ratio(many, one);
    report.goal(
        "S6 redis",
        "32 readers holding 2 ms, makespan ÷ one reader's (p50 of rounds)",
        format!("{} ÷ {} = {r:.2} ×", ms(many), ms(one)),
        r,
        "≤ 1.5 ×",
        r <= 1.5,
    );

    // The mix: a tenth of the operations write (picked at random). Each variant on a name
    // of its own.
    let mix = |kind_of: fn(u64) -> tower_lock::lock::LockKind, name: &'static str| {
        let locks = locks.clone();
        move |n: u64| {
            let locks = locks.clone();
            async move { hold_once(&locks, name, kind_of(n)).await }
        }
    };
    let read_write = mix(
        |n| {
            if n % 10 == 0 {
                tower_lock::lock::LockKind::Write
            } else {
                tower_lock::lock::LockKind::Read
            }
        },
        "bench:s6:mix:rw",
    );
    let plain = mix(|_| tower_lock::lock::LockKind::Plain, "bench:s6:mix:plain");
    let (rw_rate, plain_rate) =
        interleaved_on(MIX_WORKERS, scale.steady, read_write.clone(), plain).await;
    let r = rw_rate / plain_rate;
    report.goal(
        "S6 redis",
        "90 % read / 10 % write on one name, 32 workers: read-write ÷ plain lock throughput",
        format!("{rw_rate:.0}/s ÷ {plain_rate:.0}/s = {r:.1} ×"),
        r,
        "≥ 5 ×",
        r >= 5.0,
    );
    // The read-write lock alone, for its commands.
    let before = client_commands(admin, "tower").await;
    let (ops, _) = run_for(MIX_WORKERS, scale.steady / 5, 0, read_write).await;
    let per = (client_commands(admin, "tower").await - before) as f64 / ops.max(1) as f64;
    report.add(
        "S6 redis",
        "Redis commands per acquisition of the read-write lock in the mix",
        format!("{per:.2}"),
        per,
    );
}
