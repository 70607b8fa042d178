//! S1 for the lock kinds of issue 26, each against the plain lock measured in the same run
//! (interleaved round by round, so that drift in the machine hits both alike): the fenced
//! lock, a 2-key multi-lock (against twice the plain lock: its two scripts go out together),
//! and RedLock on 3 local redis-servers (its nodes are asked in parallel).

use tower_lock::backend::RedLockBackend;

use super::*;

/// p50 of `rounds` uncontended acquire + release of `take` interleaved with the plain lock's;
/// (kind p50, plain p50).
async fn interleaved<F, Fut>(
    plain: &LockManager,
    rounds: usize,
    mut take: F,
) -> (Duration, Duration)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (mut kind, mut base) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..(rounds + rounds / 10) {
        let t = Instant::now();
        take().await;
        let k = t.elapsed();
        let t = Instant::now();
        let guard = plain.lock("bench:s1-kinds:plain").acquire().await.unwrap();
        let _ = guard.release().await.unwrap();
        let b = t.elapsed();
        if round >= rounds / 10 {
            kind.push(k);
            base.push(b);
        }
    }
    (percentile(&mut kind, 50.0), percentile(&mut base, 50.0))
}

/// Reports `kind ÷ (times × plain)` against the goal `≤ limit`.
fn goal(report: &mut Report, name: &str, kind: Duration, base: (u32, Duration), limit: f64) {
    let (times, plain) = base;
    let r = ratio(kind, plain * times);
    let times = if times == 1 {
        String::new()
    } else {
        format!("{times} × ")
    };
    report.goal(
        "S1 kinds",
        name,
        format!("{} ÷ {times}{} = {r:.2}", us(kind), us(plain)),
        r,
        &format!("≤ {limit}"),
        r <= limit,
    );
}

pub(super) async fn s1_kinds(url: &str, scale: Scale, report: &mut Report) {
    eprintln!("S1 kinds (fenced, multi, RedLock)…");
    let n = scale.s1_iterations;
    let locks = LockManager::redis(url).await.expect("connect");

    let (fenced, plain) = interleaved(&locks, n, || async {
        let guard = locks
            .fenced_lock("bench:s1-kinds:fenced")
            .acquire()
            .await
            .unwrap();
        let _ = guard.release().await.unwrap();
    })
    .await;
    goal(report, "fenced p50 ÷ plain p50", fenced, (1, plain), 1.1);

    let (multi, plain) = interleaved(&locks, n, || async {
        let guard = locks
            .multi_lock(["bench:s1-kinds:a", "bench:s1-kinds:b"])
            .acquire()
            .await
            .unwrap();
        let _ = guard.release().await.unwrap();
    })
    .await;
    goal(
        report,
        "2-key multi p50 ÷ 2 × plain p50",
        multi,
        (2, plain),
        1.1,
    );

    let servers: Vec<support::RedisServer> =
        (0..3).map(|_| support::RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(support::RedisServer::url).collect();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let backend = RedLockBackend::connect(&urls).await.expect("RedLock nodes");
    let redlock = LockManager::builder().backend(backend.clone());
    while !backend
        .nodes()
        .iter()
        .all(tower_lock::backend::Backend::is_available)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (red, plain) = interleaved(&locks, n, || async {
        let guard = redlock
            .lock("bench:s1-kinds:redlock")
            .acquire()
            .await
            .unwrap();
        let _ = guard.release().await.unwrap();
    })
    .await;
    goal(
        report,
        "RedLock (3 nodes) p50 ÷ plain p50",
        red,
        (1, plain),
        1.5,
    );
    drop(servers);
}
