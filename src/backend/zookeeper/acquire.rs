//! Acquisitions. A try makes the owner's node and looks where it stands: first (by the
//! recipe's rules) it holds; otherwise the node is deleted again. A waiting acquisition
//! keeps its node and watches the one before it — the server tells it when that one goes,
//! no polling — until it holds, its wait is over, or its acquirer leaves. A fair waiter's
//! node is its place: kept between attempts, and its watch tells it its turn.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use zookeeper_client as zk;

use super::connection::failed;
use super::create::{create_node, delete_node, zxid_token, Made, REENTRIES_MASK};
use super::expiry::expire_later;
use super::holds::{Entry, EntryTasks};
use super::nodes::{queue, standing, Side, Standing};
use super::Inner;
use crate::backend::{AcquireArgs, Attempt};
use crate::error::BackendError;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// How long a fair waiter is told to wait before it looks again unless its turn comes
/// (its watch tells it; the manager looks at least every third of its queue timeout).
const FAIR_RETRY: Duration = Duration::from_secs(3600);

pub(super) async fn acquire(inner: Arc<Inner>, args: AcquireArgs) -> Result<Attempt, BackendError> {
    let side = Side::of(args.kind).ok_or_else(|| super::missing(args.kind))?;
    let generation = inner.connection.generation();
    if let Some(entry) = inner.holds.get(&args.key, &args.owner, side) {
        if entry.generation != generation {
            inner.holds.take(&args.key, &args.owner, side);
        } else if entry.count == args.expected + 1 && entry.count > 0 {
            // Re-sent after it took effect.
            return Ok(granted(&args, entry.token));
        } else if entry.count == args.expected && entry.count > 0 {
            return reenter(&inner, &args, side, entry).await;
        }
    }
    if args.expected > 0 {
        return Ok(Attempt::Lost);
    }
    let dir = inner.dir(&args.key);
    if args.kind == LockKind::Fair && args.waits {
        return fair_place(&inner, &args, &dir).await;
    }
    let waits = args.waits && !args.wait_left.is_zero();
    let cancel = waits.then(|| inner.waiting(&args.key, &args.owner));
    let result = take(&inner, &args, side, &dir, cancel.as_deref()).await;
    if waits {
        inner.done_waiting(&args.key, &args.owner);
    }
    result
}

/// The answer to a granted acquisition.
fn granted(args: &AcquireArgs, token: u64) -> Attempt {
    match args.kind {
        LockKind::Fenced => Attempt::Fenced(token),
        _ => Attempt::Acquired,
    }
}

/// A reentry: one more hold on the owner's node. A fenced lock's token grows by one (see
/// `create::Made::token`), unless a reentry count would spill into the zxid: then the
/// node's data is written, and the token starts again from that write's zxid.
async fn reenter(
    inner: &Arc<Inner>,
    args: &AcquireArgs,
    side: Side,
    mut entry: Entry,
) -> Result<Attempt, BackendError> {
    if args.kind == LockKind::Fenced {
        entry.token = match entry.token.checked_add(1) {
            Some(next) if next & REENTRIES_MASK != 0 => next,
            _ => {
                let (client, _) = inner.connection.client();
                let stat = client
                    .set_data(&entry.path, args.owner.as_str().as_bytes(), None)
                    .await
                    .map_err(|error| failed("write a held lock node", error))?;
                zxid_token(stat.mzxid)
            }
        };
    }
    entry.count += 1;
    entry.ends = entry.ends.max(Instant::now() + args.lease);
    let token = entry.token;
    inner.holds.put(&args.key, &args.owner, side, entry);
    Ok(granted(args, token))
}

