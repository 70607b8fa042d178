//! Operations that go to Redis together in one script call share some Redis calls: first
//! acquisitions of keys that no other operation of the call touches are checked by one
//! multi-key `EXISTS`, and last releases of such keys delete their keys with one `DEL`.
//! These tests queue operations behind a paused server so that they form one call, then
//! check what each operation did, locks with a record among them. The last two check that send slots come back when a
//! runtime ends with operations on their way.

#[path = "../support/mod.rs"]
mod support;

mod records;

use std::time::Duration;

use fred::prelude::*;
use support::cluster::RedisCluster;
use support::redisson_scripts::RedissonScripts;
use support::RedisServer;
use tower_lock::backend::unlock_channel;
use tower_lock::backend::RedisBackend;
use tower_lock::lock::{LockGuard, Released};
use tower_lock::{LockError, LockManager};

/// Pauses `server` and starts three tries: two take both send slots and the third
/// queues, so that the operations started next queue behind it and go together.
pub(crate) async fn paused_with_both_slots_taken(
    server: &RedisServer,
    backend: &RedisBackend,
    locks: &LockManager,
) -> Vec<tokio::task::JoinHandle<Result<LockGuard, LockError>>> {
    server.pause();
    let fillers = ["filler-1", "filler-2", "filler-3"]
        .map(|name| try_lock(locks, name))
        .into();
    wait_queued(backend, 1).await;
    fillers
}

/// Releases the fillers' locks (each was taken).
pub(crate) async fn release_fillers(
    fillers: Vec<tokio::task::JoinHandle<Result<LockGuard, LockError>>>,
) {
    for filler in fillers {
        let _ = filler.await.unwrap().unwrap().release().await.unwrap();
    }
}

pub(crate) async fn wait_queued(backend: &RedisBackend, queued: usize) {
    support::eventually(&format!("{queued} operations queued"), || async {
        (backend.queued_operations() == queued).then_some(())
    })
    .await;
}

pub(crate) fn try_lock(
    locks: &LockManager,
    name: &'static str,
) -> tokio::task::JoinHandle<Result<LockGuard, LockError>> {
    let locks = locks.clone();
    tokio::spawn(async move { locks.lock(name).try_acquire().await })
}

/// One of three first acquisitions in a call finds its key held (by Redisson): the shared
/// `EXISTS` sees a key, so each acquisition checks its own, and only that one is busy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_key_among_first_acquisitions_is_busy_and_the_others_acquire() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let redisson = RedissonScripts::new(admin.clone());
    assert_eq!(redisson.try_lock("held", 60_000).await, None);
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    let locks = LockManager::builder().backend(backend.clone());

    let fillers = paused_with_both_slots_taken(&server, &backend, &locks).await;
    let tries = ["free-1", "held", "free-2"].map(|name| try_lock(&locks, name));
    wait_queued(&backend, 4).await;
    let batched_before = backend.batched_operations();
    server.unpause();

    let [free_1, held, free_2] = tries;
    let (free_1, free_2) = (free_1.await.unwrap(), free_2.await.unwrap());
    match held.await.unwrap() {
        Err(LockError::TimedOut { holder_lease, .. }) => {
            assert!(holder_lease.is_some_and(|lease| lease > Duration::ZERO));
        }
        other => panic!("a lock held by Redisson was taken: {other:?}"),
    }
    assert_eq!(backend.batched_operations() - batched_before, 4);
    let holder: Option<String> = admin.hget("held", redisson.owner()).await.unwrap();
    assert_eq!(
        holder.as_deref(),
        Some("1"),
        "Redisson still holds its lock"
    );
    for (name, guard) in [("free-1", free_1), ("free-2", free_2)] {
        let guard = guard.expect("a free lock is acquired");
        let count: Option<String> = admin.hget(name, guard.owner().as_str()).await.unwrap();
        assert_eq!(count.as_deref(), Some("1"), "{name}");
        let pttl: i64 = admin.pttl(name).await.unwrap();
        assert!(pttl > 0, "{name} has its lease: {pttl}");
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    }
    release_fillers(fillers).await;
}

