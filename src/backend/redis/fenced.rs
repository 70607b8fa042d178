//! Fenced locks on Redis, in Redisson's `RFencedLock` layout (`fenced.lua`): the
//! plain lock's hash plus a token counter that every acquisition INCRs in the same step.
//! One script call per acquisition; release and renewal go with the plain lock's
//! operations (the hash is the same).

use std::time::Duration;

use fred::prelude::*;

use crate::backend::redis::commands::{eval_script, millis, script_call};
use crate::backend::redis::{names, scripts, RedisBackend};
use crate::backend::{AcquireArgs, Attempt, BoxFuture};
use crate::error::BackendError;
use crate::kind::LockKind;

/// The fenced lock's acquisition (`fenced.lua`): the plain lock's, plus Redisson's
/// `RFencedLock` token counter INCRed in the same step. It publishes nothing.
pub(in crate::backend) fn script(sharded: bool) -> String {
    let _ = sharded;
    include_str!("fenced.lua").to_owned()
}

impl RedisBackend {
    /// [`Backend::acquire`](crate::backend::Backend::acquire) of a fenced lock: a first
    /// acquisition (with the replica acknowledgement, if configured) or a reentry.
    pub(in crate::backend) fn fenced_acquire(
        &self,
        args: AcquireArgs,
    ) -> BoxFuture<Result<Attempt, BackendError>> {
        let backend = self.clone();
        Box::pin(async move {
            let inner = &backend.inner;
            let keys = [
                args.key.as_str().to_owned(),
                names::fencing_tokens(&args.key),
            ];
            let arguments = || {
                script_call(
                    &inner.fenced,
                    &keys,
                    [
                        Value::from(millis(args.lease)),
                        Value::from(args.owner.as_str()),
                        Value::from(i64::from(args.expected)),
                    ],
                )
            };
            let client = inner.next_client();
            let reply =
                eval_script(client, &inner.options, &inner.fenced, &args.key, arguments).await?;
            let attempt = decode(reply).map_err(|detail| {
                BackendError::new(format!(
                    "Redis rejected the fenced lock acquisition of `{}`: {detail}",
                    args.key
                ))
            })?;
            // Replica acknowledgement concerns new holders only (a reentry changes no owner).
            let ack = inner.replica_ack.filter(|_| args.expected == 0);
            match (attempt, ack) {
                (Attempt::Fenced(token), Some(ack)) => {
                    let acked = Box::pin(backend.await_replicas(
                        ack,
                        args.key,
                        LockKind::Fenced,
                        args.owner,
                        args.lease,
                    ))
                    .await?;
                    Ok(match acked {
                        Attempt::Acquired => Attempt::Fenced(token),
                        other => other,
                    })
                }
                (attempt, _) => Ok(attempt),
            }
        })
    }
}

/// The script's reply, decoded exhaustively (`Err`: what was wrong with it).
fn decode(reply: Value) -> Result<Attempt, String> {
    let Value::Array(parts) = reply else {
        return Err(format!(
            "{} (does the lock or its token key hold other data?)",
            reply.as_string().unwrap_or_default()
        ));
    };
    let number = |at: usize| match parts.get(at) {
        Some(Value::Integer(n)) => Ok(*n),
        other => Err(format!(
            "the script answered {other:?}, which it never answers"
        )),
    };
    Ok(match number(0)? {
        scripts::ACQUIRED => {
            let token = number(1)?;
            // A counter that is not a positive integer was written by someone else.
            match u64::try_from(token) {
                Ok(token) if token > 0 => Attempt::Fenced(token),
                _ => return Err(format!("the token counter holds {token}")),
            }
        }
        scripts::LOST => Attempt::Lost,
        scripts::BUSY_FOREVER => Attempt::Busy(None),
        pttl if pttl >= 0 => Attempt::Busy(Some(Duration::from_millis(pttl as u64))),
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
        let array = |values: &[i64]| Value::Array(values.iter().map(|v| Value::from(*v)).collect());
        assert_eq!(decode(array(&[-1, 7])), Ok(Attempt::Fenced(7)));
        assert_eq!(decode(array(&[-3])), Ok(Attempt::Lost));
        assert_eq!(decode(array(&[-2])), Ok(Attempt::Busy(None)));
        assert_eq!(
            decode(array(&[250])),
            Ok(Attempt::Busy(Some(Duration::from_millis(250))))
        );
        for bad in [array(&[-1]), array(&[-1, 0]), array(&[-9]), array(&[])] {
            assert!(decode(bad).is_err());
        }
        let error = decode(Value::from("WRONGTYPE Operation")).unwrap_err();
        assert!(
            error.contains("WRONGTYPE") && error.contains("other data"),
            "{error}"
        );
    }
}
