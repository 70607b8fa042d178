//! Read-write locks on Redis at the backend level: Redisson's layout and messages. (The
//! rules themselves are in the conformance suite, `tower_lock::conformance::read_write_rules`.)

mod support;

use std::time::Duration;

use fred::prelude::*;
use support::suite::{backend_suite, BackendUnderTest};
use tower_lock::backend::Attempt;
use tower_lock::conformance::BackendLock;
use tower_lock::lock::{LockKind, Released};
use tower_lock::LockManager;

const LEASE: Duration = Duration::from_secs(30);

/// A fresh name on `backend`.
async fn lock_on(backend: BackendUnderTest, name: &str) -> BackendLock {
    BackendLock {
        backend: backend.backend().await,
        key: LockManager::memory().key(&support::unique(name)).unwrap(),
        lease: LEASE,
    }
}

use LockKind::{Read, Write};

/// Redisson's layout: the hash's `mode`, reader and `:write` fields, one timeout key per
/// read hold; a read release that frees the lock publishes `0`, a write release `1`, on
/// `redisson_rwlock:{name}`.
async fn redissons_layout_and_messages(backend: BackendUnderTest) {
    let lock = lock_on(backend, "rw-layout").await;
    let url = backend.url().unwrap();
    let admin = support::client(&url).await;
    let subscriber = support::subscriber(&url).await;
    let channel = format!("redisson_rwlock:{{{}}}", lock.key);
    let mut messages = subscriber.message_rx();
    support::subscribe_confirmed(&admin, &subscriber, &channel).await;
    let name = lock.key.as_str();

    assert_eq!(lock.acquire(Read, "u:1", 0).await, Attempt::Acquired);
    assert_eq!(lock.acquire(Read, "u:1", 1).await, Attempt::Acquired);
    let mode: String = admin.hget(name, "mode").await.unwrap();
    let count: i64 = admin.hget(name, "u:1").await.unwrap();
    assert_eq!((mode.as_str(), count), ("read", 2));
    for n in 1..=2 {
        let ttl: i64 = admin
            .pttl(format!("{{{name}}}:u:1:rwlock_timeout:{n}"))
            .await
            .unwrap();
        assert!(ttl > 0, "hold {n}'s timeout key");
    }
    assert_eq!(lock.release(Read, "u:1", 2).await, Released::StillHeld);
    let gone: i64 = admin
        .exists(format!("{{{name}}}:u:1:rwlock_timeout:2"))
        .await
        .unwrap();
    assert_eq!(gone, 0);
    assert_eq!(lock.release(Read, "u:1", 1).await, Released::Unlocked);
    let message = tokio::time::timeout(Duration::from_secs(20), messages.recv())
        .await
        .expect("the release's message")
        .unwrap();
    assert_eq!(
        (message.channel.to_string(), message.value.as_string()),
        (channel.clone(), Some("0".into()))
    );

    assert_eq!(lock.acquire(Write, "u:2", 0).await, Attempt::Acquired);
    let mode: String = admin.hget(name, "mode").await.unwrap();
    let count: i64 = admin.hget(name, "u:2:write").await.unwrap();
    assert_eq!((mode.as_str(), count), ("write", 1));
    assert_eq!(lock.release(Write, "u:2", 1).await, Released::Unlocked);
    let message = tokio::time::timeout(Duration::from_secs(20), messages.recv())
        .await
        .expect("the release's message")
        .unwrap();
    assert_eq!(message.value.as_string(), Some("1".into()));
    let exists: i64 = admin.exists(name).await.unwrap();
    assert_eq!(exists, 0);
}

mod layout {
    use super::*;
    backend_suite!([Redis, Cluster] redissons_layout_and_messages);
}
