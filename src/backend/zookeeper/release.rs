//! Releases (the owner's last hold deletes its node: the next waiter's watch fires),
//! renewals (the node is still there, in this session: no lease to extend, the session is
//! the lease) and leaving the queue (a waiting acquisition's acquirer went away; a fair
//! waiter's place is deleted).

use std::sync::Arc;

use tokio::time::Instant;

use super::connection::failed;
use super::create::delete_node;
use super::nodes::Side;
use super::Inner;
use crate::backend::{LeaveArgs, ReleaseArgs, ReleaseReply, RenewArgs};
use crate::error::{BackendError, Released};
use crate::kind::LockKind;

pub(super) async fn release(
    inner: Arc<Inner>,
    args: ReleaseArgs,
) -> Result<ReleaseReply, BackendError> {
    let side = Side::of(args.kind).ok_or_else(|| super::missing(args.kind))?;
    let reply = |released| ReleaseReply {
        released,
        other_listeners: None,
    };
    let Some(mut entry) = inner.holds.get(&args.key, &args.owner, side) else {
        return Ok(reply(Released::NotHeld));
    };
    if entry.count == 0 || entry.generation != inner.connection.generation() {
        inner.holds.take(&args.key, &args.owner, side);
        return Ok(reply(Released::NotHeld));
    }
    if entry.count + 1 == args.expected {
        // Re-sent after it took effect.
        return Ok(reply(Released::StillHeld));
    }
    if entry.count > 1 {
        entry.count -= 1;
        inner.holds.put(&args.key, &args.owner, side, entry);
        return Ok(reply(Released::StillHeld));
    }
    inner.holds.take(&args.key, &args.owner, side);
    let deleted = delete_node(&inner, &entry.path, entry.generation).await?;
    if deleted && args.kind == LockKind::Fenced {
        // The last token given, for operators once the lock is free (best effort: a
        // holder that dies leaves the one before).
        let (client, _) = inner.connection.client();
        let token = entry.token.to_string();
        let _ = client
            .set_data(&inner.dir(&args.key), token.as_bytes(), None)
            .await;
    }
    match deleted {
        true => Ok(reply(Released::Unlocked)),
        false => Ok(reply(Released::NotHeld)),
    }
}

pub(super) async fn renew(inner: Arc<Inner>, args: RenewArgs) -> Result<bool, BackendError> {
    let side = Side::of(args.kind).ok_or_else(|| super::missing(args.kind))?;
    let Some(entry) = inner.holds.get(&args.key, &args.owner, side) else {
        return Ok(false);
    };
    let (client, generation) = inner.connection.client();
    if entry.count == 0 || entry.generation != generation {
        return Ok(false);
    }
    let stat = client
        .check_stat(&entry.path)
        .await
        .map_err(|error| failed("look at a held lock node", error))?;
    let ours = stat.is_some_and(|stat| stat.ephemeral_owner == client.session_id().0);
    if !ours {
        // Deleted behind the holder (force-unlocked, or by hand).
        inner.holds.take(&args.key, &args.owner, side);
        return Ok(false);
    }
    if let Some(mut entry) = inner.holds.get(&args.key, &args.owner, side) {
        entry.ends = Instant::now() + args.lease;
        inner.holds.put(&args.key, &args.owner, side, entry);
    }
    Ok(true)
}

pub(super) async fn leave_queue(inner: Arc<Inner>, args: LeaveArgs) -> Result<(), BackendError> {
    // A waiting acquisition on its way: it deletes its node and answers busy.
    inner.cancel_wait(&args.key, &args.owner);
    if args.kind != LockKind::Fair {
        return Ok(());
    }
    // A fair waiter's place (not a hold: the lock it got is released, not left).
    let place = inner.holds.get(&args.key, &args.owner, Side::Mutex);
    if let Some(entry) = place.filter(|entry| entry.count == 0) {
        inner.holds.take(&args.key, &args.owner, Side::Mutex);
        delete_node(&inner, &entry.path, entry.generation).await?;
    }
    Ok(())
}