/// A release and another owner's acquisition of the same key in one call run in the order
/// they were queued, while last releases of other keys in the call are deleted together
/// (and each still publishes its unlock message).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_on_one_key_keep_their_order_within_a_call() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let backend = RedisBackend::connect(&server.url()).await.unwrap();
    // Two managers on one backend: two owners whose operations share the send queue.
    let first = LockManager::builder().backend(backend.clone());
    let second = LockManager::builder().backend(backend.clone());
    let shared = first.lock("shared").acquire().await.unwrap();
    let others = [
        first.lock("other-1").acquire().await.unwrap(),
        first.lock("other-2").acquire().await.unwrap(),
    ];
    let subscriber = support::subscriber(&server.url()).await;
    let mut messages = subscriber.message_rx();
    for guard in &others {
        support::subscribe_confirmed(&admin, &subscriber, &unlock_channel(guard.key())).await;
    }

    // Queued: the second owner's try first (the lock is still held then), the release,
    // the second owner's next try, and the two other releases.
    let fillers = paused_with_both_slots_taken(&server, &backend, &first).await;
    let early = try_lock(&second, "shared");
    wait_queued(&backend, 2).await;
    let release = tokio::spawn(shared.release());
    wait_queued(&backend, 3).await;
    let late = try_lock(&second, "shared");
    wait_queued(&backend, 4).await;
    let [other_1, other_2] = others.map(|guard| tokio::spawn(guard.release()));
    wait_queued(&backend, 6).await;
    server.unpause();

    assert!(
        matches!(early.await.unwrap(), Err(LockError::TimedOut { .. })),
        "the try queued before the release finds the lock held"
    );
    assert_eq!(release.await.unwrap().unwrap(), Released::Unlocked);
    let late = late
        .await
        .unwrap()
        .expect("the try queued after the release acquires");
    let count: Option<String> = admin.hget("shared", late.owner().as_str()).await.unwrap();
    assert_eq!(count.as_deref(), Some("1"));
    for release in [other_1, other_2] {
        assert_eq!(release.await.unwrap().unwrap(), Released::Unlocked);
    }
    for name in ["other-1", "other-2"] {
        let exists: i64 = admin.exists(name).await.unwrap();
        assert_eq!(exists, 0, "{name} deleted");
    }
    for _ in 0..2 {
        let message = tokio::time::timeout(Duration::from_secs(10), messages.recv())
            .await
            .expect("an unlock message for each deleted lock")
            .unwrap();
        assert_eq!(message.value.as_str().as_deref(), Some("0"));
    }
    assert_eq!(late.release().await.unwrap(), Released::Unlocked);
    release_fillers(fillers).await;
    let _ = subscriber.quit().await;
}

/// On a cluster, one call carries the operations of one slot: keys that share a hash tag
/// go together, and their shared `EXISTS` and `DEL` name keys of that slot only (Redis
/// would reject them with CROSSSLOT otherwise). The slot's node holds back writes
/// (`CLIENT PAUSE … WRITE`) while the operations queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_shared_calls_name_keys_of_one_slot() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start(3, 0))
        .await
        .unwrap();
    let admin = support::client(&cluster.url()).await;
    let backend = RedisBackend::connect(&cluster.url()).await.unwrap();
    let locks = LockManager::builder().backend(backend.clone());
    let names = ["a{t}", "b{t}", "c{t}", "d{t}", "e{t}"];
    let (master, _) = cluster.owners(fred::util::redis_keyslot(b"t"));
    let hold_writes = || RedisCluster::cli(master, &["client", "pause", "30000", "write"]);
    let release_writes = || RedisCluster::cli(master, &["client", "unpause"]);

    // Two tries take both send slots; the other three queue and go together.
    hold_writes();
    let tries = names.map(|name| try_lock(&locks, name));
    wait_queued(&backend, 3).await;
    let batched_before = backend.batched_operations();
    release_writes();
    let mut guards = Vec::new();
    for attempt in tries {
        guards.push(attempt.await.unwrap().expect("a free lock is acquired"));
    }
    assert_eq!(backend.batched_operations() - batched_before, 3);
    for (name, guard) in names.iter().zip(&guards) {
        let count: Option<String> = admin.hget(*name, guard.owner().as_str()).await.unwrap();
        assert_eq!(count.as_deref(), Some("1"), "{name}");
    }

    // The same for the releases: three last releases of the slot deleted together.
    hold_writes();
    let releases: Vec<_> = guards
        .into_iter()
        .map(|guard| tokio::spawn(guard.release()))
        .collect();
    wait_queued(&backend, 3).await;
    let batched_before = backend.batched_operations();
    release_writes();
    for release in releases {
        assert_eq!(release.await.unwrap().unwrap(), Released::Unlocked);
    }
    assert_eq!(backend.batched_operations() - batched_before, 3);
    for name in names {
        let exists: i64 = admin.exists(name).await.unwrap();
        assert_eq!(exists, 0, "{name} deleted");
    }
}

