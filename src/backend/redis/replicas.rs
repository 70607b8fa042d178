//! Replica acknowledgement: WAIT after an acquisition (Redisson's `checkLockSyncedSlaves`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use fred::prelude::*;
use fred::types::ClusterHash;

use super::{RedisBackend, DEFAULT_COMMAND_TIMEOUT};
use crate::backend::{Attempt, Backend, ReleaseArgs};
use crate::error::BackendError;
use crate::key::{LockKey, OwnerId};
use crate::kind::LockKind;
use crate::telemetry::TARGET;

/// How many replicas must acknowledge an acquisition; see [`RedisBackend::replica_ack`].
#[derive(Debug, Clone, Copy)]
pub struct ReplicaAck {
    /// Replicas that must have the lock.
    pub replicas: u32,
    /// How long WAIT may take.
    pub timeout: Duration,
    /// What to do when fewer replicas acknowledge in time.
    pub on_missing: MissingAck,
}

/// What an acquisition does when too few replicas acknowledged it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MissingAck {
    /// Release the lock and fail the acquisition (`Unavailable`, HTTP 503): never hold a
    /// lock that a failover could lose.
    Release,
    /// Keep the lock, trace a warning and count it
    /// ([`RedisBackend::unacknowledged_acquisitions`]): availability first.
    Proceed,
}

impl RedisBackend {
    /// WAITs for replicas after an acquisition and applies the policy.
    pub(in crate::backend) async fn await_replicas(
        &self,
        ack: ReplicaAck,
        key: LockKey,
        kind: LockKind,
        owner: OwnerId,
        lease: Duration,
    ) -> Result<Attempt, BackendError> {
        // WAIT counts the writes of this connection: send it to the node that took the lock.
        let options = Options {
            cluster_hash: Some(ClusterHash::Custom(fred::util::redis_keyslot(
                key.as_str().as_bytes(),
            ))),
            timeout: Some(
                ack.timeout
                    + self
                        .inner
                        .options
                        .timeout
                        .unwrap_or(DEFAULT_COMMAND_TIMEOUT),
            ),
            fail_fast: true,
            ..Default::default()
        };
        let timeout_ms = super::commands::millis(ack.timeout);
        let acked: Result<i64, _> = self
            .inner
            .commands
            .first()
            .with_options(&options)
            .wait(i64::from(ack.replicas), timeout_ms)
            .await;
        let acked = acked.unwrap_or_else(|error| {
            tracing::warn!(target: TARGET, %key, %error, "WAIT for replicas failed");
            0
        });
        if acked >= i64::from(ack.replicas) {
            return Ok(Attempt::Acquired);
        }
        let message = format!(
            "`{key}` was acquired but only {acked} of {} replicas acknowledged it within {:?}",
            ack.replicas, ack.timeout
        );
        match ack.on_missing {
            MissingAck::Proceed => {
                self.inner.unacknowledged.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(target: TARGET, "{message}; keeping it");
                Ok(Attempt::Acquired)
            }
            MissingAck::Release => {
                let released = self
                    .release(ReleaseArgs {
                        key: key.clone(),
                        kind,
                        owner,
                        lease,
                        expected: 1,
                        successor: None,
                        announce_run: None,
                        record: None,
                    })
                    .await;
                tracing::warn!(target: TARGET, ?released, "{message}; released it");
                Err(BackendError::new(format!("{message}; released it")))
            }
        }
    }
}
