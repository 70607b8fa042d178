//! Listing many names: 10,000 on one server and spread over a Cluster's masters, found
//! whole within the limit and cut to a smaller one.

use fred::prelude::KeysInterface;
use tower_lock::LockManager;

use crate::support;
use crate::support::suite::{backend_suite, BackendUnderTest};

/// 10,000 names (on a Cluster: spread over every master): a listing finds them all, and a
/// smaller limit returns that many and says there are more.
async fn ten_thousand_names_are_listed_within_the_limit(backend: BackendUnderTest) {
    let manager = backend.manager(LockManager::builder()).await;
    let redis = &support::client(&backend.url().expect("a Redis backend")).await;
    let prefix = support::unique("many");
    let keys: Vec<String> = (0..10_000).map(|i| format!("{prefix}:{i}")).collect();
    for chunk in keys.chunks(500) {
        // Sent together (one batch of concurrent commands per chunk).
        let sets: Vec<_> = chunk
            .iter()
            .map(|key| {
                let (redis, key) = (redis.clone(), key.clone());
                tokio::spawn(async move {
                    let _: () = redis.set(key, 1, None, None, false).await.unwrap();
                })
            })
            .collect();
        for set in sets {
            set.await.unwrap();
        }
    }
    let all = manager
        .list_names(&format!("{prefix}:*"), 10_000)
        .await
        .unwrap();
    assert_eq!((all.names.len(), all.truncated), (10_000, false));
    let some = manager
        .list_names(&format!("{prefix}:*"), 100)
        .await
        .unwrap();
    assert_eq!((some.names.len(), some.truncated), (100, true));
    for chunk in keys.chunks(500) {
        let dels: Vec<_> = chunk
            .iter()
            .map(|key| {
                let (redis, key) = (redis.clone(), key.clone());
                tokio::spawn(async move {
                    let _: i64 = redis.del(key).await.unwrap();
                })
            })
            .collect();
        for del in dels {
            del.await.unwrap();
        }
    }
}

backend_suite!([Redis, Cluster] ten_thousand_names_are_listed_within_the_limit);
