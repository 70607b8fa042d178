//! The behaviour suite: the same tests against the in-memory backend and a real Redis.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tower_lock::backend::redis::unlock_channel;
use tower_lock::backend::{
    AcquireArgs, Attempt, Backend, MemoryBackend, RedisBackend, ReleaseArgs,
};
use tower_lock::{LockError, LockKind, LockManager, LockManagerBuilder, Released, MAX_LEASE};

#[derive(Clone, Copy, Debug)]
enum Kind {
    Memory,
    Redis,
    /// A local 3-master Redis Cluster.
    Cluster,
}

/// A manager on the backend under test, plus a way to reach the backend behind its back.
struct Ctx {
    manager: LockManager,
    memory: Option<MemoryBackend>,
    redis: Option<fred::prelude::Client>,
    url: Option<String>,
}

impl Ctx {
    async fn new(kind: Kind) -> Ctx {
        Self::with(kind, |b| b).await
    }

    async fn with(
        kind: Kind,
        configure: impl FnOnce(LockManagerBuilder) -> LockManagerBuilder,
    ) -> Ctx {
        let builder = configure(LockManager::builder());
        match kind {
            Kind::Memory => {
                let memory = MemoryBackend::new();
                Ctx {
                    manager: builder.backend(memory.clone()),
                    memory: Some(memory),
                    redis: None,
                    url: None,
                }
            }
            Kind::Redis | Kind::Cluster => {
                let url = match kind {
                    Kind::Cluster => support::cluster::shared_cluster_url(),
                    _ => support::shared_redis_url(),
                };
                Ctx {
                    manager: builder
                        .redis(&url)
                        .await
                        .expect("connect to the test redis"),
                    memory: None,
                    redis: Some(support::client(&url).await),
                    url: Some(url),
                }
            }
        }
    }

    /// A second handle on the manager's store, to send backend operations directly.
    async fn backend(&self) -> Box<dyn Backend> {
        match (&self.memory, &self.url) {
            (Some(memory), _) => Box::new(memory.clone()),
            (None, Some(url)) => Box::new(RedisBackend::connect(url).await.unwrap()),
            (None, None) => unreachable!("a context has a memory backend or a Redis URL"),
        }
    }

    /// Deletes the lock behind its holder's back.
    async fn delete(&self, name: &str) {
        let key = self.manager.key(name).unwrap();
        if let Some(memory) = &self.memory {
            assert!(memory.force_unlock(&key));
        }
        if let Some(redis) = &self.redis {
            let deleted: i64 = redis.del(key.as_str()).await.unwrap();
            assert_eq!(deleted, 1);
        }
    }
}

use fred::prelude::KeysInterface;

