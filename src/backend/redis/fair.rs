//! Fair locks on Redis, in Redisson's `RFairLock` layout (`fair.lua`): one script
//! call per operation. Renewals go with the plain lock's (the lock hash is the same).

use std::time::Duration;

use fred::prelude::*;

use crate::backend::redis::commands::{eval_script, millis, script_call, scripted_reply};
use crate::backend::redis::{names, scripts, RedisBackend};
use crate::backend::{AcquireArgs, Attempt, BoxFuture, LeaveArgs, ReleaseArgs, ReleaseReply};
use crate::error::{BackendError, Released};
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;

/// The fair lock's script (`fair.lua`), with PUBLISH or SPUBLISH: one operation per
/// call, in Redisson's `RFairLock` layout. A release publishes Redisson's UNLOCK message
/// (`0`) to the queue head's own channel only.
pub(in crate::backend) fn script(sharded: bool) -> String {
    crate::backend::redis::scripts::publishing(include_str!("fair.lua"), sharded)
}

/// One fair lock operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(in crate::backend) enum FairOp {
    /// Acquire without queueing (`count`: the owner's holds before).
    Try { count: u32 },
    /// Acquire or queue (`was_head`: the last attempt was answered queued at the head).
    Queue { timeout: Duration, was_head: bool },
    /// Release (`count`: the owner's holds before).
    Release { count: u32 },
    /// Leave the queue.
    Leave { timeout: Duration },
}

impl FairOp {
    /// The script's ARGV[1], ARGV[4] and ARGV[5].
    fn arguments(self) -> (&'static str, i64, &'static str) {
        match self {
            FairOp::Try { count } => ("a", i64::from(count), "0"),
            FairOp::Queue { timeout, was_head } => {
                ("q", millis(timeout), if was_head { "1" } else { "0" })
            }
            FairOp::Release { count } => ("r", i64::from(count), "0"),
            FairOp::Leave { timeout } => ("l", millis(timeout), "0"),
        }
    }
}

impl RedisBackend {
    /// Runs one fair lock operation; its reply.
    pub(in crate::backend) fn fair(
        &self,
        op: FairOp,
        key: LockKey,
        owner: OwnerId,
        lease: Duration,
    ) -> BoxFuture<Result<Value, BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let keys = [
                key.as_str().to_owned(),
                names::fair_queue(&key),
                names::fair_deadlines(&key),
                names::unlock_channel(&key),
            ];
            let (code, number, flag) = op.arguments();
            let arguments = || {
                script_call(
                    &inner.fair,
                    &keys,
                    [
                        Value::from(code),
                        Value::from(millis(lease)),
                        Value::from(owner.as_str()),
                        Value::from(number),
                        Value::from(flag),
                    ],
                )
            };
            let client = inner.next_client();
            let reply = eval_script(client, &inner.options, &inner.fair, &key, arguments).await?;
            scripted_reply(reply, "fair", &key)
        })
    }
}

impl RedisBackend {
    /// [`Backend::acquire`](crate::backend::Backend::acquire) of a fair lock: a single try,
    /// or a holder's reentry (never queues).
    pub(in crate::backend) fn fair_try(
        &self,
        args: AcquireArgs,
    ) -> BoxFuture<Result<Attempt, BackendError>> {
        let ack = self.inner.replica_ack.filter(|_| args.expected == 0);
        let (backend, key, owner, lease) = (
            self.clone(),
            args.key.clone(),
            args.owner.clone(),
            args.lease,
        );
        let reply = self.fair(
            FairOp::Try {
                count: args.expected,
            },
            args.key,
            args.owner,
            args.lease,
        );
        Box::pin(async move {
            match (decode_try(reply.await?)?, ack) {
                (Attempt::Acquired, Some(ack)) => {
                    Box::pin(backend.await_replicas(ack, key, LockKind::Fair, owner, lease)).await
                }
                (attempt, _) => Ok(attempt),
            }
        })
    }

    /// [`Backend::acquire`](crate::backend::Backend::acquire) of a waiting fair lock.
    pub(in crate::backend) fn fair_queue(
        &self,
        args: AcquireArgs,
    ) -> BoxFuture<Result<Attempt, BackendError>> {
        let ack = self.inner.replica_ack;
        let (backend, key, owner, lease) = (
            self.clone(),
            args.key.clone(),
            args.owner.clone(),
            args.lease,
        );
        let op = FairOp::Queue {
            timeout: args.queue_timeout,
            was_head: args.was_head,
        };
        let reply = self.fair(op, args.key, args.owner, args.lease);
        Box::pin(async move {
            match (decode_queue(reply.await?)?, ack) {
                (Attempt::Acquired, Some(ack)) => {
                    // Kept (acknowledged, or kept without enough acknowledgements), or an
                    // error once released: the waiter then tries again from the front.
                    Box::pin(backend.await_replicas(ack, key, LockKind::Fair, owner, lease))
                        .await?;
                    Ok(Attempt::Acquired)
                }
                (attempt, _) => Ok(attempt),
            }
        })
    }

