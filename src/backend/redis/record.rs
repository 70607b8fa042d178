//! Plain locks with a record on Redis (`record.lua`): an acquisition that takes the
//! lock only while it has no record, and a last release that stores one, each one script
//! call. Renewals go with the plain lock's (the hash is the same).

use std::time::Duration;

use bytes::Bytes;
use fred::prelude::*;

use crate::backend::redis::commands::{eval_script, millis, script_call};
use crate::backend::redis::{names, scripts, RedisBackend};
use crate::backend::{AcquireArgs, Attempt, BoxFuture, LockRecord, ReleaseArgs, ReleaseReply};
use crate::error::{BackendError, Released};
use crate::key::LockKey;
use crate::kind::LockKind;

/// A plain lock with a record (`record.lua`), with PUBLISH or SPUBLISH: an acquisition unless
/// the lock has a record (`RECORDED` and the record when it has), and a last release that
/// stores one and publishes Redisson's UNLOCK message (`0`).
pub(super) fn script(sharded: bool) -> String {
    super::scripts::publishing(include_str!("record.lua"), sharded)
}

impl RedisBackend {
    /// Runs one operation of the record script with `arguments` after the operation code.
    fn record_call<const N: usize>(
        &self,
        key: &LockKey,
        code: &'static str,
        arguments: [Value; N],
    ) -> BoxFuture<Result<Value, BackendError>> {
        let inner = self.inner.clone();
        let key = key.clone();
        Box::pin(async move {
            let keys = [
                key.as_str().to_owned(),
                names::record(&key),
                names::unlock_channel(&key),
            ];
            let call = || {
                let mut values = script_call(&inner.record, &keys, [Value::from(code)]);
                values.extend(arguments.iter().cloned());
                values
            };
            let client = inner.next_client();
            eval_script(client, &inner.options, &inner.record, &key, call).await
        })
    }

    /// [`Backend::acquire`](crate::backend::Backend::acquire) with
    /// [`AcquireArgs::unless_recorded`]: a first acquisition of a plain lock.
    pub(in crate::backend) fn acquire_unless_recorded(
        &self,
        args: AcquireArgs,
    ) -> BoxFuture<Result<Attempt, BackendError>> {
        if args.kind != LockKind::Plain || args.expected != 0 {
            return Box::pin(std::future::ready(Err(BackendError::new(format!(
                "a lock with a record is a plain lock taken once (not a {} lock, not a reentry)",
                args.kind.name()
            )))));
        }
        let reply = self.record_call(
            &args.key,
            "a",
            [
                Value::from(millis(args.lease)),
                Value::from(args.owner.as_str()),
                Value::Bytes(args.work.clone().unwrap_or_default()),
            ],
        );
        Box::pin(async move {
            decode_acquire(reply.await?).map_err(|detail| {
                BackendError::new(format!(
                    "Redis rejected the acquisition of `{}`: {detail}",
                    args.key
                ))
            })
        })
    }

    /// [`Backend::release`](crate::backend::Backend::release) with a
    /// [`ReleaseArgs::record`] to store.
    pub(in crate::backend) fn release_recording(
        &self,
        args: ReleaseArgs,
        record: LockRecord,
    ) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        let listening = self.listens(&args.key);
        let reply = self.record_call(
            &args.key,
            "r",
            [
                Value::from(millis(args.lease)),
                Value::from(args.owner.as_str()),
                Value::from(i64::from(args.expected)),
                Value::from(millis(record.retention)),
                Value::Bytes(record.value),
            ],
        );
        let echoes = self.inner.echoes.clone();
        Box::pin(async move {
            let reply = reply.await;
            let decoded = reply.and_then(|reply| {
                decode_release(reply, listening).map_err(|detail| {
                    BackendError::new(format!(
                        "Redis rejected the release of `{}`: {detail}",
                        args.key
                    ))
                })
            });
            if listening {
                let published = matches!(&decoded, Ok((_, true)));
                echoes.settle(&args.key, published);
            }
            decoded.map(|(reply, _)| reply)
        })
    }
}

