//! Names that cannot be one node name under the root are refused before anything reaches
//! the server, saying which rule they break; a root that is not an absolute path too.

use tower_lock::backend::{ZooKeeperBackend, ZOOKEEPER_MAX_NAME_LEN};
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

use crate::support::zookeeper;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_are_refused_with_the_rule_they_break() {
    let backend = ZooKeeperBackend::connect(&zookeeper::shared_hosts())
        .await
        .unwrap();
    let locks = LockManager::builder().backend(backend);
    let long = "x".repeat(ZOOKEEPER_MAX_NAME_LEN + 1);
    for (name, says) in [
        ("orders/42", "slash"),
        ("..", "cannot be a ZooKeeper node name"),
        ("bell\u{7}", "cannot have"),
        (long.as_str(), "at most"),
    ] {
        match locks.lock(name).try_acquire().await {
            Err(LockError::InvalidName { reason }) => {
                assert!(reason.contains(says), "{name:?}: {reason}")
            }
            other => panic!("{name:?}: expected InvalidName, got {other:?}"),
        }
    }
    // Anything else a node name may hold is a name: spaces, colons, Unicode.
    let guard = locks.lock("order: 42 ünïcode ✓").acquire().await.unwrap();
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_root_that_is_not_an_absolute_path_is_refused() {
    for root in ["locks", "/locks/", "/", "/a//b"] {
        let error = ZooKeeperBackend::builder(zookeeper::shared_hosts())
            .root(root)
            .connect()
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("absolute path"),
            "{root}: {error}"
        );
    }
}
