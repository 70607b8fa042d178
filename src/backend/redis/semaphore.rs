//! Semaphores on Redis, in Redisson's `RPermitExpirableSemaphore` layout
//! (`semaphore.lua`): one script call per operation.

use std::time::Duration;

use fred::prelude::*;

use crate::backend::permits::permit_ids;
use crate::backend::redis::commands::{eval_script, millis};
use crate::backend::redis::{names, scripts, RedisBackend};
use crate::backend::PermitUsage;
use crate::backend::{
    AcquireArgs, Attempt, BoxFuture, ReleaseArgs, ReleaseReply, RenewArgs, Successor,
};
use crate::error::{BackendError, Released};
use crate::key::{LockKey, OwnerId};
use crate::kind::{LockKind, Permits};

/// The semaphore's script (`semaphore.lua`), with PUBLISH or SPUBLISH.
pub(in crate::backend) fn script(sharded: bool) -> String {
    scripts::publishing(include_str!("semaphore.lua"), sharded)
}

/// The permits of a semaphore operation (`None`: `kind` is not a semaphore).
fn permits(kind: LockKind) -> Option<Permits> {
    match kind {
        LockKind::Semaphore(permits) => Some(permits),
        _ => None,
    }
}

/// The answer to a semaphore operation asked with another kind.
fn not_a_semaphore<T: Send + 'static>(kind: LockKind) -> BoxFuture<Result<T, BackendError>> {
    let error = BackendError::new(format!("a {} lock is not a semaphore", kind.name()));
    Box::pin(std::future::ready(Err(error)))
}

