//! Read-write locks on Redis, in Redisson's `RReadWriteLock` layout (`read_write.lua`):
//! one script call per operation (they are not batched with the plain lock's operations),
//! and a mark of tower-lock's own for writers that wait behind readers.

use std::time::Duration;

use fred::prelude::*;

use crate::backend::redis::commands::{eval_script, millis, script_call, scripted_reply};
use crate::backend::redis::{names, scripts, RedisBackend};
use crate::backend::WRITER_MARK_LEASE;
use crate::backend::{
    AcquireArgs, Attempt, BoxFuture, LeaveArgs, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::{BackendError, Released};
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// The read-write lock's script (`read_write.lua`), with PUBLISH or SPUBLISH: one
/// operation per call, in Redisson's `RReadWriteLock` layout. Its reply codes are the batch
/// script's (a release's `UNLOCKED` plus the subscribers reached when the lock was deleted).
/// A read release that deletes the lock publishes `0`, a write release `1` (Redisson's
/// READ_UNLOCK, which wakes every waiter: readers share).
pub(in crate::backend) fn script(sharded: bool) -> String {
    crate::backend::redis::scripts::publishing(include_str!("read_write.lua"), sharded)
}

/// One read-write lock operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::backend) enum ReadWriteOp {
    /// An acquisition; `waits`: the acquirer waits if it finds the lock busy (a writer
    /// then marks its wait).
    Acquire {
        waits: bool,
    },
    Release,
    Renew,
    /// A waiting writer stops waiting (takes its mark back).
    Leave,
}

impl ReadWriteOp {
    fn code(self, kind: LockKind) -> &'static str {
        match (self, kind) {
            (ReadWriteOp::Acquire { .. }, LockKind::Read) => "ra",
            (ReadWriteOp::Release, LockKind::Read) => "rr",
            (ReadWriteOp::Renew, LockKind::Read) => "rn",
            (ReadWriteOp::Acquire { .. }, _) => "wa",
            (ReadWriteOp::Release, _) => "wr",
            (ReadWriteOp::Renew, _) => "wn",
            (ReadWriteOp::Leave, _) => "wl",
        }
    }
}

impl RedisBackend {
    /// Runs one read-write lock operation; its reply: a code, or for a reader held back
    /// `[HELD_BACK, ms]`.
    pub(in crate::backend) fn read_write(
        &self,
        op: ReadWriteOp,
        kind: LockKind,
        key: LockKey,
        owner: OwnerId,
        lease: Duration,
        expected: u32,
    ) -> BoxFuture<Result<Value, BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let prefix = names::read_write_key_prefix(&key);
            let holds = format!("{prefix}:{owner}:rwlock_timeout");
            let keys = [
                key.as_str().to_owned(),
                names::read_write_channel(&key),
                holds,
                prefix,
                names::waiting_writers(&key),
            ];
            let waits = matches!(op, ReadWriteOp::Acquire { waits: true });
            let arguments = || {
                script_call(
                    &inner.read_write,
                    &keys,
                    [
                        Value::from(op.code(kind)),
                        Value::from(millis(lease)),
                        Value::from(owner.as_str()),
                        Value::from(i64::from(expected)),
                        Value::from(if waits { "1" } else { "0" }),
                        Value::from(millis(WRITER_MARK_LEASE)),
                    ],
                )
            };
            let client = inner.next_client();
            let reply =
                eval_script(client, &inner.options, &inner.read_write, &key, arguments).await?;
            scripted_reply(reply, "read-write", &key)
        })
    }
}

impl RedisBackend {
    /// [`Backend::acquire`](crate::backend::Backend::acquire) of a read or write lock (with
    /// the replica acknowledgement of a new holder, if configured).
    pub(in crate::backend) fn read_write_acquire(
        &self,
        args: AcquireArgs,
    ) -> BoxFuture<Result<Attempt, BackendError>> {
        let ack = self.inner.replica_ack.filter(|_| args.expected == 0);
        let (backend, kind) = (self.clone(), args.kind);
        let (key, owner, lease) = (args.key.clone(), args.owner.clone(), args.lease);
        let reply = self.read_write(
            ReadWriteOp::Acquire { waits: args.waits },
            args.kind,
            args.key,
            args.owner,
            args.lease,
            args.expected,
        );
        Box::pin(async move {
            match (decode_acquire(reply.await?)?, ack) {
                (Attempt::Acquired, Some(ack)) => {
                    Box::pin(backend.await_replicas(ack, key, kind, owner, lease)).await
                }
                (attempt, _) => Ok(attempt),
            }
        })
    }

