//! The [`Backend`] implementation: each lock operation goes to the batcher, and its reply
//! code is decoded exhaustively (a code the script never gives is an error, never a
//! guessed outcome).

use std::time::Duration;

use fred::prelude::*;

use super::batch::{OpKind, Operation};
use super::fair::{self, FairOp};
use super::read_write::{self, ReadWriteOp};
use super::{names, scripts, subscriptions, RedisBackend};
use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, FairArgs, FairAttempt, LeaveArgs,
    Notices, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::{BackendError, Released};
use crate::key::LockKey;
use crate::kind::LockKind;
use crate::telemetry::TARGET;

impl Backend for RedisBackend {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        if args.unless_recorded {
            return self.acquire_unless_recorded(args);
        }
        if args.kind == LockKind::Fair {
            return self.fair_try(args);
        }
        if args.kind == LockKind::Fenced {
            return self.fenced_acquire(args);
        }
        if args.kind != LockKind::Exclusive {
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
            return Box::pin(async move {
                match (read_write::decode_acquire(reply.await?)?, ack) {
                    (Attempt::Acquired, Some(ack)) => {
                        Box::pin(backend.await_replicas(ack, key, kind, owner, lease)).await
                    }
                    (attempt, _) => Ok(attempt),
                }
            });
        }
        // Replica acknowledgement concerns new holders only (a reentry changes no owner).
        let ack = self
            .inner
            .replica_ack
            .filter(|_| args.expected == 0)
            .map(|ack| {
                (
                    ack,
                    self.clone(),
                    args.key.clone(),
                    args.owner.clone(),
                    args.lease,
                )
            });
        let reply = self.submit(Operation {
            kind: OpKind::Acquire,
            key: args.key,
            owner: args.owner,
            lease: args.lease,
            expected: args.expected,
            successor: None,
            announce: None,
        });
        Box::pin(async move {
            Ok(match reply.await? {
                scripts::ACQUIRED => match ack {
                    // Boxed: only configured managers pay for its future's size.
                    Some((ack, backend, key, owner, lease)) => {
                        Box::pin(backend.await_replicas(
                            ack,
                            key,
                            LockKind::Exclusive,
                            owner,
                            lease,
                        ))
                        .await?
                    }
                    None => Attempt::Acquired,
                },
                scripts::LOST => Attempt::Lost,
                scripts::BUSY_FOREVER => Attempt::Busy(None),
                pttl if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
                other => return Err(unknown_reply("an acquisition", other)),
            })
        })
    }

    fn release(&self, mut args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        if let Some(record) = args.record.take() {
            return self.release_recording(args, record);
        }
        if args.kind == LockKind::Fair {
            // Its message goes to the head's own channel: nothing comes back to a name's
            // subscription here, so no echo is expected.
            let op = FairOp::Release {
                count: args.expected,
            };
            let reply = self.fair(op, args.key, args.owner, args.lease);
            return Box::pin(async move { fair::decode_release(reply.await?) });
        }
        // A fenced lock's release is the plain lock's (its successors acquire, each with a
        // token of its own, so it is never handed over).
        if args.kind.is_read_write() {
            // Never handed over: a read-write lock's release frees its share. A last hold's
            // release may publish, and this process's own notice is told apart as the plain
            // lock's is (`echoes`).
            let listening = args.expected <= 1 && self.listens(&args.key);
            let key = args.key.clone();
            let reply = self.read_write(
                ReadWriteOp::Release,
                args.kind,
                args.key,
                args.owner,
                args.lease,
                args.expected,
            );
            let echoes = self.inner.echoes.clone();
            return Box::pin(async move {
                let code = reply.await;
                if listening {
                    echoes.settle(
                        &key,
                        matches!(code, Ok(code) if read_write::published(code)),
                    );
                }
                read_write::decode_release(code?, listening)
            });
        }
        // Only an owner's last hold is handed over (the script checks it too).
        let (kind, lease, successor) = match args.successor {
            Some(successor) if args.expected <= 1 && args.kind == LockKind::Exclusive => {
                (OpKind::HandOver, successor.lease, Some(successor.owner))
            }
            _ => (OpKind::Release, args.lease, None),
        };
        // A last release publishes: when this process listens on the name, the notice
        // comes back to it (and is not another process's unlock).
        let listening = kind == OpKind::Release && args.expected <= 1 && self.listens(&args.key);
        let key = args.key.clone();
        let reply = self.submit(Operation {
            kind,
            key: args.key,
            owner: args.owner,
            lease,
            expected: args.expected,
            successor,
            announce: args.announce_run.filter(|_| kind == OpKind::Release),
        });
        let echoes = self.inner.echoes.clone();
        Box::pin(async move {
            let code = reply.await;
            // Settled on every answer, an error included: a notice still expected after a
            // release that failed would be taken for ours when another process's arrives,
            // and its waiter would sleep until the lease ends. (A failed release that did
            // land only wakes a waiter once more.)
            let decoded = code.and_then(|code| decode_release(kind, code, listening));
            if listening {
                let unlocked =
                    matches!(&decoded, Ok(reply) if reply.released == Released::Unlocked);
                echoes.settle(&key, unlocked);
            }
            decoded
        })
    }

    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        // A fair or fenced lock's hash is the plain lock's: renewed with it.
        if args.kind.is_read_write() {
            let reply = self.read_write(
                ReadWriteOp::Renew,
                args.kind,
                args.key,
                args.owner,
                args.lease,
                0,
            );
            return Box::pin(async move { read_write::decode_renew(reply.await?) });
        }
        let reply = self.submit(Operation {
            kind: OpKind::Renew,
            key: args.key,
            owner: args.owner,
            lease: args.lease,
            expected: 0,
            successor: None,
            announce: None,
        });
        Box::pin(async move {
            match reply.await? {
                1 => Ok(true),
                0 => Ok(false),
                other => Err(unknown_reply("a renewal", other)),
            }
        })
    }

    fn fair_acquire(&self, args: FairArgs) -> BoxFuture<Result<FairAttempt, BackendError>> {
        self.fair_queue(args)
    }

    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        match args.kind {
            LockKind::Fair => self.fair_leave(args),
            LockKind::Write => {
                let reply = self.read_write(
                    ReadWriteOp::Leave,
                    args.kind,
                    args.key,
                    args.owner,
                    Duration::from_millis(1),
                    0,
                );
                Box::pin(async move { read_write::decode_leave(reply.await?) })
            }
            _ => Box::pin(std::future::ready(Ok(()))),
        }
    }

    fn listen(&self, notices: Notices) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(
                target: TARGET,
                "the Redis lock manager was built outside a Tokio runtime; waiters will only \
                 retry when the holder's lease ends"
            );
            return;
        };
        let _ = self.inner.notices.set(notices.clone());
        let mut tasks = subscriptions::spawn(
            &runtime,
            self.inner.commands.first().clone(),
            self.inner.subscriber.clone(),
            self.inner.sharded,
            notices.clone(),
            self.inner.echoes.clone(),
        );
        for client in self.inner.commands.all() {
            tasks.push(runtime.spawn(super::connect::notice_outages(
                client.clone(),
                notices.clone(),
            )));
        }
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(tasks);
    }

    fn capabilities(&self) -> Capabilities {
        // A successor's acquisition would skip the replica acknowledgement; waiting for
        // replicas (and undoing on too few) also takes longer than one command.
        let plain = self.inner.replica_ack.is_none();
        // Queued behind sends on their way (each bounded by the time limit), then sent.
        let limit = self.inner.options.timeout.map(|limit| limit * 2);
        Capabilities::new()
            .hands_over(plain)
            .attempt_time_limit(limit.filter(|_| plain))
            .subscribes(true)
    }

    fn is_available(&self) -> bool {
        self.inner.commands.is_connected()
    }

    fn unavailable_reason(&self) -> BackendError {
        let config = self.inner.commands.first().client_config();
        BackendError::new(format!(
            "Redis at {} is unreachable (reconnecting)",
            super::connect::servers(&config)
        ))
    }

    fn check_key(&self, key: &LockKey) -> Result<(), String> {
        if !self.inner.commands.first().is_clustered() {
            return Ok(());
        }
        let slot = fred::util::redis_keyslot(key.as_str().as_bytes());
        if fred::util::redis_keyslot(names::unlock_channel(key).as_bytes()) == slot {
            Ok(())
        } else {
            Err(format!(
                "on Redis Cluster the braces in `{key}` must form a hash tag such as `{{order:42}}`; \
                 as they are, the lock and its unlock channel would land in different slots"
            ))
        }
    }

    fn name(&self) -> &'static str {
        "redis"
    }
}

