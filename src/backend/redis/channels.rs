//! The subscriber connection, classic or sharded: subscribing and unsubscribing channels
//! (one command per slot when sharded), confirmed in order.

use std::collections::BTreeMap;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::util::redis_keyslot;

/// The subscriber connection, classic or sharded.
#[derive(Clone)]
pub(super) struct Channels {
    pub(super) subscriber: SubscriberClient,
    pub(super) sharded: bool,
}

impl Channels {
    /// Sharded commands must not mix slots: one command per slot.
    fn by_slot(&self, channels: Vec<String>) -> Vec<Vec<String>> {
        if !self.sharded {
            return vec![channels];
        }
        let mut groups: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for channel in channels {
            groups
                .entry(redis_keyslot(channel.as_bytes()))
                .or_default()
                .push(channel);
        }
        groups.into_values().collect()
    }

    pub(super) async fn subscribe(&self, channels: Vec<String>) -> Result<(), Error> {
        if channels.is_empty() {
            return Ok(());
        }
        for group in self.by_slot(channels) {
            if self.sharded {
                // fred waits for SSUBSCRIBE's own reply.
                self.subscriber.ssubscribe(group).await?;
            } else {
                self.subscriber.subscribe(group).await?;
                self.processed().await?;
            }
        }
        Ok(())
    }

    /// Returns once Redis has processed every command sent before on the subscriber
    /// connection. fred answers SUBSCRIBE as soon as it is written (its replies come out of
    /// band and are dropped), so a waiter told "subscribed" on that answer could retry,
    /// find the lock busy, and miss the unlock published before Redis read the SUBSCRIBE:
    /// asleep until the lease ended (seen as two multi-locks stuck for 30 s). A PING on
    /// the same connection is answered in order, after the SUBSCRIBE.
    async fn processed(&self) -> Result<(), Error> {
        // Legacy pub/sub on a cluster goes to the node fred picks from the client id
        // (`cluster_hash_legacy_command`): the PING follows it there.
        let slot = redis_keyslot(self.subscriber.id().as_bytes());
        let ping = fred::types::CustomCommand::new_static(
            "PING",
            fred::types::ClusterHash::Custom(slot),
            false,
        );
        self.subscriber
            .custom::<Value, Value>(ping, Vec::new())
            .await
            .map(|_| ())
    }

    pub(super) async fn unsubscribe(&self, channels: Vec<String>) -> Result<(), Error> {
        // Nothing to send (an empty UNSUBSCRIBE would drop every channel).
        if channels.is_empty() {
            return Ok(());
        }
        for group in self.by_slot(channels) {
            if self.sharded {
                self.subscriber.sunsubscribe(group).await?;
            } else {
                self.subscriber.unsubscribe(group).await?;
            }
        }
        Ok(())
    }

    /// Subscribes again to every channel the client tracks (after a reconnect, a
    /// failover or a slot move).
    pub(super) async fn resubscribe(&self) -> Result<(), Error> {
        let tracked = if self.sharded {
            self.subscriber.tracked_shard_channels()
        } else {
            self.subscriber.tracked_channels()
        };
        let channels: Vec<String> = tracked.into_iter().map(|c| c.to_string()).collect();
        if channels.is_empty() {
            return Ok(());
        }
        self.subscribe(channels).await
    }
}