/// Makes the owner's node and waits (if `cancel`: its acquirer waits) until it holds.
async fn take(
    inner: &Arc<Inner>,
    args: &AcquireArgs,
    side: Side,
    dir: &str,
    cancel: Option<&Notify>,
) -> Result<Attempt, BackendError> {
    let made = create_node(inner, dir, side, args.owner.as_str().as_bytes()).await?;
    let until = Instant::now()
        .checked_add(args.wait_left)
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
    let writes_here = side == Side::Read && inner.holds.writes(&args.key, &args.owner);
    // The node before this one held the lock and was deleted: this one is first now (no
    // node can come before it: sequences only grow), as the server's notice says.
    let mut first_by_notice = false;
    loop {
        let (client, _) = inner.connection.client();
        let now_standing = if first_by_notice {
            Standing::Holds
        } else {
            match client.list_children(dir).await {
                Ok(children) => standing(&queue(&children), &made.name, writes_here),
                Err(error) => {
                    let _ = delete_node(inner, &made.path, made.generation).await;
                    return Err(failed("list a lock's nodes", error));
                }
            }
        };
        let (watch, next) = match now_standing {
            Standing::Holds => {
                record(inner, args, side, &made);
                return Ok(granted(args, made.token));
            }
            Standing::Gone => {
                return Err(BackendError::new(format!(
                    "ZooKeeper: the lock node {} vanished while it waited (its session \
                     ended, or someone deleted it)",
                    made.path
                )))
            }
            Standing::Waits { watch, next } => (watch, next),
        };
        let Some(cancel) = cancel else {
            // A single try: not first, so the node goes again.
            delete_node(inner, &made.path, made.generation).await?;
            return Ok(Attempt::Busy(None));
        };
        let watched = client.check_and_watch_stat(&format!("{dir}/{watch}")).await;
        match watched {
            // Gone already: look again.
            Ok((None, _)) => continue,
            Ok((Some(_), watcher)) => {
                let over = tokio::select! {
                    event = watcher.changed() => {
                        inner.watches_fired.fetch_add(1, Ordering::Relaxed);
                        // A reader may still have writers between it and the one it
                        // watched: it looks again.
                        first_by_notice = next
                            && side != Side::Read
                            && event.event_type == zk::EventType::NodeDeleted;
                        false
                    }
                    _ = tokio::time::sleep_until(until) => true,
                    _ = cancel.notified() => true,
                };
                if over {
                    // Its wait is over (or its acquirer left): out of the queue. A grant
                    // that raced it is no grant: the node is deleted either way.
                    delete_node(inner, &made.path, made.generation).await?;
                    return Ok(Attempt::Busy(None));
                }
            }
            Err(error) => {
                let _ = delete_node(inner, &made.path, made.generation).await;
                return Err(failed("watch a lock node", error));
            }
        }
    }
}

/// The owner holds the node it made (until released, or its lease runs out unrenewed).
fn record(inner: &Arc<Inner>, args: &AcquireArgs, side: Side, made: &Made) {
    let entry = Entry {
        path: made.path.clone(),
        generation: made.generation,
        count: 1,
        token: made.token,
        ends: Instant::now() + args.lease,
        watching: None,
        first_by_notice: false,
        tasks: EntryTasks::default(),
    };
    inner.holds.put(&args.key, &args.owner, side, entry);
    expire_later(inner, &args.key, &args.owner, side, &made.path);
}

