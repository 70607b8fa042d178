//! S1: one client, uncontended acquire + release, against the EVAL floor.

use super::*;

/// S1: uncontended acquire + release, against a trivial EVAL through the same client.
pub(super) async fn s1(url: &str, scale: Scale, report: &mut Report) -> Duration {
    eprintln!("S1 uncontended…");
    let floor = s1_redis(url, "S1 redis", scale, report).await;
    s1_memory(scale, report).await;
    floor
}

/// Acquire and release against a trivial EVAL through the same client, as a user's code
/// takes locks: a default manager (the watchdog lease) on the multi-thread runtime, the
/// floor and the lock taking turns. Returns the floor.
pub(super) async fn s1_redis(
    url: &str,
    scenario: &str,
    scale: Scale,
    report: &mut Report,
) -> Duration {
    let backend = RedisBackend::connect(url).await.expect("connect");
    let client = backend.client().clone();
    let locks = LockManager::builder().backend(backend);
    let n = scale.s1_iterations;
    let mut eval = Vec::with_capacity(n);
    let (mut acquire, mut release, mut both) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for round in 0..(n + n / 10) {
        let t = Instant::now();
        let _: i64 = client
            .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
            .await
            .unwrap();
        let e = t.elapsed();
        let t = Instant::now();
        let guard = locks.lock("bench:s1").acquire().await.unwrap();
        let a = t.elapsed();
        let t = Instant::now();
        let _ = guard.release().await.unwrap();
        let r = t.elapsed();
        if round >= n / 10 {
            // the first tenth warms up
            eval.push(e);
            acquire.push(a);
            release.push(r);
            both.push(a + r);
        }
    }
    let floor = percentile(&mut eval, 50.0);
    report.add(
        scenario,
        "EVAL \"return 1\" p50 (floor)",
        us(floor),
        floor.as_secs_f64(),
    );
    report.add(
        scenario,
        "acquire+release p99",
        us(percentile(&mut both, 99.0)),
        0.0,
    );
    let (a, r) = (
        percentile(&mut acquire, 50.0),
        percentile(&mut release, 50.0),
    );
    let (ra, rr) = (ratio(a, floor), ratio(r, floor));
    report.add(
        scenario,
        "acquire p50 ÷ floor",
        format!("{} = {ra:.2} ×", us(a)),
        ra,
    );
    report.goal(
        scenario,
        "release p50 ÷ floor (within 0.05 of acquire's)",
        format!("{} = {rr:.2} ×", us(r)),
        rr,
        "acquire ± 0.05",
        (rr - ra).abs() <= 0.05,
    );
    let sum = ra + rr;
    report.goal(
        scenario,
        "(acquire p50 + release p50) ÷ floor",
        format!("{sum:.2} ×"),
        sum,
        "≤ 2.10 ×",
        sum <= 2.10,
    );
    let whole = ratio(percentile(&mut both, 50.0), floor);
    report.add(
        scenario,
        "acquire+release p50 ÷ floor (each pair timed whole)",
        format!("{whole:.2} ×"),
        whole,
    );
    floor
}

/// The memory backend against an uncontended tokio Mutex, timed in batches of 100.
pub(super) async fn s1_memory(scale: Scale, report: &mut Report) {
    let n = scale.s1_iterations;
    let memory = LockManager::memory();
    let mutex = tokio::sync::Mutex::new(());
    let (mut floor_m, mut lock_m) = (Vec::new(), Vec::new());
    for _ in 0..(n / 10).max(50) {
        let t = Instant::now();
        for _ in 0..100 {
            drop(mutex.lock().await);
        }
        floor_m.push(t.elapsed() / 100);
        let t = Instant::now();
        for _ in 0..100 {
            let _ = memory
                .lock("bench:s1")
                .acquire()
                .await
                .unwrap()
                .release()
                .await
                .unwrap();
        }
        lock_m.push(t.elapsed() / 100);
    }
    let (fm, lm) = (
        percentile(&mut floor_m, 50.0),
        percentile(&mut lock_m, 50.0),
    );
    report.add(
        "S1 memory",
        "tokio Mutex lock+unlock p50 (floor)",
        us(fm),
        fm.as_secs_f64(),
    );
    let r = ratio(lm, fm);
    report.add(
        "S1 memory",
        "acquire+release p50 ÷ floor",
        format!("{} = {r:.0} ×", us(lm)),
        r,
    );
}
