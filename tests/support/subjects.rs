//! The backends of this crate as subjects of the conformance suite
//! (`tower_lock::conformance`): one Redis, the local Cluster, a Sentinel's master, RedLock
//! over three servers, one PostgreSQL, one ZooKeeper and one MariaDB, each shared by the tests of a binary.

use std::sync::{Arc, OnceLock};

use tower_lock::backend::{
    Backend, BoxFuture, MySqlBackend, PostgresBackend, RedLockBackend, RedisBackend,
    ZooKeeperBackend,
};
use tower_lock::conformance::Subject;
use tower_lock::manager::LockManagerBuilder;
use tower_lock::LockManager;

use super::RedisServer;

/// A Redis deployment reached by URL: each manager and backend on connections of its own.
pub struct RedisAt(pub String);

impl Subject for RedisAt {
    fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager> {
        let url = self.0.clone();
        Box::pin(async move {
            builder
                .redis(&url)
                .await
                .unwrap_or_else(|e| panic!("connect to the test Redis at {url}: {e}"))
        })
    }

    fn backend(&self) -> BoxFuture<Arc<dyn Backend>> {
        let url = self.0.clone();
        Box::pin(async move {
            let backend = RedisBackend::connect(&url)
                .await
                .unwrap_or_else(|e| panic!("connect to the test Redis at {url}: {e}"));
            Arc::new(backend) as Arc<dyn Backend>
        })
    }
}

/// The shared redis-server (or `REDIS_URL`).
pub fn redis() -> RedisAt {
    RedisAt(super::shared_redis_url())
}

/// The shared local 3-master Redis Cluster.
pub fn cluster() -> RedisAt {
    RedisAt(super::cluster::shared_cluster_url())
}

/// A master of its own found through a Sentinel of its own (`redis-sentinel://`).
pub fn sentinel() -> RedisAt {
    static SENTINEL: OnceLock<(String, RedisServer, RedisServer)> = OnceLock::new();
    let (url, _, _) = SENTINEL.get_or_init(|| {
        let master = RedisServer::start();
        let sentinel = RedisServer::start_sentinel(master.port());
        let url = format!(
            "redis-sentinel://127.0.0.1:{}?sentinelServiceName=mymaster",
            sentinel.port()
        );
        (url, master, sentinel)
    });
    RedisAt(url.clone())
}

/// RedLock over three servers of its own.
pub struct RedLockOn(Vec<String>);

impl Subject for RedLockOn {
    fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager> {
        let nodes = self.0.clone();
        Box::pin(async move { builder.backend(connect_redlock(&nodes).await) })
    }

    fn backend(&self) -> BoxFuture<Arc<dyn Backend>> {
        let nodes = self.0.clone();
        Box::pin(async move { Arc::new(connect_redlock(&nodes).await) as Arc<dyn Backend> })
    }
}

/// A RedLock backend once every node is connected (they connect in the background).
async fn connect_redlock(nodes: &[String]) -> RedLockBackend {
    let urls: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let backend = RedLockBackend::connect(&urls)
        .await
        .unwrap_or_else(|e| panic!("connect to the RedLock nodes {nodes:?}: {e}"));
    super::eventually("every RedLock node connected", || async {
        backend
            .nodes()
            .iter()
            .all(Backend::is_available)
            .then_some(())
    })
    .await;
    backend
}

/// The shared three RedLock nodes.
pub fn redlock() -> RedLockOn {
    static NODES: OnceLock<(Vec<String>, Vec<RedisServer>)> = OnceLock::new();
    let (urls, _) = NODES.get_or_init(|| {
        let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
        (servers.iter().map(RedisServer::url).collect(), servers)
    });
    RedLockOn(urls.clone())
}

/// A PostgreSQL reached by URL: each manager and backend with sessions of its own (a pool
/// that opens nothing until asked, as a process's would be).
pub struct PostgresAt(pub String);

impl PostgresAt {
    fn backend_now(&self) -> PostgresBackend {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(4)
            .connect_lazy(&self.0)
            .unwrap_or_else(|e| panic!("a pool for the test PostgreSQL at {}: {e}", self.0));
        PostgresBackend::new(&pool)
    }
}

impl Subject for PostgresAt {
    fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager> {
        let backend = self.backend_now();
        Box::pin(async move { builder.backend(backend) })
    }

    fn backend(&self) -> BoxFuture<Arc<dyn Backend>> {
        let backend = self.backend_now();
        Box::pin(async move { Arc::new(backend) as Arc<dyn Backend> })
    }
}

/// The shared PostgreSQL (or `DATABASE_URL`).
pub fn postgres() -> PostgresAt {
    PostgresAt(super::postgres::shared_url())
}

/// A ZooKeeper reached by its hosts: each manager and backend with a session of its own.
pub struct ZooKeeperAt(pub String);

impl ZooKeeperAt {
    async fn backend_now(hosts: String) -> ZooKeeperBackend {
        ZooKeeperBackend::connect(&hosts)
            .await
            .unwrap_or_else(|e| panic!("connect to the test ZooKeeper at {hosts}: {e}"))
    }
}

impl Subject for ZooKeeperAt {
    fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager> {
        let hosts = self.0.clone();
        Box::pin(async move { builder.backend(Self::backend_now(hosts).await) })
    }

    fn backend(&self) -> BoxFuture<Arc<dyn Backend>> {
        let hosts = self.0.clone();
        Box::pin(async move { Arc::new(Self::backend_now(hosts).await) as Arc<dyn Backend> })
    }
}

/// The shared ZooKeeper (or `ZOOKEEPER_HOSTS`).
pub fn zookeeper() -> ZooKeeperAt {
    ZooKeeperAt(super::zookeeper::shared_hosts())
}

/// A MySQL or MariaDB reached by URL: each manager and backend with sessions of its own.
pub struct MySqlAt(pub String);

impl MySqlAt {
    fn backend_now(&self) -> MySqlBackend {
        let pool = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(4)
            .connect_lazy(&self.0)
            .unwrap_or_else(|e| panic!("a pool for the test MariaDB at {}: {e}", self.0));
        MySqlBackend::new(&pool)
    }
}

impl Subject for MySqlAt {
    fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager> {
        let backend = self.backend_now();
        Box::pin(async move { builder.backend(backend) })
    }

    fn backend(&self) -> BoxFuture<Arc<dyn Backend>> {
        let backend = self.backend_now();
        Box::pin(async move { Arc::new(backend) as Arc<dyn Backend> })
    }
}

/// The shared MariaDB (or `MYSQL_URL`).
pub fn mysql() -> MySqlAt {
    MySqlAt(super::mariadb::shared_url())
}
