//! This process's own unlock notices come back to its subscriber and are told apart from
//! other processes' (`echoes`). A release that fails must not leave one expected: the next
//! notice of another process would be taken for it, and a waiter would sleep until the
//! holder's lease ends.

mod support;

use std::time::Duration;

use fred::prelude::*;
use support::redisson_scripts::RedissonScripts;
use support::RedisServer;
use tower_lock::lock::Released;
use tower_lock::LockManager;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_release_leaves_no_notice_expected() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let here = LockManager::redis(&server.url()).await.unwrap();
    let name = support::unique("echo");

    // A holder here with a waiter here: this process listens on the name. The waiter's
    // first attempt must have reached Redis (and found the lock busy) before the key is
    // changed below: one that lands after the DEL would take the lock, and the SET would
    // then destroy it under the waiter (a slow machine did that).
    let holder = here.lock(&name).acquire().await.unwrap();
    let attempts_before = support::command_calls(&admin, "evalsha").await;
    let waiter = support::spawn_waiter(&here, &name, Duration::from_secs(30));
    support::eventually("the waiter listens, its first attempt answered", || async {
        let channel = tower_lock::backend::unlock_channel(holder.key());
        let listens = support::numsub(&admin, &channel).await == 1;
        let tried = support::command_calls(&admin, "evalsha").await > attempts_before;
        (listens && tried).then_some(())
    })
    .await;
    // The key now holds other data: the release (and its re-sends) fail.
    let _: () = admin.del(&name).await.unwrap();
    let _: () = admin
        .set(&name, "not a lock", None, None, false)
        .await
        .unwrap();
    assert!(holder.release().await.is_err(), "the release fails");

    // In one step, the key becomes a lock of another process (a Redisson client) with a
    // long lease; our waiter finds it busy for that lease and sleeps. Its release then
    // notifies our waiter, which must wake.
    let redisson = RedissonScripts::new(admin.clone());
    let calls = support::command_calls(&admin, "evalsha").await;
    let replaced: Option<i64> = admin
        .eval(
            "redis.call('del', KEYS[1]); redis.call('hset', KEYS[1], ARGV[1], 1); \
             return redis.call('pexpire', KEYS[1], 120000)",
            vec![name.clone()],
            vec![redisson.owner().to_owned()],
        )
        .await
        .unwrap();
    assert_eq!(replaced, Some(1));
    // Its next attempt (our only script call now) finds it busy for 120 s.
    support::eventually("our waiter tries again", || async {
        (support::command_calls(&admin, "evalsha").await > calls).then_some(())
    })
    .await;
    assert_eq!(redisson.unlock(&name, "r1").await, Some(1));
    let guard = waiter
        .await
        .unwrap()
        .expect("woken by the other process's notice, well before its 120 s lease");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}
