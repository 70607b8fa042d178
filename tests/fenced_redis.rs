//! The fenced lock's token counter on Redis, where it can hold what someone else wrote:
//! an acquisition is then refused with a message naming the counter, and takes nothing.

#[path = "support/mod.rs"]
mod support;

use fred::prelude::*;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_counter_holding_other_data_refuses_the_acquisition_and_takes_nothing() {
    let url = support::shared_redis_url();
    let admin = support::client(&url).await;
    let locks = LockManager::builder().redis(&url).await.unwrap();
    for (bad, what) in [("not a number", "not an integer"), ("-7", "holds -6")] {
        let name = support::unique("fenced-bad-counter");
        let tokens = support::fencing_tokens_key(&name);
        let _: () = admin.set(&tokens, bad, None, None, false).await.unwrap();
        let error = locks.fenced_lock(&name).acquire().await.unwrap_err();
        let message = match &error {
            LockError::Unavailable(error) => format!("{error:#}"),
            other => panic!("expected Unavailable, got {other:?}"),
        };
        assert!(message.contains(what), "{message}");
        let taken: i64 = admin.exists(&name).await.unwrap();
        assert_eq!(taken, 0, "nothing is taken ({bad})");
        // Repaired, the lock works again.
        let _: i64 = admin.del(&tokens).await.unwrap();
        let guard = locks.fenced_lock(&name).acquire().await.unwrap();
        assert_eq!(guard.fencing_token(), Some(1));
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    // A counter of another type.
    let name = support::unique("fenced-hash-counter");
    let tokens = support::fencing_tokens_key(&name);
    let _: () = admin.hset(&tokens, ("field", "value")).await.unwrap();
    let error = locks.fenced_lock(&name).acquire().await.unwrap_err();
    assert!(format!("{error:#}").contains("WRONGTYPE"), "{error:#}");
    let taken: i64 = admin.exists(&name).await.unwrap();
    assert_eq!(taken, 0);
    support::nothing_left_behind(&locks).await;
}
