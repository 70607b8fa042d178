//! Holds: reentry counts, dropped guards and acquisitions free what they held, any name works.

use std::time::Duration;

use tower_lock::lock::Released;
use tower_lock::LockError;

use crate::ctx::Ctx;
use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

async fn reentrant_holds_count(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("reentrant");
    let outer = ctx.manager.lock(&name).acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.owner(), outer.owner());
    if let Some(redis) = &ctx.redis {
        let count: i64 = fred::prelude::HashesInterface::hget(redis, &name, outer.owner().as_str())
            .await
            .unwrap();
        assert_eq!(count, 2, "the reentry count is in the Redisson hash");
    }
    assert_eq!(inner.release().await.unwrap(), Released::StillHeld);
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "still held after one release"
    );
    assert_eq!(outer.release().await.unwrap(), Released::Unlocked);
    let next = ctx
        .manager
        .lock(&name)
        .try_acquire()
        .await
        .expect("free after both releases");
    assert_eq!(next.release().await.unwrap(), Released::Unlocked);
}

/// A dropped guard releases its lock, also when it is dropped on a thread outside any
/// runtime (holds keep no runtime handle of their own: the release goes to the runtime the
/// manager knows).
async fn dropped_guard_frees_the_lock(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("drop");
    for outside_the_runtime in [false, true] {
        let guard = ctx.manager.lock(&name).acquire().await.unwrap();
        if outside_the_runtime {
            std::thread::spawn(move || drop(guard)).join().unwrap();
        } else {
            drop(guard);
        }
        // The default lease is 30 s: acquiring within a 5 s wait proves the drop released it.
        let next = ctx
            .manager
            .lock(&name)
            .wait(Duration::from_secs(5))
            .acquire()
            .await
            .unwrap_or_else(|e| panic!("dropped outside the runtime: {outside_the_runtime}: {e}"));
        let _ = next.release().await.unwrap();
    }
    // The dropped guard's release runs in a task of its own: when it hands the lock over,
    // the next holder can run (and release) before that task has counted its own release.
    support::eventually("nothing left behind", || async {
        (ctx.manager.stats() == Default::default()).then_some(())
    })
    .await;
}

async fn dropped_acquires_leave_nothing_held(backend: BackendUnderTest) {
    let ctx = Ctx::new(backend).await;
    let name = support::unique("dropacquire");
    // Cancel acquisitions at every point of their life; none may leave the lock held.
    for i in 0..200u32 {
        let (manager, name) = (ctx.manager.clone(), name.clone());
        let task = tokio::spawn(async move { manager.lock(&name).acquire().await });
        for _ in 0..(i % 8) {
            tokio::task::yield_now().await;
        }
        task.abort();
        if let Ok(Ok(guard)) = task.await {
            // Finished before the abort: an ordinary holder.
            let _ = guard.release().await.unwrap();
        }
    }
    // A 30 s lease: acquiring within 5 s shows nothing was left behind by the cancellations.
    let guard = ctx
        .manager
        .lock(&name)
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("no cancelled acquisition kept the lock");
    let _ = guard.release().await.unwrap();
    assert_eq!(ctx.manager.waiting_names(), 0);
}

async fn names_are_validated_and_any_bytes_work(backend: BackendUnderTest) {
    let ctx = Ctx::with(backend, |b| b.max_name_len(64)).await;
    assert!(matches!(
        ctx.manager.lock("").acquire().await,
        Err(LockError::InvalidName { .. })
    ));
    assert!(matches!(
        ctx.manager.lock("x".repeat(65)).acquire().await,
        Err(LockError::InvalidName { .. })
    ));
    for odd in [
        "{braces}",
        "a}b{c",
        "x{}y",
        "new\nline",
        "'; return 1 --",
        "ünï©ødé",
        "\u{0}nul",
        "%s%n",
    ] {
        let name = format!("{}{odd}", support::unique("odd"));
        if backend == BackendUnderTest::Cluster && (odd == "a}b{c" || odd == "x{}y") {
            // Braces that form no hash tag would split the lock's keys across slots.
            match ctx.manager.lock(&name).acquire().await {
                Err(LockError::InvalidName { reason }) => {
                    assert!(reason.contains("hash tag"), "{reason}")
                }
                other => panic!("{odd}: expected InvalidName on a cluster, got {other:?}"),
            }
            continue;
        }
        let guard = ctx.manager.lock(&name).acquire().await.unwrap();
        assert!(ctx.manager.lock(&name).try_acquire().await.is_err());
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
}

backend_suite!(
    [Memory, Redis, Cluster]
    reentrant_holds_count,
    dropped_guard_frees_the_lock,
    dropped_acquires_leave_nothing_held,
    names_are_validated_and_any_bytes_work,
);