/// An acquisition's reply, decoded exhaustively.
fn decode_acquire(reply: Value) -> Result<Attempt, String> {
    let Value::Array(parts) = reply else {
        return Err(format!(
            "{} (does the lock or its record key hold other data?)",
            reply.as_string().unwrap_or_default()
        ));
    };
    let code = match parts.first() {
        Some(Value::Integer(code)) => *code,
        other => return Err(format!("the script answered {other:?}")),
    };
    Ok(match (code, parts.get(1)) {
        (scripts::ACQUIRED, None) => Attempt::Acquired,
        (scripts::BUSY_FOREVER, None) => Attempt::Busy(None),
        (scripts::HELD_FOR_OTHER_WORK, None) => Attempt::HeldForOtherWork,
        (scripts::RECORDED, Some(Value::Bytes(record))) => Attempt::Recorded(record.clone()),
        (scripts::RECORDED, Some(Value::String(record))) => {
            Attempt::Recorded(Bytes::copy_from_slice(record.as_bytes()))
        }
        (pttl, None) if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
        other => {
            return Err(format!(
                "the script answered {other:?}, which it never answers"
            ))
        }
    })
}

/// A release's reply, decoded: the reply, and whether a message was published.
/// `listening`: this process's own subscriber is among those a published message reached.
fn decode_release(reply: Value, listening: bool) -> Result<(ReleaseReply, bool), String> {
    let code = match reply {
        Value::Integer(code) => code,
        other => {
            return Err(format!(
                "{} (does the lock or its record key hold other data?)",
                other.as_string().unwrap_or_default()
            ))
        }
    };
    Ok(match code {
        scripts::NOT_HELD => (ReleaseReply::new(Released::NotHeld), false),
        0 => (ReleaseReply::new(Released::StillHeld), false),
        // A re-sent release that already stored the record: nothing published now.
        scripts::UNLOCKED => (ReleaseReply::new(Released::Unlocked), false),
        reached if reached > scripts::UNLOCKED => {
            let reached = u32::try_from(reached - scripts::UNLOCKED).unwrap_or(u32::MAX);
            let reply = ReleaseReply {
                released: Released::Unlocked,
                other_listeners: Some(reached.saturating_sub(u32::from(listening))),
            };
            (reply, true)
        }
        other => {
            return Err(format!(
                "the script answered {other}, which it never answers"
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_is_decoded_or_an_error() {
        let array = |values: Vec<Value>| Value::Array(values);
        assert_eq!(
            decode_acquire(array(vec![Value::from(-1)])),
            Ok(Attempt::Acquired)
        );
        assert_eq!(
            decode_acquire(array(vec![
                Value::from(-5),
                Value::Bytes(Bytes::from_static(b"r"))
            ])),
            Ok(Attempt::Recorded(Bytes::from_static(b"r")))
        );
        assert_eq!(
            decode_acquire(array(vec![Value::from(250)])),
            Ok(Attempt::Busy(Some(Duration::from_millis(250))))
        );
        for bad in [
            array(vec![]),
            array(vec![Value::from(-5)]),
            array(vec![Value::from(-9)]),
            array(vec![Value::from(-1), Value::from(3)]),
        ] {
            assert!(decode_acquire(bad).is_err());
        }
        assert!(decode_acquire(Value::from("WRONGTYPE"))
            .unwrap_err()
            .contains("other data"));
        assert_eq!(
            decode_release(Value::from(3), true).unwrap(),
            (
                ReleaseReply {
                    released: Released::Unlocked,
                    other_listeners: Some(1)
                },
                true
            )
        );
        assert_eq!(
            decode_release(Value::from(1), false).unwrap().0.released,
            Released::Unlocked
        );
        assert_eq!(
            decode_release(Value::from(-1), false).unwrap().0.released,
            Released::NotHeld
        );
        assert!(decode_release(Value::from(-7), false).is_err());
    }
}
