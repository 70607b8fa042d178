//! The plain lock's operations on Redis: each goes to the batcher (`batch.rs`), and its
//! reply code is decoded exhaustively (a code the script never gives is an error, never a
//! guessed outcome). The fair and the fenced lock release and renew with these (the hash
//! is the same). A lock with a record is a plain lock whose first acquisition is a claim
//! (taken only while the lock has no record) and whose last release may store one: the
//! same operations, batched with the others.

use std::time::Duration;

use super::batch::{Answer, OpKind, Operation, RecordPart, Submitted};
use crate::backend::redis::{scripts, RedisBackend};
use crate::backend::{
    AcquireArgs, Attempt, BoxFuture, LockRecord, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::{BackendError, Released};
use crate::kind::LockKind;

impl RedisBackend {
    /// Sends `operation` now if a send slot is free, else with the next batch.
    fn submit(&self, operation: Operation) -> Submitted {
        super::batch::submit(&self.inner, operation)
    }

    /// [`Backend::acquire`](crate::backend::Backend::acquire) of a plain lock; with
    /// [`AcquireArgs::unless_recorded`], a claim: a first acquisition that finds the record
    /// instead when the lock has one.
    pub(in crate::backend) fn plain_acquire(
        &self,
        args: AcquireArgs,
    ) -> BoxFuture<Result<Attempt, BackendError>> {
        let (kind, record) = if args.unless_recorded {
            if args.kind != LockKind::Plain || args.expected != 0 {
                return Box::pin(std::future::ready(Err(BackendError::new(format!(
                    "a lock with a record is a plain lock taken once (not a {} lock, not a reentry)",
                    args.kind.name()
                )))));
            }
            (
                OpKind::Claim,
                RecordPart::Work(args.work.unwrap_or_default()),
            )
        } else {
            (OpKind::Acquire, RecordPart::None)
        };
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
            kind,
            key: args.key,
            owner: args.owner,
            lease: args.lease,
            expected: args.expected,
            successor: None,
            announce: None,
            record,
        });
        Box::pin(async move {
            let code = match reply.await? {
                Answer::Recorded(record) if kind == OpKind::Claim => {
                    return Ok(Attempt::Recorded(record))
                }
                answer => answer.code()?,
            };
            match decode_acquire(kind, code)? {
                Attempt::Acquired => match ack {
                    // Boxed: only configured managers pay for its future's size.
                    Some((ack, backend, key, owner, lease)) => {
                        Box::pin(backend.await_replicas(ack, key, LockKind::Plain, owner, lease))
                            .await
                    }
                    None => Ok(Attempt::Acquired),
                },
                attempt => Ok(attempt),
            }
        })
    }

    /// [`Backend::release`](crate::backend::Backend::release) of a plain, fenced or fair
    /// lock's hold (a fair lock's release that frees it goes through `fair.lua` instead);
    /// with a `record`, a store: the last release leaves it with the lock, in the same step.
    pub(in crate::backend) fn plain_release(
        &self,
        args: ReleaseArgs,
        record: Option<LockRecord>,
    ) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        // Only an owner's last hold is handed over (the script checks it too).
        let (kind, lease, successor) = match args.successor {
            _ if record.is_some() => (OpKind::Store, args.lease, None),
            Some(successor) if args.expected <= 1 && args.kind.rules().hands_over => {
                (OpKind::HandOver, successor.lease, Some(successor.owner))
            }
            _ => (OpKind::Release, args.lease, None),
        };
        // A last release publishes: when this process listens on the name, the notice
        // comes back to it (and is not another process's unlock).
        let echo = (matches!(kind, OpKind::Release | OpKind::Store) && args.expected <= 1)
            .then(|| self.expect_echo(&args.key))
            .flatten();
        let listening = echo.is_some();
        let record = record.map_or(RecordPart::None, RecordPart::Record);
        // A withheld record goes in a second store, sent only when the first finds that
        // someone waits for it; stored then whatever its length (it is awaited).
        let resend = match &record {
            RecordPart::Record(stored) if record.withheld() => {
                let mut stored = stored.clone();
                stored.only_if_awaited = false;
                let inner = self.inner.clone();
                Some((inner, args.key.clone(), args.owner.clone(), stored))
            }
            _ => None,
        };
        let expected = args.expected;
        let reply = self.submit(Operation {
            kind,
            key: args.key,
            owner: args.owner,
            lease,
            expected,
            successor,
            announce: args.announce_run.filter(|_| kind == OpKind::Release),
            record,
        });
        Box::pin(async move {
            let mut code = reply.await;
            if let (Ok(Answer::Code(scripts::RECORD_WANTED)), Some((inner, key, owner, record))) =
                (&code, resend)
            {
                // Someone waits, or the lock is gone: the same store, with its record, which
                // stores it, or tells a store that took effect (re-sent after a lost reply)
                // from a lock that ended before it.
                code = super::batch::submit(
                    &inner,
                    Operation {
                        kind,
                        key,
                        owner,
                        lease,
                        expected,
                        successor: None,
                        announce: None,
                        record: RecordPart::Record(record),
                    },
                )
                .await;
            }
            // Settled on every answer, an error included: a notice still expected after a
            // release that failed would be taken for ours when another process's arrives,
            // and its waiter would sleep until the lease ends. (A failed release that did
            // land only wakes a waiter once more.)
            let decoded = code
                .and_then(|answer| answer.code())
                .and_then(|code| decode_release(kind, code, listening));
            if let Some(echo) = echo {
                echo.settle(matches!(&decoded, Ok(reply) if published(reply)));
            }
            decoded
        })
    }

    /// [`Backend::renew`](crate::backend::Backend::renew) of a plain, fair or fenced lock.
    pub(in crate::backend) fn plain_renew(
        &self,
        args: RenewArgs,
    ) -> BoxFuture<Result<bool, BackendError>> {
        let reply = self.submit(Operation {
            kind: OpKind::Renew,
            key: args.key,
            owner: args.owner,
            lease: args.lease,
            expected: 0,
            successor: None,
            announce: None,
            record: RecordPart::None,
        });
        Box::pin(async move {
            match reply.await?.code()? {
                1 => Ok(true),
                0 => Ok(false),
                other => Err(unknown_reply("a renewal", other)),
            }
        })
    }
}

