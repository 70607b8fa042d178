//! Names on the server: short lowercase names are their own, any other is mapped as
//! DistributedLock's `MySqlDistributedLock` maps it (so .NET services take the same locks);
//! names too long for the server as they are work once mapped.

use sqlx::mysql::MySqlPool;
use tower_lock::backend::{mysql_lock_name, MySqlBackend};
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::{self, mariadb};

async fn holder_of(pool: &MySqlPool, server_name: &str) -> Option<u64> {
    sqlx::query_scalar::<_, Option<i64>>("SELECT IS_USED_LOCK(?)")
        .bind(server_name)
        .fetch_one(pool)
        .await
        .unwrap()
        .map(|id| id as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_the_servers_as_distributed_lock_maps_them() {
    let pool = MySqlPool::connect(&mariadb::shared_url()).await.unwrap();
    let locks = LockManager::builder().backend(MySqlBackend::new(&pool));
    let unique = support::unique("Name");
    let long = format!("{}{}", support::unique("long"), "x".repeat(300));
    for name in [unique.to_lowercase(), unique.clone(), long.clone()] {
        let guard = locks.lock(&name).acquire().await.unwrap();
        let server_name = mysql_lock_name(&name);
        assert!(server_name.encode_utf16().count() <= 64, "{server_name}");
        assert!(
            holder_of(&pool, &server_name).await.is_some(),
            "{name} is held on the server as {server_name}"
        );
        // Another session of the server (a .NET service's, say) finds it busy.
        let mut other = pool.acquire().await.unwrap();
        let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
            .bind(&server_name)
            .fetch_one(&mut *other)
            .await
            .unwrap();
        assert_eq!(got, Some(0), "{name}");
        assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
        assert!(holder_of(&pool, &server_name).await.is_none());
    }
    assert_eq!(
        mysql_lock_name(&unique.to_lowercase()),
        unique.to_lowercase()
    );
    assert_ne!(mysql_lock_name(&unique), unique, "uppercase is mapped");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kinds_named_locks_cannot_be_are_refused_saying_why() {
    let pool = MySqlPool::connect(&mariadb::shared_url()).await.unwrap();
    let locks = LockManager::builder().backend(MySqlBackend::new(&pool));
    for request in [
        locks.read_lock("r"),
        locks.write_lock("w"),
        locks.fair_lock("f"),
    ] {
        match request.try_acquire().await {
            Err(LockError::Unsupported { .. }) => {}
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
}