impl RedisBackend {
    /// Runs one operation of `semaphore.lua` on `key`: `head` after the operation's code,
    /// then the `count` permit ids of each of `owners` in turn.
    fn semaphore_call<const N: usize>(
        &self,
        key: LockKey,
        code: &'static str,
        head: [i64; N],
        (owners, count): (Vec<OwnerId>, u32),
    ) -> BoxFuture<Result<Value, BackendError>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let keys = [
                key.as_str().to_owned(),
                names::semaphore_deadlines(&key),
                names::semaphore_channel(&key),
            ];
            let ids: Vec<[u8; 16]> = owners
                .iter()
                .flat_map(|owner| permit_ids(owner, count))
                .collect();
            let arguments = || {
                let mut values = Vec::with_capacity(3 + keys.len() + N + ids.len());
                values.push(Value::String(inner.semaphore.sha1().clone()));
                values.push(Value::from(keys.len() as i64));
                values.extend(keys.iter().map(|key| Value::from(key.as_str())));
                values.push(Value::from(code));
                values.extend(head.iter().map(|n| Value::from(*n)));
                values.extend(
                    ids.iter()
                        .map(|id| Value::Bytes(bytes::Bytes::copy_from_slice(id))),
                );
                values
            };
            let client = inner.next_client();
            eval_script(client, &inner.options, &inner.semaphore, &key, arguments).await
        })
    }

    /// [`Backend::acquire`](crate::backend::Backend::acquire) of a semaphore's permits
    /// (with the replica acknowledgement of new permits, if configured).
    pub(in crate::backend) fn semaphore_acquire(
        &self,
        args: AcquireArgs,
    ) -> BoxFuture<Result<Attempt, BackendError>> {
        let Some(permits) = permits(args.kind) else {
            return not_a_semaphore(args.kind);
        };
        let reply = self.semaphore_call(
            args.key.clone(),
            "a",
            [
                i64::from(permits.limit()),
                millis(args.lease),
                i64::from(args.expected),
                i64::from(permits.count()),
            ],
            (vec![args.owner.clone()], permits.count()),
        );
        let ack = self.inner.replica_ack.filter(|_| args.expected == 0);
        let backend = self.clone();
        Box::pin(async move {
            let attempt = decode_acquire(&args.key, reply.await?)?;
            match (attempt, ack) {
                (Attempt::Acquired, Some(ack)) => {
                    Box::pin(
                        backend.await_replicas(ack, args.key, args.kind, args.owner, args.lease),
                    )
                    .await
                }
                (attempt, _) => Ok(attempt),
            }
        })
    }

    /// [`Backend::release`](crate::backend::Backend::release) of a semaphore's permits.
    pub(in crate::backend) fn semaphore_release(
        &self,
        args: ReleaseArgs,
    ) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        let Some(permits) = permits(args.kind) else {
            return not_a_semaphore(args.kind);
        };
        if let Some(successor) = args.successor.filter(|_| args.expected <= 1) {
            return self.semaphore_hand_over(args.key, args.owner, successor, permits);
        }
        // A last release publishes the new count; this process's own message comes back
        // and is told apart as the plain lock's is (`echoes`).
        let echo = (args.expected <= 1)
            .then(|| self.expect_echo(&args.key))
            .flatten();
        let reply = self.semaphore_call(
            args.key.clone(),
            "r",
            [
                millis(args.lease),
                i64::from(args.expected),
                i64::from(permits.count()),
            ],
            (vec![args.owner], permits.count()),
        );
        let key = args.key;
        Box::pin(async move {
            let reply = reply.await;
            if let Some(echo) = echo {
                // The reply counts the subscribers the new count reached: none when it was
                // not published (the limit was lowered under the permits held), and then no
                // echo may be waited for (it would swallow another process's notice).
                let published =
                    matches!(&reply, Ok(Value::Integer(code)) if *code > scripts::UNLOCKED);
                echo.settle(published);
            }
            decode_release(&key, reply?)
        })
    }

    /// A last release that hands `owner`'s permits straight to `successor`, a waiter of
    /// this process for as many permits of the same semaphore (nothing is published: the
    /// permits stay held) — unless more are held than the limit allows (it was lowered):
    /// then they are released (`Unlocked`), and the waiter tries as every other does.
    fn semaphore_hand_over(
        &self,
        key: LockKey,
        owner: OwnerId,
        successor: Successor,
        permits: Permits,
    ) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        let reply = self.semaphore_call(
            key.clone(),
            "h",
            [millis(successor.lease), i64::from(permits.count())],
            (vec![owner, successor.owner], permits.count()),
        );
        Box::pin(async move {
            match reply.await? {
                Value::Integer(scripts::HANDED_OVER) => Ok(ReleaseReply::new(Released::HandedOver)),
                Value::Integer(scripts::NOT_HELD) => Ok(ReleaseReply::new(Released::NotHeld)),
                Value::Array(parts)
                    if parts.first().and_then(Value::as_i64) == Some(scripts::UNLOCKED) =>
                {
                    Ok(ReleaseReply::new(Released::Unlocked))
                }
                other => Err(rejected(&key, "hand-over", &other)),
            }
        })
    }

    /// [`Backend::renew`](crate::backend::Backend::renew) of a semaphore's permits.
    pub(in crate::backend) fn semaphore_renew(
        &self,
        args: RenewArgs,
    ) -> BoxFuture<Result<bool, BackendError>> {
        let Some(permits) = permits(args.kind) else {
            return not_a_semaphore(args.kind);
        };
        let reply = self.semaphore_call(
            args.key.clone(),
            "n",
            [millis(args.lease), i64::from(permits.count())],
            (vec![args.owner], permits.count()),
        );
        Box::pin(async move {
            match reply.await? {
                Value::Integer(1) => Ok(true),
                Value::Integer(0) => Ok(false),
                other => Err(rejected(&args.key, "renewal", &other)),
            }
        })
    }

    /// [`Backend::set_semaphore_limit`](crate::backend::Backend::set_semaphore_limit).
    pub(in crate::backend) fn semaphore_set_limit(
        &self,
        key: LockKey,
        limit: u32,
    ) -> BoxFuture<Result<(), BackendError>> {
        let reply = self.semaphore_call(key.clone(), "s", [i64::from(limit)], (Vec::new(), 0));
        Box::pin(async move {
            match reply.await? {
                Value::Integer(1) => Ok(()),
                other => Err(rejected(&key, "change of limit", &other)),
            }
        })
    }

    /// [`Backend::semaphore_usage`](crate::backend::Backend::semaphore_usage).
    pub(in crate::backend) fn semaphore_read_usage(
        &self,
        key: LockKey,
    ) -> BoxFuture<Result<PermitUsage, BackendError>> {
        let reply = self.semaphore_call(key.clone(), "u", [], (Vec::new(), 0));
        Box::pin(async move {
            let reply = reply.await?;
            decode_usage(&reply).ok_or_else(|| rejected(&key, "usage", &reply))
        })
    }
}