/// A runtime that ends while its tasks hold both send slots (sends to a paused server)
/// gives the slots back: the operations queued meanwhile by the runtime that owns the
/// client are sent once the server is back, and later ones too. (A batch spawned on the
/// dying runtime would be dropped unpolled; had it kept its slot, two such drops would
/// leave every later operation queued for ever.)
#[test]
fn a_runtime_that_ends_mid_send_gives_its_send_slots_back() {
    let server = RedisServer::start();
    let main = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (backend, locks) = main.block_on(async {
        let backend = RedisBackend::connect(&server.url()).await.unwrap();
        let locks = LockManager::builder().backend(backend.clone());
        (backend, locks)
    });
    server.pause();
    let other = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    other.block_on(async {
        // Two tries take both slots; the third queues (and dies with this runtime).
        for name in ["other-1", "other-2", "other-3"] {
            drop(try_lock(&locks, name));
        }
        wait_queued(&backend, 1).await;
    });
    // More than one batch (`MAX_BATCH` is 128): each slot given back sends one.
    let names: Vec<String> = (0..200).map(|i| format!("main-{i}")).collect();
    let tries: Vec<_> = main.block_on(async {
        let tries = names
            .iter()
            .map(|name| {
                let (locks, name) = (locks.clone(), name.clone());
                tokio::spawn(async move { locks.lock(name).try_acquire().await })
            })
            .collect();
        wait_queued(&backend, 201).await;
        tries
    });
    // The slots' holders are dropped here, inside the ending runtime.
    drop(other);
    server.unpause();

    main.block_on(async {
        for (name, attempt) in names.iter().zip(tries) {
            let guard = attempt
                .await
                .unwrap()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        }
        let after =
            tokio::time::timeout(Duration::from_secs(20), locks.lock("after").try_acquire())
                .await
                .expect("a lock operation after the runtime ended is sent (no send slot was kept)")
                .unwrap();
        assert_eq!(after.release().await.unwrap(), Released::Unlocked);
    });
}

/// Dropping the client's own runtime while sends are on their way and more operations
/// queue ends cleanly: each send slot given back spawns the next batch on the ending
/// runtime, which drops it at once, and that drop gives the slot back again without
/// deadlocking on the batcher.
#[test]
fn dropping_the_clients_runtime_with_operations_queued_ends() {
    let server = RedisServer::start();
    let (done, finished) = std::sync::mpsc::channel();
    let url = server.url();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let backend = RedisBackend::connect(&url).await.unwrap();
            let locks = LockManager::builder().backend(backend.clone());
            server.pause();
            for i in 0..300 {
                let locks = locks.clone();
                tokio::spawn(async move { locks.lock(format!("n-{i}")).try_acquire().await });
            }
            wait_queued(&backend, 298).await;
        });
        drop(runtime);
        server.unpause();
        let _ = done.send(());
    });
    finished
        .recv_timeout(Duration::from_secs(60))
        .expect("the runtime's drop finished (no deadlock on the batcher)");
}
