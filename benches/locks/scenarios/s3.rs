//! S3: many names, against EVAL throughput at the same concurrency.

use super::*;

/// S3: many names, 64 workers, against EVAL throughput at the same concurrency.
pub(super) async fn s3(url: &str, scale: Scale, report: &mut Report) {
    eprintln!("S3 many names…");
    let backend = RedisBackend::connect(url).await.expect("connect");
    let client = backend.client().clone();
    let locks = LockManager::builder().backend(backend);
    let eval_op = move |_| {
        let client = client.clone();
        async move {
            let _: i64 = client
                .eval("return 1", Vec::<String>::new(), Vec::<String>::new())
                .await
                .unwrap();
        }
    };
    let lock_op = move |n| lock_cycle(locks.clone(), n);
    let (eval_rate, lock_rate) = interleaved(scale.s3_duration, eval_op, lock_op).await;
    report.add(
        "S3 redis",
        "EVAL throughput, 64 workers (floor)",
        format!("{eval_rate:.0}/s"),
        eval_rate,
    );
    let r = lock_rate / eval_rate;
    report.goal(
        "S3 redis",
        "acquire+release throughput ÷ floor",
        format!("{lock_rate:.0}/s = {r:.2} ×"),
        r,
        "≥ 0.4 ×",
        r >= 0.4,
    );

    // The polling lock of other libraries (rslock's algorithm: SET NX PX, then a
    // compare-and-delete script), on a client of its own, against tower-lock again.
    let polling = contenders::Contender::Polling {
        client: support::client(url).await,
        every: Duration::from_millis(10),
    };
    let poll_op = move |n: u64| {
        let polling = polling.clone();
        async move {
            let name = format!("bench:s3:poll:{}", n % 10_000);
            polling.acquire(&name).await.release().await;
        }
    };
    let locks = LockManager::builder().backend(RedisBackend::connect(url).await.expect("connect"));
    let lock_op = move |n| lock_cycle(locks.clone(), n);
    let (poll_rate, lock_rate) = interleaved(scale.s3_duration, poll_op, lock_op).await;
    let r = lock_rate / poll_rate;
    report.goal(
        "S3 redis",
        "acquire+release throughput ÷ the polling lock's (SET NX PX + compare-and-delete)",
        format!("{lock_rate:.0}/s ÷ {poll_rate:.0}/s = {r:.2} ×"),
        r,
        "≥ 1.0 ×",
        r >= 1.0,
    );

    let mutexes: Arc<Vec<tokio::sync::Mutex<()>>> =
        Arc::new((0..10_000).map(|_| tokio::sync::Mutex::new(())).collect());
    let mutex_op = move |n: u64| {
        let mutexes = mutexes.clone();
        async move {
            drop(mutexes[(n % 10_000) as usize].lock().await);
        }
    };
    let memory = LockManager::memory();
    let memory_op = move |n| lock_cycle(memory.clone(), n);
    let (mutex_rate, memory_rate) = interleaved(scale.s3_duration, mutex_op, memory_op).await;
    report.add(
        "S3 memory",
        "tokio Mutex throughput, 64 workers (floor)",
        format!("{mutex_rate:.0}/s"),
        mutex_rate,
    );
    let r = memory_rate / mutex_rate;
    report.add(
        "S3 memory",
        "acquire+release throughput ÷ floor",
        format!("{memory_rate:.0}/s = {r:.2} ×"),
        r,
    );
}

/// S3's operation: acquire and release one of 10,000 names picked by `n`.
pub(super) async fn lock_cycle(locks: LockManager, n: u64) {
    let guard = locks
        .lock(format!("bench:s3:{}", n % 10_000))
        .wait(Duration::from_secs(10))
        .acquire()
        .await
        .unwrap();
    let _ = guard.release().await.unwrap();
}