fn rejected(key: &LockKey, operation: &str, reply: &Value) -> BackendError {
    BackendError::new(format!(
        "Redis rejected the semaphore {operation} of `{key}`: {} (does the name or its \
         timeout key hold other data?)",
        reply.as_string().unwrap_or_else(|| format!("{reply:?}"))
    ))
}

/// An acquisition's reply, decoded.
fn decode_acquire(key: &LockKey, reply: Value) -> Result<Attempt, BackendError> {
    let Value::Integer(code) = reply else {
        return Err(rejected(key, "acquisition", &reply));
    };
    Ok(match code {
        scripts::ACQUIRED => Attempt::Acquired,
        scripts::LOST => Attempt::Lost,
        scripts::BUSY_FOREVER => Attempt::Busy(None),
        pttl if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
        _ => return Err(rejected(key, "acquisition", &reply)),
    })
}

/// A release's reply, decoded. No listener count is reported: a permit is one of many,
/// not a turn of an exclusive lock, so the next local waiter tries at once rather than
/// letting waiters of other processes go first (the published count told them, and they
/// race for it with ours).
fn decode_release(key: &LockKey, reply: Value) -> Result<ReleaseReply, BackendError> {
    let Value::Integer(code) = reply else {
        return Err(rejected(key, "release", &reply));
    };
    Ok(match code {
        scripts::NOT_HELD => ReleaseReply::new(Released::NotHeld),
        0 => ReleaseReply::new(Released::StillHeld),
        reached if reached >= scripts::UNLOCKED => ReleaseReply::new(Released::Unlocked),
        _ => return Err(rejected(key, "release", &reply)),
    })
}

/// A usage reply (`{limit or -1, in use}`), decoded.
fn decode_usage(reply: &Value) -> Option<PermitUsage> {
    let Value::Array(parts) = reply else {
        return None;
    };
    let (Some(Value::Integer(limit)), Some(Value::Integer(in_use))) = (parts.first(), parts.get(1))
    else {
        return None;
    };
    let limit = match *limit {
        -1 => None,
        limit => Some(u32::try_from(limit.max(0)).unwrap_or(u32::MAX)),
    };
    Some(PermitUsage::new(limit, u32::try_from(*in_use).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_is_decoded_or_an_error() {
        let key = LockKey::from_stored("s");
        assert_eq!(
            decode_acquire(&key, Value::from(-1)).unwrap(),
            Attempt::Acquired
        );
        assert_eq!(
            decode_acquire(&key, Value::from(-3)).unwrap(),
            Attempt::Lost
        );
        assert_eq!(
            decode_acquire(&key, Value::from(-2)).unwrap(),
            Attempt::Busy(None)
        );
        assert_eq!(
            decode_acquire(&key, Value::from(40)).unwrap(),
            Attempt::Busy(Some(Duration::from_millis(40)))
        );
        assert!(decode_acquire(&key, Value::from(-9)).is_err());
        let error = decode_acquire(&key, Value::from("WRONGTYPE Operation")).unwrap_err();
        assert!(error.to_string().contains("other data"), "{error}");
        let release = |code: i64| decode_release(&key, Value::from(code)).unwrap();
        assert_eq!(release(-1).released, Released::NotHeld);
        assert_eq!(release(0).released, Released::StillHeld);
        assert_eq!(release(3), ReleaseReply::new(Released::Unlocked));
        assert!(decode_release(&key, Value::from(-7)).is_err());
        let usage =
            |a: i64, b: i64| decode_usage(&Value::Array(vec![Value::from(a), Value::from(b)]));
        assert_eq!(usage(8, 3), Some(PermitUsage::new(Some(8), 3)));
        assert_eq!(usage(-1, 0), Some(PermitUsage::new(None, 0)));
        assert_eq!(decode_usage(&Value::from(1)), None);
    }
}
