//! Holds: reentry counts, dropped guards and acquisitions free what they held, any name works.

use std::time::Duration;

use crate::lock::Released;
use crate::LockError;

use super as support;
use super::ctx::Ctx;
use super::Subject;

/// A reentry counts: the lock stays held until both holds are released.
pub async fn reentrant_holds_count(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
    let name = support::unique("reentrant");
    let outer = ctx.manager.lock(&name).acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.owner(), outer.owner());
    if let Some(info) = ctx.inspected(&name).await {
        assert_eq!(info.holders.len(), 1, "{info:?}");
        assert_eq!(info.holders[0].holds, 2, "one owner, two holds: {info:?}");
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
pub async fn dropped_guard_frees_the_lock(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
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

/// Acquisitions dropped at every point leave nothing held: the name is free afterwards.
pub async fn dropped_acquires_leave_nothing_held(subject: &dyn Subject) {
    let ctx = Ctx::new(subject).await;
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

/// Empty and too long names are refused; braces, newlines, quotes, Unicode and NUL work (or
/// are refused at once by a backend that cannot lock them safely, saying why).
pub async fn names_are_validated_and_any_bytes_work(subject: &dyn Subject) {
    let ctx = Ctx::with(subject, |b| b.max_name_len(64)).await;
    let backend = ctx.backend().await;
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
        // A backend may refuse a key it cannot lock safely (Redis Cluster: braces that form
        // no hash tag would split the lock's keys across slots): a clear error, at once.
        let key = crate::key::LockKey::joined("", &[&name], 64).expect("a valid name");
        if let Err(refused) = backend.check_key(&key) {
            match ctx.manager.lock(&name).acquire().await {
                Err(LockError::InvalidName { reason }) => {
                    assert!(reason.contains(&refused), "{reason} / {refused}")
                }
                other => panic!("{odd}: expected InvalidName ({refused}), got {other:?}"),
            }
            continue;
        }
        let guard = ctx.manager.lock(&name).acquire().await.unwrap();
        assert!(ctx.manager.lock(&name).try_acquire().await.is_err());
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
}