    /// [`Backend::release`](crate::backend::Backend::release) of a read or write hold.
    pub(in crate::backend) fn read_write_release(
        &self,
        args: ReleaseArgs,
    ) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        // Never handed over: a read-write lock's release frees its share. A last hold's
        // release may publish, and this process's own notice is told apart as the plain
        // lock's is (`echoes`).
        let echo = (args.expected <= 1)
            .then(|| self.expect_echo(&args.key))
            .flatten();
        let listening = echo.is_some();
        let reply = self.read_write(
            ReadWriteOp::Release,
            args.kind,
            args.key,
            args.owner,
            args.lease,
            args.expected,
        );
        Box::pin(async move {
            let code = reply.await.and_then(reply_code);
            if let Some(echo) = echo {
                echo.settle(matches!(code, Ok(code) if published(code)));
            }
            decode_release(code?, listening)
        })
    }

    /// [`Backend::renew`](crate::backend::Backend::renew) of a read or write hold.
    pub(in crate::backend) fn read_write_renew(
        &self,
        args: RenewArgs,
    ) -> BoxFuture<Result<bool, BackendError>> {
        let reply = self.read_write(
            ReadWriteOp::Renew,
            args.kind,
            args.key,
            args.owner,
            args.lease,
            0,
        );
        Box::pin(async move { decode_renew(reply_code(reply.await?)?) })
    }

    /// [`Backend::leave_queue`](crate::backend::Backend::leave_queue) of a writer: its mark
    /// taken back.
    pub(in crate::backend) fn write_leave(
        &self,
        args: LeaveArgs,
    ) -> BoxFuture<Result<(), BackendError>> {
        let reply = self.read_write(
            ReadWriteOp::Leave,
            args.kind,
            args.key,
            args.owner,
            Duration::from_millis(1),
            0,
        );
        Box::pin(async move { decode_leave(reply_code(reply.await?)?) })
    }
}

/// A reply that is a code alone.
fn reply_code(reply: Value) -> Result<i64, BackendError> {
    match reply {
        Value::Integer(code) => Ok(code),
        _ => Err(BackendError::new(
            "Redis answered a read-write lock operation with a list, which its script gives \
             only to a reader held back",
        )),
    }
}

/// An acquisition's reply, decoded.
pub(in crate::backend) fn decode_acquire(reply: Value) -> Result<Attempt, BackendError> {
    let code = match reply {
        Value::Array(parts) => {
            return match parts.as_slice() {
                [Value::Integer(scripts::HELD_BACK), Value::Integer(ms)] if *ms >= 0 => {
                    Ok(Attempt::HeldBack(Duration::from_millis(*ms as u64)))
                }
                _ => Err(BackendError::new(
                    "Redis answered a read acquisition with a list that is not \
                     [HELD_BACK, ms]",
                )),
            };
        }
        reply => reply_code(reply)?,
    };
    Ok(match code {
        scripts::ACQUIRED => Attempt::Acquired,
        scripts::LOST => Attempt::Lost,
        scripts::BUSY_FOREVER => Attempt::Busy(None),
        pttl if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
        other => return Err(unknown("an acquisition", other)),
    })
}

/// A release's reply code, decoded: `Unlocked` ends this owner's last hold of the kind
/// (other readers, or its own other kind, may still hold the lock). `listening`: this
/// process's own subscriber is among those a published message reached.
pub(in crate::backend) fn decode_release(
    code: i64,
    listening: bool,
) -> Result<ReleaseReply, BackendError> {
    Ok(match code {
        scripts::NOT_HELD => ReleaseReply::new(Released::NotHeld),
        0 => ReleaseReply::new(Released::StillHeld),
        scripts::SHARED => ReleaseReply::new(Released::Unlocked),
        reached if reached >= scripts::UNLOCKED => {
            let reached = u32::try_from(reached - scripts::UNLOCKED).unwrap_or(u32::MAX);
            ReleaseReply {
                released: Released::Unlocked,
                other_listeners: Some(reached.saturating_sub(u32::from(listening))),
            }
        }
        other => return Err(unknown("a release", other)),
    })
}

/// Whether a release's reply code says a message was published.
pub(in crate::backend) fn published(code: i64) -> bool {
    code >= scripts::UNLOCKED
}

/// A renewal's reply code, decoded.
pub(in crate::backend) fn decode_renew(code: i64) -> Result<bool, BackendError> {
    match code {
        1 => Ok(true),
        0 => Ok(false),
        other => Err(unknown("a renewal", other)),
    }
}

/// A waiting writer's leave reply code, decoded.
pub(in crate::backend) fn decode_leave(code: i64) -> Result<(), BackendError> {
    match code {
        1 => Ok(()),
        other => Err(unknown("a waiting writer's leave", other)),
    }
}

fn unknown(operation: &str, code: i64) -> BackendError {
    BackendError::new(format!(
        "Redis answered {code} to {operation} of a read-write lock, which its script never answers"
    ))
}
