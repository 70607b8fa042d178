//! The context of a behaviour test: a manager on the backend under test, and a way to
//! reach that backend behind the manager's back.

use std::time::Duration;

use fred::prelude::KeysInterface;
use tower_lock::backend::{Backend, MemoryBackend, RedisBackend};
use tower_lock::manager::LockManagerBuilder;
use tower_lock::{LockError, LockManager};

use crate::support;
use crate::support::suite::BackendUnderTest;

/// A manager on the backend under test, plus a way to reach the backend behind its back.
pub struct Ctx {
    pub manager: LockManager,
    pub memory: Option<MemoryBackend>,
    pub redis: Option<fred::prelude::Client>,
    pub url: Option<String>,
    backend_under_test: BackendUnderTest,
}

impl Ctx {
    pub async fn new(backend: BackendUnderTest) -> Ctx {
        Self::with(backend, |b| b).await
    }

    pub async fn with(
        backend: BackendUnderTest,
        configure: impl FnOnce(LockManagerBuilder) -> LockManagerBuilder,
    ) -> Ctx {
        let builder = configure(LockManager::builder());
        match backend.url() {
            None => {
                let memory = MemoryBackend::new();
                Ctx {
                    manager: builder.backend(memory.clone()),
                    memory: Some(memory),
                    redis: None,
                    url: None,
                    backend_under_test: backend,
                }
            }
            Some(url) => Ctx {
                manager: backend.manager(builder).await,
                memory: None,
                redis: Some(support::client(&url).await),
                url: Some(url),
                backend_under_test: backend,
            },
        }
    }

    /// A second handle on the manager's store, to send backend operations directly.
    pub async fn backend(&self) -> Box<dyn Backend> {
        match (&self.memory, &self.url) {
            (Some(memory), _) => Box::new(memory.clone()),
            (None, Some(url)) => Box::new(RedisBackend::connect(url).await.unwrap()),
            (None, None) => unreachable!("a context has a memory backend or a Redis URL"),
        }
    }

    /// Another manager on the same backend (another process, for Redis).
    pub async fn manager_sharing_the_backend(&self) -> LockManager {
        match (&self.memory, &self.url) {
            (Some(memory), _) => LockManager::builder().backend(memory.clone()),
            (None, Some(_)) => {
                self.backend_under_test
                    .manager(LockManager::builder())
                    .await
            }
            (None, None) => unreachable!("a context has a memory backend or a Redis URL"),
        }
    }

    /// Deletes the lock behind its holder's back.
    pub async fn delete(&self, name: &str) {
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

/// A task acquiring `name` with `wait`, returned once it is queued behind the holder.
pub async fn queued_waiter(
    manager: &LockManager,
    name: &str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<tower_lock::lock::LockGuard, LockError>> {
    queued_for(manager, name, wait, |locks, name| locks.lock(name)).await
}

/// A task waiting up to `wait` for one permit of `manager`'s semaphore `name` (limit 1),
/// returned once it is queued.
pub async fn queued_permit_waiter(
    manager: &LockManager,
    name: &str,
    wait: Duration,
) -> tokio::task::JoinHandle<Result<tower_lock::lock::LockGuard, LockError>> {
    queued_for(manager, name, wait, |locks, name| locks.semaphore(name, 1)).await
}

/// A task acquiring what `request` asks of `manager` for `name` (a lock of any kind, a
/// semaphore's permits) with `wait`, returned once it is queued in `manager`.
pub async fn queued_for(
    manager: &LockManager,
    name: &str,
    wait: Duration,
    request: fn(&LockManager, &str) -> tower_lock::lock::LockRequest,
) -> tokio::task::JoinHandle<Result<tower_lock::lock::LockGuard, LockError>> {
    let waiter = {
        let (manager, name) = (manager.clone(), name.to_owned());
        tokio::spawn(async move { request(&manager, &name).wait(wait).acquire().await })
    };
    while manager.waiting(name) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    waiter
}
