//! What happens when the session changes state. A session is the lease of every node this
//! process holds. Disconnected (`SUSPENDED`, in Curator's words), the client cannot know
//! whether its session will outlive the outage: the holds are told at once, as Curator
//! advises. Connected again, nodes whose delete failed meanwhile are deleted and waiters
//! look again. Expired, the server has deleted the session's nodes: the holds are gone, and
//! a new session is made for what comes next.

use std::sync::{Arc, Weak};

use zookeeper_client as zk;

use super::create::delete_orphans;
use super::Inner;
use crate::telemetry::TARGET;

/// Watches the session's state for as long as the backend lives.
pub(super) fn watch(inner: &Arc<Inner>, closed: Arc<tokio::sync::Notify>) {
    let weak = Arc::downgrade(inner);
    tokio::spawn(async move {
        tokio::select! {
            _ = closed.notified() => {}
            _ = follow(weak) => {}
        }
    });
}

async fn follow(weak: Weak<Inner>) {
    {
        loop {
            let Some(mut states) =
                upgrade(&weak).map(|inner| inner.connection.client().0.state_watcher())
            else {
                return;
            };
            loop {
                let state = states.changed().await;
                let Some(inner) = upgrade(&weak) else {
                    return;
                };
                match state {
                    zk::SessionState::Disconnected => {
                        inner.connection.set_connected(false);
                        tracing::warn!(target: TARGET, "tower-lock: ZooKeeper connection lost; holders are told (their session may expire)");
                        lose_all(&inner);
                        if let Some(notices) = inner.connection.notices.get() {
                            notices.connection_lost();
                        }
                    }
                    zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                        inner.connection.set_connected(true);
                        delete_orphans(&inner).await;
                        if let Some(notices) = inner.connection.notices.get() {
                            notices.resync();
                        }
                    }
                    zk::SessionState::Expired | zk::SessionState::AuthFailed => break,
                    zk::SessionState::Closed => return,
                }
            }
            let Some(inner) = upgrade(&weak) else {
                return;
            };
            inner.connection.set_connected(false);
            tracing::warn!(target: TARGET, "tower-lock: ZooKeeper session expired; its locks are gone, making a new session");
            lose_all(&inner);
            inner.holds.clear();
            inner.connection.reconnect().await;
        }
    }
}

fn upgrade(weak: &Weak<Inner>) -> Option<Arc<Inner>> {
    weak.upgrade()
}

/// Tells every hold of this process that it may be lost.
fn lose_all(inner: &Inner) {
    if let Some(notices) = inner.connection.notices.get() {
        for (key, owner) in inner.holds.held() {
            notices.lost(&key, &owner);
        }
    }
}
