//! S1: one client, uncontended acquire + release, against the EVAL floor.

use super::*;
use crate::script_calls::ScriptCalls;

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
    let locks = LockManager::builder().backend(backend.clone());
    // The same script calls with no engine around them: what Redis and fred alone cost.
    let scripts = ScriptCalls::new(
        backend,
        locks.key("bench:s1:scripts").expect("a valid name"),
    );
    let n = scale.s1_iterations;
    let mut eval = Vec::with_capacity(n);
    let (mut acquire, mut release, mut both) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut scripts_acquire, mut scripts_release) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for round in 0..(n + n / 10) {
        let e = eval_floor(&client).await;
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
    // The scripts alone, in rounds of their own after the lock's (in the same rounds they
    // change the rhythm the lock is measured in): the floor and the backend's acquire and
    // release taking turns.
    let mut scripts_floor = Vec::with_capacity(n);
    for round in 0..(n + n / 10) {
        let e = eval_floor(&client).await;
        let t = Instant::now();
        scripts.acquire().await;
        let sa = t.elapsed();
        let t = Instant::now();
        scripts.release().await;
        let sr = t.elapsed();
        if round >= n / 10 {
            scripts_floor.push(e);
            scripts_acquire.push(sa);
            scripts_release.push(sr);
        }
    }
    let scripts_floor = percentile(&mut scripts_floor, 50.0);
    let alone = ratio(percentile(&mut scripts_acquire, 50.0), scripts_floor)
        + ratio(percentile(&mut scripts_release, 50.0), scripts_floor);
    report.add(
        scenario,
        "the scripts alone: the backend's (acquire p50 + release p50) ÷ floor, no engine (rounds of their own, right after)",
        format!("{alone:.2} × (the engine adds {:.2})", sum - alone),
        alone,
    );
    floor
}

/// One `EVAL "return 1"` through `client`, timed: the floor.
async fn eval_floor(client: &Client) -> Duration {
    let t = Instant::now();
    let _: i64 = client
        .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
        .await
        .unwrap();
    t.elapsed()
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