/// A waiting fair acquisition: its place is its node, made once and kept; first, it holds;
/// otherwise it watches the node before it, whose deletion is its turn to look again.
async fn fair_place(
    inner: &Arc<Inner>,
    args: &AcquireArgs,
    dir: &str,
) -> Result<Attempt, BackendError> {
    // Each attempt keeps the place for another queue timeout.
    let place_ends = Instant::now() + args.queue_timeout;
    let place = match inner.holds.get(&args.key, &args.owner, Side::Mutex) {
        Some(mut entry) => {
            entry.ends = entry.ends.max(place_ends);
            inner
                .holds
                .put(&args.key, &args.owner, Side::Mutex, entry.clone());
            entry
        }
        None => {
            let made = create_node(inner, dir, Side::Mutex, args.owner.as_str().as_bytes()).await?;
            let entry = Entry {
                path: made.path,
                generation: made.generation,
                count: 0,
                token: made.token,
                ends: place_ends,
                watching: None,
                first_by_notice: false,
                tasks: EntryTasks::default(),
            };
            inner
                .holds
                .put(&args.key, &args.owner, Side::Mutex, entry.clone());
            expire_later(inner, &args.key, &args.owner, Side::Mutex, &entry.path);
            entry
        }
    };
    if let Some((_, next)) = &place.watching {
        // Its watch has not fired: the node before it is still there, nothing to look at.
        return Ok(Attempt::Queued {
            retry_in: FAIR_RETRY,
            holder_lease: None,
            at_head: *next,
        });
    }
    let name = place.path.rsplit('/').next().unwrap_or_default().to_owned();
    let (client, _) = inner.connection.client();
    let now_standing = if place.first_by_notice {
        Standing::Holds
    } else {
        let children = client
            .list_children(dir)
            .await
            .map_err(|error| failed("list a lock's nodes", error))?;
        standing(&queue(&children), &name, false)
    };
    match now_standing {
        Standing::Holds => {
            let mut entry = place;
            entry.first_by_notice = false;
            entry.count = 1;
            entry.ends = Instant::now() + args.lease;
            entry.watching = None;
            let token = entry.token;
            inner.holds.put(&args.key, &args.owner, Side::Mutex, entry);
            Ok(granted(args, token))
        }
        Standing::Gone => {
            // Its place went (someone deleted it): it queues again at the back, at once.
            inner.holds.take(&args.key, &args.owner, Side::Mutex);
            Ok(Attempt::Queued {
                retry_in: Duration::ZERO,
                holder_lease: None,
                at_head: false,
            })
        }
        Standing::Waits { watch, next } => {
            let path = format!("{dir}/{watch}");
            let mut entry = place;
            entry.watching = Some((path.clone(), next));
            inner.holds.put(&args.key, &args.owner, Side::Mutex, entry);
            let watch = watch_turn(
                inner,
                client,
                (path.clone(), next),
                args.key.clone(),
                args.owner.clone(),
            );
            // The watch belongs to the place: it stops when the place goes (the waiter left,
            // or holds now) or watches another node.
            inner.holds.attach_turn_watch(
                (&args.key, &args.owner),
                &path,
                crate::abort::AbortOnDrop::new(watch),
            );
            Ok(Attempt::Queued {
                retry_in: FAIR_RETRY,
                holder_lease: None,
                at_head: next,
            })
        }
    }
}

/// Tells the fair waiter `owner` its turn when the node at `path` changes (it is deleted:
/// the node before it left), or at once if it is gone already (or the watch failed: it
/// looks again, and a new watch is set).
fn watch_turn(
    inner: &Arc<Inner>,
    client: zk::Client,
    (path, next): (String, bool),
    key: LockKey,
    owner: OwnerId,
) -> tokio::task::JoinHandle<()> {
    let weak = Arc::downgrade(inner);
    tokio::spawn(async move {
        let watched = client.check_and_watch_stat(&path).await;
        let event = match watched {
            Ok((Some(_), watcher)) => Some(watcher.changed().await),
            _ => None,
        };
        let Some(inner) = weak.upgrade() else {
            return;
        };
        if event.is_some() {
            inner.watches_fired.fetch_add(1, Ordering::Relaxed);
        }
        // The node before it held the lock and went: it is first (no node can come before
        // it), as the server's notice says.
        let first = next && event.is_some_and(|e| e.event_type == zk::EventType::NodeDeleted);
        if let Some(mut entry) = inner.holds.get(&key, &owner, Side::Mutex) {
            if entry
                .watching
                .as_ref()
                .is_some_and(|(watched, _)| *watched == path)
            {
                entry.watching = None;
                entry.first_by_notice = first;
                inner.holds.put(&key, &owner, Side::Mutex, entry);
            }
        }
        if let Some(notices) = inner.connection.notices.get() {
            notices.turn(&key, &owner);
        }
    })
}
