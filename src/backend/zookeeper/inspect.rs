//! What operators ask: a name's holders and waiters (this process's by their owner ids,
//! others' by their node's data — Curator writes the client's address there — and name),
//! the names under the root, and force-unlocking (deleting the holders' nodes: the next
//! waiters' watches fire; a holder of this process learns it at its next renewal).

use std::sync::Arc;

use tokio::time::Instant;

use super::connection::failed;
use super::nodes::{holders, queue, Node, Side};
use super::Inner;
use crate::backend::glob::glob;
use crate::backend::{
    ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, QueuedWaiter, LISTED_MAX,
};
use crate::error::BackendError;
use crate::key::LockKey;

/// The lock nodes of `key`'s directory, in sequence order (an empty list when it has none).
async fn nodes_of(inner: &Inner, key: &LockKey) -> Result<(String, Vec<Node>), BackendError> {
    let dir = inner.dir(key);
    let (client, _) = inner.connection.client();
    let children = match client.list_children(&dir).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(error) => return Err(failed("list a lock's nodes", error)),
    };
    Ok((dir, queue(&children)))
}

pub(super) async fn inspect(inner: Arc<Inner>, key: LockKey) -> Result<LockInfo, BackendError> {
    let (dir, nodes) = nodes_of(&inner, &key).await?;
    let mut info = LockInfo::free(key);
    let ours = inner.holds.in_dir(&dir);
    let (client, _) = inner.connection.client();
    let now = Instant::now();
    let held: Vec<String> = holders(&nodes).map(|node| node.name.clone()).collect();
    for node in &nodes {
        let mine = ours.iter().find(|(name, ..)| *name == node.name);
        let owner = match mine {
            Some((_, owner, ..)) => owner.to_string(),
            None => {
                let data = match client.get_data(&format!("{dir}/{}", node.name)).await {
                    Ok((data, _)) => String::from_utf8_lossy(&data).into_owned(),
                    // Deleted since it was listed.
                    Err(zookeeper_client::Error::NoNode) => continue,
                    Err(error) => return Err(failed("read a lock node", error)),
                };
                format!("{data}:{}", node.name)
            }
        };
        if !held.contains(&node.name) {
            info.queued += 1;
            if info.queue.len() < LISTED_MAX {
                info.queue.push(QueuedWaiter {
                    owner,
                    place_lasts: None,
                });
            }
            continue;
        }
        let side = match node.side {
            Side::Mutex => HolderSide::Exclusive,
            Side::Read => HolderSide::Read,
            Side::Write => HolderSide::Write,
        };
        info.kind = Some(if node.side.read_write() {
            InspectedKind::ReadWrite
        } else {
            InspectedKind::Lock
        });
        if node.side == Side::Mutex {
            if let Ok(Some(stat)) = client.check_stat(&format!("{dir}/{}", node.name)).await {
                info.fencing_token = Some(super::create::zxid_token(stat.czxid));
            }
        }
        info.holders.push(HolderInfo {
            owner,
            side,
            holds: mine.map_or(1, |(_, _, count, _)| (*count).max(1)),
            lease: mine.map(|(.., until)| until.saturating_duration_since(now)),
        });
    }
    if info.fencing_token.is_none() {
        // Free: the last token a fenced release left on the directory.
        if let Ok((data, _)) = client.get_data(&dir).await {
            info.fencing_token = std::str::from_utf8(&data).ok().and_then(|t| t.parse().ok());
        }
    }
    Ok(info)
}

pub(super) async fn force_unlock(
    inner: Arc<Inner>,
    key: LockKey,
) -> Result<ForceUnlocked, BackendError> {
    let (dir, nodes) = nodes_of(&inner, &key).await?;
    let (client, _) = inner.connection.client();
    let mut freed = 0;
    let mut kind = None;
    for node in holders(&nodes) {
        match client.delete(&format!("{dir}/{}", node.name), None).await {
            Ok(()) => freed += 1,
            Err(zookeeper_client::Error::NoNode) => {}
            Err(error) => return Err(failed("delete a lock node", error)),
        }
        kind = Some(if node.side.read_write() {
            InspectedKind::ReadWrite
        } else {
            InspectedKind::Lock
        });
    }
    Ok(ForceUnlocked {
        kind,
        freed,
        left_alone: None,
    })
}

pub(super) async fn list_names(
    inner: Arc<Inner>,
    pattern: String,
    limit: usize,
) -> Result<Vec<LockKey>, BackendError> {
    let (client, _) = inner.connection.client();
    let children = match client.list_children(&inner.root).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(error) => return Err(failed("list the lock names", error)),
    };
    let names = children
        .into_iter()
        .filter(|name| glob(pattern.as_bytes(), name.as_bytes()))
        .filter_map(|name| LockKey::joined("", &[&name], usize::MAX).ok())
        .take(limit + 1)
        .collect();
    Ok(names)
}
