//! S6: read-write locks. 32 readers holding 2 ms at once against one reader alone (they
//! share), and a 90 % read / 10 % write mix on one name against the plain lock on the same
//! mix (same run, taking turns), with Redis commands per acquisition.

use super::*;

const READERS: usize = 32;
const MIX_WORKERS: u64 = 32;

/// One acquisition of `kind` (plain, read, write) held for `HOLD`.
async fn hold_once(locks: &LockManager, name: &str, kind: tower_lock::LockKind) {
    let request = match kind {
        tower_lock::LockKind::Read => locks.read_lock(name),
        tower_lock::LockKind::Write => locks.write_lock(name),
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
            tokio::spawn(async move { hold_once(&locks, &name, tower_lock::LockKind::Read).await })
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

    // The mix: every tenth operation of a worker writes. Each variant on a name of its own.
    let mix = |kind_of: fn(u64) -> tower_lock::LockKind, name: &'static str| {
        let locks = locks.clone();
        move |n: u64| {
            let locks = locks.clone();
            async move { hold_once(&locks, name, kind_of(n)).await }
        }
    };
    let read_write = mix(
        |n| {
            if n % 10 == 0 {
                tower_lock::LockKind::Write
            } else {
                tower_lock::LockKind::Read
            }
        },
        "bench:s6:mix:rw",
    );
    let plain = mix(|_| tower_lock::LockKind::Exclusive, "bench:s6:mix:plain");
    let before = client_commands(admin, "tower").await;
    let (rw_rate, plain_rate, rw_ops) = mixed(scale.steady, read_write, plain).await;
    let commands = client_commands(admin, "tower").await - before;
    let r = rw_rate / plain_rate;
    report.goal(
        "S6 redis",
        "90 % read / 10 % write on one name, 32 workers: read-write ÷ plain lock throughput",
        format!("{rw_rate:.0}/s ÷ {plain_rate:.0}/s = {r:.1} ×"),
        r,
        "≥ 5 ×",
        r >= 5.0,
    );
    report.add(
        "S6 redis",
        "Redis commands per acquisition (both variants of the mix)",
        format!("{:.2}", commands as f64 / rw_ops.max(1) as f64),
        commands as f64 / rw_ops.max(1) as f64,
    );
}

/// Throughput of `a` and `b` (32 workers each, taking turns), and the operations of both.
async fn mixed<A, FA, B, FB>(duration: Duration, a: A, b: B) -> (f64, f64, u64)
where
    A: Fn(u64) -> FA + Clone + Send + Sync + 'static,
    FA: std::future::Future<Output = ()> + Send,
    B: Fn(u64) -> FB + Clone + Send + Sync + 'static,
    FB: std::future::Future<Output = ()> + Send,
{
    let rounds = rounds(duration);
    let slice = duration / rounds;
    let (mut count_a, mut time_a, mut count_b, mut time_b) = (0, Duration::ZERO, 0, Duration::ZERO);
    for _ in 0..rounds {
        let (n, t) = workers_for(slice, a.clone()).await;
        (count_a, time_a) = (count_a + n, time_a + t);
        let (n, t) = workers_for(slice, b.clone()).await;
        (count_b, time_b) = (count_b + n, time_b + t);
    }
    (
        count_a as f64 / time_a.as_secs_f64(),
        count_b as f64 / time_b.as_secs_f64(),
        count_a + count_b,
    )
}

/// `MIX_WORKERS` workers each calling `op(n)` with their own counter for `duration`.
async fn workers_for<F, Fut>(duration: Duration, op: F) -> (u64, Duration)
where
    F: Fn(u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let end = start + duration;
    let tasks: Vec<_> = (0..MIX_WORKERS)
        .map(|worker| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut n = worker;
                let mut done = 0;
                while Instant::now() < end {
                    op(n).await;
                    n += 1;
                    done += 1;
                }
                done
            })
        })
        .collect();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    (total, start.elapsed())
}
