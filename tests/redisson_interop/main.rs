//! The interop suite: tower-lock against the real Redisson (Java) on the same names, on one
//! server, a local Redis 7 cluster (where Redisson uses sharded pub/sub) and Sentinel.
//!
//! Each test starts its own Redisson client (`interop/redisson/`, a runnable jar driven over
//! stdin/stdout; see `support::redisson_java`). Latencies are printed: run with
//! `cargo test --test redisson_interop -- --nocapture` to see them.

#[path = "../support/mod.rs"]
mod support;

mod exclusion;
mod fair;
mod fenced;
mod holds;
mod names;
mod operator;
mod read_write;
mod semaphore;
mod sentinel;
mod shares;
mod wake_ups;
mod watchdogs;

use std::sync::Arc;
use std::time::Duration;

use fred::prelude::*;
use support::redisson_java::{Deployment, JavaRedisson};
use tower_lock::LockManager;

/// Both sides on one deployment, and a plain client to look at Redis.
pub struct Sides {
    pub java: Arc<JavaRedisson>,
    pub locks: LockManager,
    pub admin: Client,
}

impl Sides {
    /// tower-lock (built by `builder`) on `url`, and Redisson (with `watchdog` as its
    /// `lockWatchdogTimeout`, default 30 s) on `deployment`, the same Redis.
    pub async fn connect(
        url: &str,
        deployment: Deployment,
        watchdog: Option<Duration>,
        builder: tower_lock::manager::LockManagerBuilder,
    ) -> Sides {
        let (java, locks) = tokio::join!(JavaRedisson::start_with(deployment, watchdog), async {
            builder.redis(url).await.expect("tower-lock connects")
        });
        Sides {
            java: Arc::new(java),
            locks,
            admin: support::client(url).await,
        }
    }
}

impl Sides {
    /// Whether Redisson's `holder` gets lock `kind` of `key` at once (an attempt without
    /// waiting).
    pub async fn java_gets(&self, holder: &str, kind: &str, key: &str) -> bool {
        self.java
            .lock(holder, kind, key, Some(Duration::ZERO), Some(LONG_LEASE))
            .await
            .acquired
    }

    /// [`java_gets`](Self::java_gets) for the plain lock.
    pub async fn java_gets_now(&self, holder: &str, key: &str) -> bool {
        self.java_gets(holder, "lock", key).await
    }

    /// Exclusion both ways on `name`: Redisson cannot take tower-lock's hold, nor tower-lock
    /// Redisson's. Leaves the lock free.
    pub async fn exclude_each_other(&self, name: &str) {
        let key = self.locks.key(name).unwrap().as_str().to_owned();
        let guard = self
            .locks
            .lock(name)
            .fixed_lease(LONG_LEASE)
            .acquire()
            .await
            .unwrap();
        assert!(
            !self.java_gets_now("j", &key).await,
            "{key}: Redisson took tower-lock's lock"
        );
        assert_ne!(
            guard.release().await.unwrap(),
            tower_lock::lock::Released::NotHeld
        );
        assert!(self.java_gets_now("j", &key).await, "{key}");
        assert!(
            matches!(
                self.locks.lock(name).try_acquire().await,
                Err(tower_lock::LockError::TimedOut { .. })
            ),
            "{key}: tower-lock took Redisson's lock"
        );
        self.java.unlock("j", "lock", &key).await.unwrap();
    }
}

/// Where a test runs.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    Single,
    Cluster,
}

impl Target {
    pub fn url(self) -> String {
        match self {
            Target::Single => support::shared_redis_url(),
            Target::Cluster => support::cluster::shared_cluster_url(),
        }
    }

    pub fn deployment(self) -> Deployment {
        match self {
            Target::Single => Deployment::Single(self.url()),
            Target::Cluster => Deployment::Cluster(self.url()),
        }
    }

    /// Both sides, tower-lock's built by `builder`.
    pub async fn sides_with(self, builder: tower_lock::manager::LockManagerBuilder) -> Sides {
        Sides::connect(&self.url(), self.deployment(), None, builder).await
    }

    pub async fn sides(self) -> Sides {
        self.sides_with(LockManager::builder()).await
    }
}

/// Redisson's unlock channel of the plain lock `key` (`RedissonObject.prefixName`): the name
/// in braces unless it contains `{`.
pub fn unlock_channel(key: &str) -> String {
    if key.contains('{') {
        format!("redisson_lock__channel:{key}")
    } else {
        format!("redisson_lock__channel:{{{key}}}")
    }
}

/// Waits until nobody subscribes to `channel` (a waiter of an earlier step, of either side,
/// is unsubscribed by its client in its own time) and returns that count, 0: the count from
/// which [`subscribed`] sees a new waiter, which a subscription dropped meanwhile could
/// otherwise hide.
pub async fn no_subscriber(admin: &Client, channel: &str) -> i64 {
    support::eventually(&format!("nobody left on {channel}"), || async {
        (support::numsub(admin, channel).await == 0).then_some(0)
    })
    .await
}

/// Waits until one more connection than `before` subscribes to `channel`: a waiter of either
/// side is then listening (the signal, instead of a sleep, that it waits by pub/sub).
pub async fn subscribed(admin: &Client, channel: &str, before: i64) {
    support::eventually(&format!("a new subscriber on {channel}"), || async {
        (support::numsub(admin, channel).await > before).then_some(())
    })
    .await;
}

/// The lease of holds whose waiters must be woken by a release: longer than any wait, so a
/// waiter that gets the lock within its wait was woken by the release's message, never by
/// the lease running out.
pub const LONG_LEASE: Duration = Duration::from_secs(120);
/// How long a woken waiter may wait (well below [`LONG_LEASE`]).
pub const WAKE_WAIT: Duration = Duration::from_secs(30);

/// `p50 / p90 / max` of latencies in microseconds, for the printed report.
pub fn summary(latencies: &mut [i64]) -> String {
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {} µs, p90 {} µs, max {} µs (n = {})",
        at(0.5),
        at(0.9),
        latencies[latencies.len() - 1],
        latencies.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pinned_redisson_is_the_documented_one() {
    let sides = Target::Single.sides().await;
    let pom = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/interop/redisson/pom.xml"
    ))
    .unwrap();
    let pinned = format!(
        "<redisson.version>{}</redisson.version>",
        sides.java.version
    );
    assert!(
        pom.contains(&pinned),
        "the jar runs Redisson {}",
        sides.java.version
    );
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/redisson.md")).unwrap();
    assert!(
        docs.contains(&format!("Redisson {}", sides.java.version)),
        "docs/redisson.md's compatibility table names the tested version {}",
        sides.java.version
    );
}
