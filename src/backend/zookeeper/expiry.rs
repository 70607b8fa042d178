//! Leases and places that run out. The session keeps a dead process's nodes from lasting
//! (they go with it), but a live process's hold still ends with its lease when its owner
//! stops renewing it (a fixed lease, a stuck task), and a fair waiter's place when it stops
//! asking: its node is deleted then, and a hold is told it is lost.

use std::sync::Arc;

use tokio::time::Instant;

use super::create::delete_node;
use super::nodes::Side;
use super::Inner;
use crate::abort::AbortOnDrop;
use crate::key::{LockKey, OwnerId};

/// Deletes the node at `path` of `owner`'s entry once the entry's end has passed (each
/// renewal or attempt moves the end on; the entry gone or on another node, nothing is
/// done). The timer belongs to the entry: it stops when the entry goes (a release).
pub(super) fn expire_later(
    inner: &Arc<Inner>,
    key: &LockKey,
    owner: &OwnerId,
    side: Side,
    path: &str,
) {
    let weak = Arc::downgrade(inner);
    let slot = (key.clone(), owner.clone(), path.to_owned());
    let (key, owner, path) = slot.clone();
    let task = tokio::spawn(async move {
        loop {
            let ends = {
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                match inner.holds.get(&key, &owner, side) {
                    Some(entry) if entry.path == path => entry.ends,
                    _ => return,
                }
            };
            if ends > Instant::now() {
                tokio::time::sleep_until(ends).await;
                continue;
            }
            let Some(inner) = weak.upgrade() else {
                return;
            };
            let Some(entry) = inner.holds.take_if(&key, &owner, side, |entry| {
                entry.path == path && entry.ends <= Instant::now()
            }) else {
                continue;
            };
            let _ = delete_node(&inner, &entry.path, entry.generation).await;
            if entry.count > 0 {
                if let Some(notices) = inner.connection.notices.get() {
                    notices.lost(&key, &owner);
                }
            }
            return;
        }
    });
    inner
        .holds
        .attach_expiry((&slot.0, &slot.1, side), &slot.2, AbortOnDrop::new(task));
}