/// An acquisition's reply code (a claim's record comes apart), decoded.
fn decode_acquire(kind: OpKind, code: i64) -> Result<Attempt, BackendError> {
    Ok(match (kind, code) {
        (_, scripts::ACQUIRED) => Attempt::Acquired,
        (OpKind::Acquire, scripts::LOST) => Attempt::Lost,
        (OpKind::Claim, scripts::HELD_FOR_OTHER_WORK) => Attempt::HeldForOtherWork,
        (_, scripts::BUSY_FOREVER) => Attempt::Busy(None),
        (_, pttl) if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
        (_, other) => return Err(unknown_reply("an acquisition", other)),
    })
}

/// A release's reply code, decoded; `listening`: this process's own subscriber is among
/// those a `PUBLISH` reached.
fn decode_release(kind: OpKind, code: i64, listening: bool) -> Result<ReleaseReply, BackendError> {
    let released = match (kind, code) {
        (_, scripts::NOT_HELD) => Released::NotHeld,
        (_, 0) => Released::StillHeld,
        (OpKind::HandOver, scripts::HANDED_OVER) => Released::HandedOver,
        // A re-sent store that already took effect finds its record: unlocked, and nothing
        // published now.
        (OpKind::Store, scripts::UNLOCKED) if listening => Released::Unlocked,
        (OpKind::Release | OpKind::Store, reached) if reached >= scripts::UNLOCKED => {
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

/// Whether a decoded release published an unlock message (it says how many others it
/// reached).
fn published(reply: &ReleaseReply) -> bool {
    reply.released == Released::Unlocked && reply.other_listeners.is_some()
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

    #[test]
    fn claims_and_stores_are_decoded_or_an_error() {
        use OpKind::*;
        assert_eq!(decode_acquire(Claim, -1).unwrap(), Attempt::Acquired);
        assert_eq!(
            decode_acquire(Claim, -7).unwrap(),
            Attempt::HeldForOtherWork
        );
        assert_eq!(
            decode_acquire(Claim, 250).unwrap(),
            Attempt::Busy(Some(Duration::from_millis(250)))
        );
        // A record comes apart (never as a code); a claim is never a reentry (LOST).
        for bad in [-5, -9, -3] {
            assert!(decode_acquire(Claim, bad).is_err(), "{bad}");
        }
        assert_eq!(decode_acquire(Acquire, -3).unwrap(), Attempt::Lost);
        assert!(decode_acquire(Acquire, -7).is_err());
        let stored = decode_release(Store, 3, true).unwrap();
        assert_eq!(
            stored,
            ReleaseReply {
                released: Released::Unlocked,
                other_listeners: Some(1)
            }
        );
        assert!(published(&stored));
        // Re-sent after it took effect: unlocked, nothing published now.
        let again = decode_release(Store, 1, true).unwrap();
        assert_eq!(again.released, Released::Unlocked);
        assert!(!published(&again));
        assert_eq!(
            decode_release(Store, 1, false).unwrap().released,
            Released::Unlocked
        );
        assert_eq!(
            decode_release(Store, -1, false).unwrap().released,
            Released::NotHeld
        );
        assert!(decode_release(Store, -7, false).is_err());
    }
}
