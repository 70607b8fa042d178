//! Plain locks with a record on Redis: an acquisition that takes the lock only while it
//! has no record (a claim), and a last release that stores one (a store), each one
//! operation of the batch script (`batch.lua`), so that under load they share script calls
//! with every other lock operation (group commit). Renewals go with the plain lock's (the
//! hash is the same).

use std::time::Duration;

use crate::backend::redis::batch::{self, Answer, OpKind, Operation, RecordPart};
use crate::backend::redis::{scripts, RedisBackend};
use crate::backend::{AcquireArgs, Attempt, BoxFuture, LockRecord, ReleaseArgs, ReleaseReply};
use crate::error::{BackendError, Released};
use crate::kind::LockKind;

impl RedisBackend {
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
        let key = args.key.clone();
        let reply = batch::submit(
            &self.inner,
            Operation {
                kind: OpKind::Claim,
                key: args.key,
                owner: args.owner,
                lease: args.lease,
                expected: 0,
                successor: None,
                announce: None,
                record: RecordPart::Work(args.work.unwrap_or_default()),
            },
        );
        Box::pin(async move {
            let answer = match reply.await? {
                Answer::Recorded(record) => return Ok(Attempt::Recorded(record)),
                Answer::Code(code) => code,
            };
            decode_acquire(answer).map_err(|detail| {
                BackendError::new(format!(
                    "Redis rejected the acquisition of `{key}`: {detail}"
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
        let key = args.key.clone();
        let reply = batch::submit(
            &self.inner,
            Operation {
                kind: OpKind::Store,
                key: args.key,
                owner: args.owner,
                lease: args.lease,
                expected: args.expected,
                successor: None,
                announce: None,
                record: RecordPart::Record(record),
            },
        );
        let echoes = self.inner.echoes.clone();
        Box::pin(async move {
            let decoded = reply.await.and_then(Answer::code).and_then(|code| {
                decode_release(code, listening).map_err(|detail| {
                    BackendError::new(format!("Redis rejected the release of `{key}`: {detail}"))
                })
            });
            if listening {
                let published = matches!(&decoded, Ok((_, true)));
                echoes.settle(&key, published);
            }
            decoded.map(|(reply, _)| reply)
        })
    }
}

/// An acquisition's reply code (a record comes apart), decoded exhaustively.
fn decode_acquire(code: i64) -> Result<Attempt, String> {
    Ok(match code {
        scripts::ACQUIRED => Attempt::Acquired,
        scripts::BUSY_FOREVER => Attempt::Busy(None),
        scripts::HELD_FOR_OTHER_WORK => Attempt::HeldForOtherWork,
        pttl if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
        other => {
            return Err(format!(
                "the script answered {other}, which it never answers"
            ))
        }
    })
}

/// A release's reply code, decoded: the reply, and whether a message was published.
/// `listening`: this process's own subscriber is among those a published message reached.
fn decode_release(code: i64, listening: bool) -> Result<(ReleaseReply, bool), String> {
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
        assert_eq!(decode_acquire(-1), Ok(Attempt::Acquired));
        assert_eq!(decode_acquire(-7), Ok(Attempt::HeldForOtherWork));
        assert_eq!(
            decode_acquire(250),
            Ok(Attempt::Busy(Some(Duration::from_millis(250))))
        );
        for bad in [-5, -9, -3] {
            assert!(decode_acquire(bad).is_err(), "{bad}");
        }
        assert_eq!(
            decode_release(3, true).unwrap(),
            (
                ReleaseReply {
                    released: Released::Unlocked,
                    other_listeners: Some(1)
                },
                true
            )
        );
        assert_eq!(
            decode_release(1, false).unwrap().0.released,
            Released::Unlocked
        );
        assert_eq!(
            decode_release(-1, false).unwrap().0.released,
            Released::NotHeld
        );
        assert!(decode_release(-7, false).is_err());
    }
}
