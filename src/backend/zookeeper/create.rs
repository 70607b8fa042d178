//! Making and deleting one lock node: the directory made as a container when missing (the
//! server removes empty containers, as Curator's), a create whose reply was lost found
//! again by its protected prefix, a delete that fails kept for when the session is back.

use zookeeper_client as zk;

use super::connection::failed;
use super::nodes::{new_prefix, Node, Side};
use super::Inner;
use crate::error::BackendError;

/// A node made for an owner.
pub(super) struct Made {
    pub(super) path: String,
    pub(super) name: String,
    /// Its fencing token: the zxid of its create × 65,536 (the low 16 bits count a fenced
    /// holder's reentries). zxids grow with every change the ensemble makes, so a later
    /// holder's token is greater than every token before it.
    pub(super) token: u64,
    pub(super) generation: u64,
}

/// The bits of a fencing token that count reentries.
pub(super) const REENTRIES_MASK: u64 = 0xFFFF;

/// The fencing token of a node created (or written) by the change `zxid`.
pub(super) fn zxid_token(zxid: i64) -> u64 {
    (zxid.max(0) as u64) << 16
}

/// How many times a create is tried when its directory vanished or its reply was lost.
const CREATE_TRIES: usize = 4;

/// Creates an ephemeral sequential node on `side` of the lock in `dir`, whose data is
/// `data` (the owner id, for inspection).
pub(super) async fn create_node(
    inner: &Inner,
    dir: &str,
    side: Side,
    data: &[u8],
) -> Result<Made, BackendError> {
    let attempt = uuid::Uuid::new_v4();
    let prefix = new_prefix(dir, side, &attempt);
    let node_options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
    let dir_options = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    let mut last = None;
    for _ in 0..CREATE_TRIES {
        let (client, generation) = inner.connection.client();
        match client.create(&prefix, data, &node_options).await {
            Ok((stat, sequence)) => {
                let name = format!("{}{sequence}", &prefix[dir.len() + 1..]);
                return Ok(Made {
                    path: format!("{dir}/{name}"),
                    name,
                    token: zxid_token(stat.czxid),
                    generation,
                });
            }
            // The directory is missing (first use, or its container was removed).
            Err(zk::Error::NoNode) => {
                if let Err(error) = client.mkdir(dir, &dir_options).await {
                    last = Some(failed("make a lock's directory", error));
                }
            }
            // The reply was lost: the node may exist; its protected prefix finds it.
            Err(error @ (zk::Error::ConnectionLoss | zk::Error::Timeout)) => {
                last = Some(failed("create a lock node", error));
                let (client, generation) = inner.connection.client();
                if let Ok((children, _)) = client.get_children(dir).await {
                    let protected = &prefix[dir.len() + 1..];
                    if let Some(name) = children.into_iter().find(|c| c.starts_with(protected)) {
                        let path = format!("{dir}/{name}");
                        let token = match client.check_stat(&path).await {
                            Ok(Some(stat)) => zxid_token(stat.czxid),
                            _ => 0,
                        };
                        if Node::parse(&name).is_some() {
                            return Ok(Made {
                                path,
                                name,
                                token,
                                generation,
                            });
                        }
                    }
                }
            }
            Err(error) => return Err(failed("create a lock node", error)),
        }
    }
    Err(last.unwrap_or_else(|| BackendError::new("ZooKeeper: could not create a lock node")))
}

/// Deletes the node at `path` made in session `generation`. `Ok(true)`: deleted;
/// `Ok(false)`: it was gone. A delete that fails for the connection is done again once the
/// session is back (if it survives: otherwise the node went with it).
pub(super) async fn delete_node(
    inner: &Inner,
    path: &str,
    generation: u64,
) -> Result<bool, BackendError> {
    let (client, now) = inner.connection.client();
    if now != generation {
        return Ok(false);
    }
    match client.delete(path, None).await {
        Ok(()) => Ok(true),
        Err(zk::Error::NoNode) => Ok(false),
        Err(error) => {
            inner.holds.orphan(path.to_owned(), generation);
            Err(failed("delete a lock node", error))
        }
    }
}

/// Deletes the nodes whose delete failed, now that the session is back.
pub(super) async fn delete_orphans(inner: &Inner) {
    for (path, generation) in inner.holds.take_orphans() {
        // Failing again, it is kept again.
        let _ = delete_node(inner, &path, generation).await;
    }
}