    /// [`Backend::release`](crate::backend::Backend::release) of a fair lock's hold: its
    /// message goes to the head's own channel, so nothing comes back to a name's
    /// subscription here (no echo is expected).
    pub(in crate::backend) fn fair_release(
        &self,
        args: ReleaseArgs,
    ) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        let op = FairOp::Release {
            count: args.expected,
        };
        let reply = self.fair(op, args.key, args.owner, args.lease);
        Box::pin(async move { decode_release(reply.await?) })
    }

    /// [`Backend::leave_queue`](crate::backend::Backend::leave_queue).
    pub(in crate::backend) fn fair_leave(
        &self,
        args: LeaveArgs,
    ) -> BoxFuture<Result<(), BackendError>> {
        let op = FairOp::Leave {
            timeout: args.queue_timeout,
        };
        let reply = self.fair(op, args.key, args.owner, Duration::from_millis(1));
        Box::pin(async move { decode_leave(reply.await?) })
    }
}

fn code(reply: &Value, operation: &str) -> Result<i64, BackendError> {
    reply.as_i64().ok_or_else(|| unknown(operation, reply))
}

/// A single try's (or a reentry's) reply, decoded.
pub(in crate::backend) fn decode_try(reply: Value) -> Result<Attempt, BackendError> {
    Ok(match code(&reply, "an acquisition")? {
        scripts::ACQUIRED => Attempt::Acquired,
        scripts::LOST => Attempt::Lost,
        scripts::BUSY_FOREVER => Attempt::Busy(None),
        busy if busy >= 0 => Attempt::Busy(Some(Duration::from_millis(busy as u64))),
        _ => return Err(unknown("an acquisition", &reply)),
    })
}

/// A queued attempt's reply, decoded.
pub(in crate::backend) fn decode_queue(reply: Value) -> Result<Attempt, BackendError> {
    if let Value::Array(ref parts) = reply {
        if let [Value::Integer(retry), Value::Integer(pttl), Value::Integer(head)] =
            parts.as_slice()
        {
            if *retry >= 0 && (*head == 0 || *head == 1) {
                return Ok(Attempt::Queued {
                    retry_in: Duration::from_millis(*retry as u64),
                    holder_lease: (*pttl >= 0).then(|| Duration::from_millis(*pttl as u64)),
                    at_head: *head == 1,
                });
            }
        }
        return Err(unknown("a queued acquisition", &reply));
    }
    match code(&reply, "a queued acquisition")? {
        scripts::ACQUIRED => Ok(Attempt::Acquired),
        _ => Err(unknown("a queued acquisition", &reply)),
    }
}

/// A release's reply, decoded.
pub(in crate::backend) fn decode_release(reply: Value) -> Result<ReleaseReply, BackendError> {
    Ok(match code(&reply, "a release")? {
        scripts::NOT_HELD => ReleaseReply::new(Released::NotHeld),
        0 => ReleaseReply::new(Released::StillHeld),
        reached if reached >= scripts::UNLOCKED => ReleaseReply::new(Released::Unlocked),
        _ => return Err(unknown("a release", &reply)),
    })
}

/// A leave's reply, decoded.
pub(in crate::backend) fn decode_leave(reply: Value) -> Result<(), BackendError> {
    match code(&reply, "leaving the queue")? {
        1 => Ok(()),
        _ => Err(unknown("leaving the queue", &reply)),
    }
}

fn unknown(operation: &str, reply: &Value) -> BackendError {
    BackendError::new(format!(
        "Redis answered {reply:?} to {operation} of a fair lock, which its script never answers"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_is_decoded_or_an_error() {
        let queued = Value::Array(vec![
            Value::Integer(250),
            Value::Integer(-2),
            Value::Integer(1),
        ]);
        assert_eq!(
            decode_queue(queued).unwrap(),
            Attempt::Queued {
                retry_in: Duration::from_millis(250),
                holder_lease: None,
                at_head: true,
            }
        );
        assert_eq!(decode_queue(Value::Integer(-1)).unwrap(), Attempt::Acquired);
        for bad in [
            Value::Integer(3),
            Value::Array(vec![Value::Integer(-5), Value::Integer(1)]),
            Value::Array(vec![Value::Integer(5)]),
            Value::Array(vec![Value::Integer(5), Value::Integer(1)]),
            Value::Array(vec![
                Value::Integer(5),
                Value::Integer(1),
                Value::Integer(2),
            ]),
        ] {
            assert!(decode_queue(bad).is_err());
        }
        assert_eq!(decode_try(Value::Integer(-2)).unwrap(), Attempt::Busy(None));
        assert!(decode_try(Value::Integer(-9)).is_err());
        assert_eq!(
            decode_release(Value::Integer(3)).unwrap().released,
            Released::Unlocked
        );
        assert!(decode_release(Value::Integer(-7)).is_err());
        assert!(decode_leave(Value::Integer(0)).is_err());
    }
}
