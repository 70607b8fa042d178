//! One backend suite for every behaviour: a test is an `async fn(BackendUnderTest)`, and
//! [`backend_suite!`] runs it once per backend, in a module named after the backend
//! (`memory::mutual_exclusion`, `redis::mutual_exclusion`, …), so that one backend's
//! failures are filtered and read apart from another's.

use tower_lock::manager::LockManagerBuilder;
use tower_lock::LockManager;

/// The backend a suite test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendUnderTest {
    /// The in-memory backend.
    Memory,
    /// The shared redis-server (or `REDIS_URL`).
    Redis,
    /// The shared local 3-master Redis Cluster.
    Cluster,
    /// The shared PostgreSQL (or `DATABASE_URL`).
    Postgres,
    /// The shared MariaDB (or `MYSQL_URL`).
    MySql,
}

impl BackendUnderTest {
    /// The Redis URL of this backend; `None` for memory, PostgreSQL and MySQL.
    pub fn url(self) -> Option<String> {
        match self {
            BackendUnderTest::Memory | BackendUnderTest::Postgres | BackendUnderTest::MySql => None,
            BackendUnderTest::Redis => Some(super::shared_redis_url()),
            BackendUnderTest::Cluster => Some(super::cluster::shared_cluster_url()),
        }
    }

    /// This backend on its own (to drive `Backend` operations directly).
    pub async fn backend(self) -> std::sync::Arc<dyn tower_lock::backend::Backend> {
        use tower_lock::conformance::Subject;
        match self {
            BackendUnderTest::Postgres => return super::subjects::postgres().backend().await,
            BackendUnderTest::MySql => return super::subjects::mysql().backend().await,
            _ => {}
        }
        match self.url() {
            None => std::sync::Arc::new(tower_lock::backend::MemoryBackend::new()),
            Some(url) => std::sync::Arc::new(
                tower_lock::backend::RedisBackend::connect(&url)
                    .await
                    .unwrap_or_else(|e| panic!("connect to the test Redis at {url}: {e}")),
            ),
        }
    }

    /// A manager built by `builder` on this backend: the one way the tests make a manager
    /// on a backend under test.
    pub async fn manager(self, builder: LockManagerBuilder) -> LockManager {
        use tower_lock::conformance::Subject;
        match self {
            BackendUnderTest::Postgres => {
                return super::subjects::postgres().manager(builder).await
            }
            BackendUnderTest::MySql => return super::subjects::mysql().manager(builder).await,
            _ => {}
        }
        match self.url() {
            None => builder.memory(),
            Some(url) => builder
                .redis(&url)
                .await
                .unwrap_or_else(|e| panic!("connect to the test Redis at {url}: {e}")),
        }
    }

    /// A default manager on this backend whose names start with a prefix of its own
    /// (`<label>-<unique>:`), so that tests sharing a Redis server never meet.
    pub async fn prefixed_manager(self, label: &str) -> LockManager {
        let prefix = super::unique(label) + ":";
        self.manager(LockManager::builder().key_prefix(prefix))
            .await
    }
}

/// `backend_suite!([Memory, Redis, Cluster] test_a, test_b)` makes, for each backend listed,
/// a module (`memory`, `redis`, `cluster`) with one `#[tokio::test]` per test function,
/// calling `super::test_a(BackendUnderTest::Memory)` and so on.
#[allow(unused_macros)] // test binaries that have no backend suite
macro_rules! backend_suite {
    ([$first:ident $(, $rest:ident)*] $($test:ident),+ $(,)?) => {
        $crate::support::suite::backend_suite!(@module $first $($test),+);
        $crate::support::suite::backend_suite!([$($rest),*] $($test),+);
    };
    ([] $($test:ident),+ $(,)?) => {};
    (@module Memory $($test:ident),+) => {
        $crate::support::suite::backend_suite!(@tests memory Memory $($test),+);
    };
    (@module Redis $($test:ident),+) => {
        $crate::support::suite::backend_suite!(@tests redis Redis $($test),+);
    };
    (@module Cluster $($test:ident),+) => {
        $crate::support::suite::backend_suite!(@tests cluster Cluster $($test),+);
    };
    (@module Postgres $($test:ident),+) => {
        $crate::support::suite::backend_suite!(@tests postgres Postgres $($test),+);
    };
    (@module MySql $($test:ident),+) => {
        $crate::support::suite::backend_suite!(@tests mysql MySql $($test),+);
    };
    (@tests $module:ident $backend:ident $($test:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$test($crate::support::suite::BackendUnderTest::$backend).await
                }
            )+
        }
    };
}
#[allow(unused_imports)]
pub(crate) use backend_suite;