impl RedisBackend {
    /// Whether this process's subscriber listens on `key`'s channel; if so, a release's
    /// notice is counted as expected back (see `echoes`). No lock is taken for a name
    /// without local waiters (most releases).
    pub(super) fn listens(&self, key: &LockKey) -> bool {
        let may = self
            .inner
            .notices
            .get()
            .is_some_and(|notices| notices.may_be_watched(key));
        may && self.inner.echoes.expect(key)
    }
}

/// A release's reply code, decoded; `listening`: this process's own subscriber is among
/// those a `PUBLISH` reached.
fn decode_release(kind: OpKind, code: i64, listening: bool) -> Result<ReleaseReply, BackendError> {
    let released = match (kind, code) {
        (_, scripts::NOT_HELD) => Released::NotHeld,
        (_, 0) => Released::StillHeld,
        (OpKind::HandOver, scripts::HANDED_OVER) => Released::HandedOver,
        (OpKind::Release, reached) if reached >= scripts::UNLOCKED => {
            let reached = u32::try_from(reached - scripts::UNLOCKED).unwrap_or(u32::MAX);
            return Ok(ReleaseReply {
                released: Released::Unlocked,
                other_listeners: Some(reached.saturating_sub(u32::from(listening))),
            });
        }
        (_, other) => return Err(unknown_reply("a release", other)),
    };
    Ok(ReleaseReply::new(released))
}

/// An error for a reply code the lock script never gives (a script of another version
/// answered, or the reply was garbled): never guessed into an outcome.
fn unknown_reply(operation: &str, code: i64) -> BackendError {
    BackendError::new(format!(
        "Redis answered {code} to {operation}, which the lock script never answers"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_code_is_decoded_or_an_error() {
        use OpKind::*;
        let released = |kind, code| decode_release(kind, code, false).map(|r| r.released);
        assert_eq!(released(Release, -1).unwrap(), Released::NotHeld);
        assert_eq!(released(Release, 0).unwrap(), Released::StillHeld);
        assert_eq!(released(HandOver, 2).unwrap(), Released::HandedOver);
        let unlocked = decode_release(Release, 4, true).unwrap();
        assert_eq!(
            (unlocked.released, unlocked.other_listeners),
            (Released::Unlocked, Some(2)),
            "1 + 3 subscribers reached, this process's among them"
        );
        for (kind, code) in [(Release, -2), (HandOver, 1), (HandOver, 3), (Release, -9)] {
            let error = released(kind, code).unwrap_err();
            assert!(error.to_string().contains("never answers"), "{error}");
        }
    }
}