/// A task acquiring `name` with `wait`, returned once it is queued behind the holder.
async fn queued_waiter(
    manager: &LockManager,
    name: &str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<tower_lock::LockGuard, LockError>> {
    let waiter = {
        let (manager, name) = (manager.clone(), name.to_owned());
        tokio::spawn(async move { manager.lock(&name).wait(wait).acquire().await })
    };
    while manager.waiting(name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    waiter
}

async fn mutual_exclusion(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("exclusion");
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (manager, name) = (ctx.manager.clone(), name.clone());
            let (inside, max_inside, done) = (inside.clone(), max_inside.clone(), done.clone());
            tokio::spawn(async move {
                let guard = manager
                    .lock(&name)
                    .wait(Duration::from_secs(60))
                    .acquire()
                    .await
                    .expect("every task acquires");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                let released = guard.release().await.unwrap();
                assert!(
                    matches!(released, Released::Unlocked | Released::HandedOver),
                    "{released:?}"
                );
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 100);
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        1,
        "two holders were inside at once"
    );
    assert_eq!(ctx.manager.waiting_names(), 0);
}

async fn one_of_many_tries_wins(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("tries");
    let tries: Vec<_> = (0..1000)
        .map(|_| {
            let (manager, name) = (ctx.manager.clone(), name.clone());
            tokio::spawn(async move { manager.lock(&name).try_acquire().await })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tries {
        match task.await.unwrap() {
            Ok(guard) => winners.push(guard),
            Err(LockError::TimedOut { waited, .. }) => assert!(waited < Duration::from_secs(10)),
            Err(other) => panic!("unexpected error {other}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one try wins a free lock");

    // While it is held, every try of another owner fails and reports the holder's lease.
    for _ in 0..100 {
        match ctx.manager.lock(&name).try_acquire().await {
            Err(LockError::TimedOut { holder_lease, .. }) => {
                let lease = holder_lease.expect("the holder has a lease");
                assert!(lease <= tower_lock::DEFAULT_LEASE);
            }
            other => panic!("a held lock was taken: {other:?}"),
        }
    }
}

async fn waiters_acquire_in_fifo_order(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("fifo");
    let holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..100 {
        let (manager, n, order) = (ctx.manager.clone(), name.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let guard = manager
                .lock(&n)
                .wait(Duration::from_secs(60))
                .acquire()
                .await
                .unwrap_or_else(|e| panic!("waiter {i} failed: {e}"));
            order.lock().unwrap().push(i);
            tokio::time::sleep(Duration::from_millis(1)).await;
            guard.release().await.unwrap();
        }));
        // Enqueue in a known order: wait until waiter i is queued.
        while ctx.manager.waiting(&name) < i + 1 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    holder.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..100).collect::<Vec<_>>());
    assert_eq!(ctx.manager.waiting_names(), 0);
}

/// A release wakes the next waiter at once, whatever the holder's lease: with an hour's
/// lease, a lost wake-up would leave the waiter to time out.
async fn a_release_wakes_the_waiter_before_the_lease_ends(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("wake");
    let holder = ctx
        .manager
        .lock(&name)
        .fixed_lease(Duration::from_secs(3600))
        .acquire()
        .await
        .unwrap();
    let waiter = queued_waiter(&ctx.manager, &name, Duration::from_secs(20)).await;
    // Redis hands the lock straight to the waiter unless its own attempt is on its way.
    let released = holder.release().await.unwrap();
    assert!(
        matches!(released, Released::Unlocked | Released::HandedOver),
        "{released:?}"
    );
    let guard = waiter.await.unwrap().expect("the release woke the waiter");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    assert_eq!(
        ctx.manager.stats(),
        Default::default(),
        "nothing left behind"
    );
}

async fn wait_times_out_with_a_typed_error(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("timeout");
    let _holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let wait = Duration::from_millis(200);
    match ctx.manager.lock(&name).wait(wait).acquire().await {
        Err(LockError::TimedOut {
            key,
            waited,
            holder_lease,
        }) => {
            assert_eq!(key.as_str(), name);
            assert!(waited >= wait, "gave up early, after {waited:?}");
            assert!(waited < tower_lock::DEFAULT_LEASE, "waited {waited:?}");
            assert!(holder_lease.is_some_and(|l| l <= tower_lock::DEFAULT_LEASE));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert_eq!(ctx.manager.waiting_names(), 0);
}

async fn reentrant_holds_count(kind: Kind) {
    let ctx = Ctx::new(kind).await;
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

async fn explicit_lease_expires(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("lease");
    let lease = Duration::from_millis(300);
    let guard = ctx
        .manager
        .lock(&name)
        .fixed_lease(lease)
        .acquire()
        .await
        .unwrap();
    assert!(!guard.is_renewed());
    assert!(!guard.is_lost());
    let next = ctx
        .manager
        .lock(&name)
        .wait(Duration::from_secs(20))
        .acquire()
        .await
        .expect("another owner gets the lock once the lease ends");
    guard.lost().await;
    assert!(guard.is_lost());
    assert_eq!(
        guard.release().await.unwrap(),
        Released::NotHeld,
        "an expired lease is a typed outcome"
    );
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "the late release left the new holder alone"
    );
    next.release().await.unwrap();
}

async fn watchdog_keeps_a_long_hold(kind: Kind) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(kind, |b| b.lease(lease)).await;
    let name = support::unique("watchdog");
    let guard = ctx.manager.lock(&name).acquire().await.unwrap();
    assert!(guard.is_renewed());
    tokio::time::sleep(lease * 3).await;
    assert!(!guard.is_lost());
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "held past three leases"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

async fn loss_signal_fires_when_the_lock_disappears(kind: Kind) {
    let lease = Duration::from_millis(300);
    let ctx = Ctx::with(kind, |b| b.lease(lease)).await;
    let name = support::unique("loss");
    let guard = ctx.manager.lock(&name).acquire().await.unwrap();
    let loss = guard.loss();
    ctx.delete(&name).await;
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("the next renewal reports the loss");
    assert!(loss.is_lost());
    assert_eq!(guard.release().await.unwrap(), Released::NotHeld);
}

/// A release that finds the lock gone (deleted behind its holder) lets the next local
/// waiter try at once: the lock is free. It used to leave the waiter asleep until the
/// holder's lease as last reported (here 300 s), or its own deadline.
async fn a_release_that_finds_the_lock_gone_wakes_the_next_waiter(kind: Kind) {
    let lease = Duration::from_secs(300);
    let ctx = Ctx::with(kind, |b| b.lease(lease).hand_over_limit(0)).await;
    let name = support::unique("gone-wakes");
    let holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let waiter = queued_waiter(&ctx.manager, &name, lease).await;
    ctx.delete(&name).await;
    assert_eq!(holder.release().await.unwrap(), Released::NotHeld);
    // Far less than the 300 s the waiter was told the holder's lease runs.
    let guard = tokio::time::timeout(Duration::from_secs(20), waiter)
        .await
        .expect("the waiter tries as soon as the release found the lock gone")
        .unwrap()
        .expect("and gets the free lock");
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    assert_eq!(ctx.manager.stats(), Default::default());
}

/// A dropped guard releases its lock, also when it is dropped on a thread outside any
/// runtime (holds keep no runtime handle of their own: the release goes to the runtime the
/// manager knows).
async fn dropped_guard_frees_the_lock(kind: Kind) {
    let ctx = Ctx::new(kind).await;
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
        next.release().await.unwrap();
    }
    assert_eq!(ctx.manager.stats(), Default::default());
}

async fn dropped_waiter_leaves_the_queue(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("dropwait");
    let holder = ctx.manager.lock(&name).acquire().await.unwrap();
    let waiter = queued_waiter(&ctx.manager, &name, Duration::from_secs(60)).await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(ctx.manager.waiting(&name), 0);
    assert_eq!(ctx.manager.waiting_names(), 0);
    if let Some(redis) = &ctx.redis {
        // The subscription goes away too (the unsubscribe is sent by a background task).
        let key = ctx.manager.key(&name).unwrap();
        let mut subscribers = 1;
        for _ in 0..500 {
            subscribers = support::numsub(redis, &unlock_channel(&key)).await;
            if subscribers == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(
            subscribers, 0,
            "the channel is unsubscribed when the last waiter leaves"
        );
    }
    holder.release().await.unwrap();
}

async fn dropped_acquires_leave_nothing_held(kind: Kind) {
    let ctx = Ctx::new(kind).await;
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
            guard.release().await.unwrap();
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
    guard.release().await.unwrap();
    assert_eq!(ctx.manager.waiting_names(), 0);
}

async fn names_are_validated_and_any_bytes_work(kind: Kind) {
    let ctx = Ctx::with(kind, |b| b.max_name_len(64)).await;
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
        if matches!(kind, Kind::Cluster) && (odd == "a}b{c" || odd == "x{}y") {
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

async fn other_owners_cannot_release(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let name = support::unique("owners");
    let guard = ctx.manager.lock(&name).acquire().await.unwrap();
    // The owner id is `<UUID v4>:<n>`: 122 random bits that another process cannot guess.
    let (uuid, holder) = guard.owner().as_str().rsplit_once(':').unwrap();
    assert_eq!(uuid.len(), 36);
    assert_eq!(&uuid[14..15], "4", "a version 4 (random) UUID: {uuid}");
    assert!(holder.parse::<u64>().is_ok());
    assert_eq!(uuid, ctx.manager.id());
    // A release by any other owner (a guessed holder number included) changes nothing.
    let backend = ctx.backend().await;
    for other in [
        format!("{uuid}:999999"),
        "someone-else:1".to_owned(),
        String::new(),
    ] {
        let released = backend
            .release(ReleaseArgs {
                key: guard.key().clone(),
                kind: LockKind::Exclusive,
                owner: tower_lock::OwnerId::from_raw(&other),
                lease: Duration::from_secs(30),
                expected: 1,
                successor: None,
            })
            .await
            .unwrap()
            .released;
        assert_eq!(released, Released::NotHeld);
    }
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "still held by its owner"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

/// Many tasks on many names at once (on Redis their operations are batched, per slot on a
/// cluster): every name stays exclusive and every operation gets its own answer.
async fn concurrent_names_stay_exclusive(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let redis = match &ctx.url {
        Some(url) => Some(RedisBackend::connect(url).await.unwrap()),
        None => None,
    };
    let manager = match &redis {
        Some(backend) => LockManager::builder().backend(backend.clone()),
        None => ctx.manager.clone(),
    };
    let prefix = support::unique("many");
    const NAMES: usize = 12;
    let holders: Arc<Vec<AtomicUsize>> =
        Arc::new((0..NAMES).map(|_| AtomicUsize::new(0)).collect());
    let acquired = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for worker in 0..24usize {
        let (manager, holders, acquired, prefix) = (
            manager.clone(),
            holders.clone(),
            acquired.clone(),
            prefix.clone(),
        );
        tasks.push(tokio::spawn(async move {
            for round in 0..25usize {
                let name = (worker * 7 + round * 5) % NAMES;
                let guard = manager
                    .lock(format!("{prefix}:{name}"))
                    .wait(Duration::from_secs(20))
                    .acquire()
                    .await
                    .unwrap();
                assert_eq!(
                    holders[name].fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders"
                );
                tokio::task::yield_now().await;
                holders[name].fetch_sub(1, Ordering::SeqCst);
                let released = guard.release().await.unwrap();
                assert!(
                    matches!(released, Released::Unlocked | Released::HandedOver),
                    "{released:?}"
                );
                acquired.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(acquired.load(Ordering::SeqCst), 24 * 25);
    if let Some(backend) = redis {
        assert!(
            backend.batched_operations() > 0,
            "24 concurrent tasks never had their operations batched"
        );
    }
    assert_eq!(manager.stats(), Default::default(), "nothing left behind");
}

/// fred re-sends a command that was in flight when its connection dropped: every
/// operation carries the count it expects, so a second delivery changes nothing.
async fn resent_operations_take_effect_once(kind: Kind) {
    let ctx = Ctx::new(kind).await;
    let backend = ctx.backend().await;
    let name = support::unique("once");
    let key = ctx.manager.key(&name).unwrap();
    let owner = tower_lock::OwnerId::from_raw("00000000-0000-4000-8000-000000000000:1");
    let other = tower_lock::OwnerId::from_raw("someone-else:1");
    let lease = Duration::from_secs(30);
    let acquire = |owner: &tower_lock::OwnerId, expected| AcquireArgs {
        key: key.clone(),
        kind: LockKind::Exclusive,
        owner: owner.clone(),
        lease,
        expected,
    };
    let release = |owner: &tower_lock::OwnerId, expected| ReleaseArgs {
        key: key.clone(),
        kind: LockKind::Exclusive,
        owner: owner.clone(),
        lease,
        expected,
        successor: None,
    };
    // Whether a re-entry by `owner` with `expected` holds finds exactly that count.
    let holds = |expected: u32| {
        let backend = &backend;
        let (owner, acquire, release) = (&owner, &acquire, &release);
        async move {
            match backend.acquire(acquire(owner, expected)).await.unwrap() {
                Attempt::Acquired => {
                    let undo = backend
                        .release(release(owner, expected + 1))
                        .await
                        .unwrap()
                        .released;
                    assert_eq!(undo, Released::StillHeld);
                    true
                }
                _ => false,
            }
        }
    };
    // A first acquisition sent twice counts once.
    for _ in 0..2 {
        assert_eq!(
            backend.acquire(acquire(&owner, 0)).await.unwrap(),
            Attempt::Acquired
        );
    }
    assert!(
        holds(1).await,
        "one hold after a first acquisition sent twice"
    );
    // A reentry sent twice counts once.
    for _ in 0..2 {
        assert_eq!(
            backend.acquire(acquire(&owner, 1)).await.unwrap(),
            Attempt::Acquired
        );
    }
    assert!(holds(2).await, "two holds after a reentry sent twice");
    // Another owner is still shut out.
    assert!(matches!(
        backend.acquire(acquire(&other, 0)).await.unwrap(),
        Attempt::Busy(_)
    ));
    // A release sent twice decrements once and reports the same outcome while a hold
    // remains.
    for _ in 0..2 {
        assert_eq!(
            backend.release(release(&owner, 2)).await.unwrap().released,
            Released::StillHeld
        );
    }
    assert!(holds(1).await, "one hold after a release sent twice");
    assert_eq!(
        backend.release(release(&owner, 1)).await.unwrap().released,
        Released::Unlocked
    );
    // The last release sent again finds the lock gone: it changes nothing (another
    // owner's lock is never touched) and reports it not held.
    assert_eq!(
        backend.acquire(acquire(&other, 0)).await.unwrap(),
        Attempt::Acquired
    );
    assert_eq!(
        backend.release(release(&owner, 1)).await.unwrap().released,
        Released::NotHeld
    );
    assert!(
        ctx.manager.lock(&name).try_acquire().await.is_err(),
        "the other owner still holds it"
    );
    assert_eq!(
        backend.release(release(&other, 1)).await.unwrap().released,
        Released::Unlocked
    );
    // A reentry of a lock that is gone reports it lost instead of taking it afresh.
    assert_eq!(
        backend.acquire(acquire(&owner, 1)).await.unwrap(),
        Attempt::Lost
    );
    assert!(ctx.manager.lock(&name).try_acquire().await.is_ok());
}

/// A lease too long for the clock (`Duration::MAX`) is lowered to `MAX_LEASE`, explicit
/// or the manager's own: no panic, and the lock works as usual.
async fn huge_leases_are_capped(kind: Kind) {
    let ctx = Ctx::with(kind, |b| b.lease(Duration::MAX)).await;
    let name = support::unique("huge-lease");
    let renewed = ctx.manager.lock(&name).acquire().await.unwrap();
    assert_eq!(renewed.lease(), MAX_LEASE);
    assert!(renewed.is_renewed() && !renewed.is_lost());
    assert_eq!(renewed.release().await.unwrap(), Released::Unlocked);
    let explicit = ctx
        .manager
        .lock(&name)
        .fixed_lease(Duration::MAX)
        .acquire()
        .await
        .unwrap();
    assert_eq!(explicit.lease(), MAX_LEASE);
    assert!(!explicit.is_renewed() && !explicit.is_lost());
    assert!(ctx.manager.lock(&name).try_acquire().await.is_err());
    assert_eq!(explicit.release().await.unwrap(), Released::Unlocked);
}

macro_rules! behaviour_suite {
    ($($test:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Kind::Memory).await
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Kind::Redis).await
                }
            )*
        }
        mod cluster {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test(super::Kind::Cluster).await
                }
            )*
        }
    };
}

behaviour_suite!(
    mutual_exclusion,
    one_of_many_tries_wins,
    waiters_acquire_in_fifo_order,
    a_release_wakes_the_waiter_before_the_lease_ends,
    wait_times_out_with_a_typed_error,
    reentrant_holds_count,
    explicit_lease_expires,
    huge_leases_are_capped,
    watchdog_keeps_a_long_hold,
    loss_signal_fires_when_the_lock_disappears,
    a_release_that_finds_the_lock_gone_wakes_the_next_waiter,
    dropped_guard_frees_the_lock,
    dropped_waiter_leaves_the_queue,
    dropped_acquires_leave_nothing_held,
    names_are_validated_and_any_bytes_work,
    other_owners_cannot_release,
    resent_operations_take_effect_once,
    concurrent_names_stay_exclusive,
);
