//! Keeps the subscriber connection's channels in step with the names that have local
//! waiters, and turns unlock messages and reconnects into wake-ups.

use std::collections::HashSet;
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use super::scripts::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::key::LockKey;
use crate::wait::WaitQueues;

/// Starts the three tasks of one manager's subscriber connection.
pub(super) fn spawn(subscriber: SubscriberClient, queues: WaitQueues) -> Vec<JoinHandle<()>> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::error!(
            "tower-lock: the Redis lock manager was built outside a Tokio runtime; waiters \
             will only retry when the holder's lease ends"
        );
        return Vec::new();
    };
    vec![
        runtime.spawn(follow_waiters(subscriber.clone(), queues.clone())),
        runtime.spawn(deliver_messages(subscriber.clone(), queues.clone())),
        runtime.spawn(resubscribe_on_reconnect(subscriber, queues)),
    ]
}

/// Subscribes a name's channel when its first local waiter appears and unsubscribes it when
/// the last one leaves. Changes are batched: one SUBSCRIBE / UNSUBSCRIBE for all names that
/// changed meanwhile, sent in order from this one task.
async fn follow_waiters(subscriber: SubscriberClient, queues: WaitQueues) {
    let mut subscribed: HashSet<LockKey> = HashSet::new();
    let mut retry_delay = Duration::from_millis(50);
    let mut failed: Vec<(LockKey, bool)> = Vec::new();
    loop {
        if failed.is_empty() {
            queues.changed().await;
        }
        let mut changes = std::mem::take(&mut failed);
        changes.extend(queues.take_changes());
        let (mut add, mut remove) = (Vec::new(), Vec::new());
        for (key, wanted) in changes {
            match (wanted, subscribed.contains(&key)) {
                (true, false) => add.push(key),
                (false, true) => remove.push(key),
                (true, true) => queues.subscribed(std::slice::from_ref(&key)),
                (false, false) => {}
            }
        }
        if !add.is_empty() {
            let channels: Vec<String> = add.iter().map(LockKey::channel).collect();
            match subscriber.subscribe(channels).await {
                Ok(()) => {
                    queues.subscribed(&add);
                    subscribed.extend(add);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "tower-lock: cannot subscribe to unlock channels; retrying");
                    failed.extend(add.into_iter().map(|k| (k, true)));
                }
            }
        }
        if !remove.is_empty() {
            let channels: Vec<String> = remove.iter().map(LockKey::channel).collect();
            match subscriber.unsubscribe(channels).await {
                Ok(()) => {
                    for key in &remove {
                        subscribed.remove(key);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "tower-lock: cannot unsubscribe from unlock channels; retrying");
                    failed.extend(remove.into_iter().map(|k| (k, false)));
                }
            }
        }
        if failed.is_empty() {
            retry_delay = Duration::from_millis(50);
        } else {
            tokio::time::sleep(retry_delay).await;
            retry_delay = (retry_delay * 2).min(Duration::from_secs(2));
            // The wanted state may have changed while we slept: re-read it.
            failed = failed
                .into_iter()
                .map(|(key, _)| {
                    let wanted = queues.is_watched(&key);
                    (key, wanted)
                })
                .collect();
        }
    }
}

/// Turns unlock messages into wake-ups of local heads.
async fn deliver_messages(subscriber: SubscriberClient, queues: WaitQueues) {
    let mut messages = subscriber.message_rx();
    loop {
        match messages.recv().await {
            Ok(message) => {
                let Some(key) = LockKey::from_channel(&message.channel) else {
                    continue;
                };
                match message.value.as_str().as_deref() {
                    Some(UNLOCK_MESSAGE) => queues.unlocked(&key),
                    Some(READ_UNLOCK_MESSAGE) => queues.unlocked_all(&key),
                    _ => {}
                }
            }
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "tower-lock: unlock messages were dropped; every waiter retries"
                );
                queues.resync();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// After a reconnect the subscriptions are gone and messages may have been missed:
/// subscribe again, then let every waiting head retry.
async fn resubscribe_on_reconnect(subscriber: SubscriberClient, queues: WaitQueues) {
    let mut reconnects = subscriber.reconnect_rx();
    loop {
        match reconnects.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {
                let mut delay = Duration::from_millis(50);
                while let Err(e) = resubscribe(&subscriber).await {
                    tracing::warn!(error = %e, "tower-lock: cannot resubscribe after a reconnect; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
                queues.resync();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

async fn resubscribe(subscriber: &SubscriberClient) -> Result<(), Error> {
    let channels: Vec<String> = subscriber
        .tracked_channels()
        .into_iter()
        .map(|c| c.to_string())
        .collect();
    if channels.is_empty() {
        return Ok(());
    }
    subscriber.subscribe(channels).await
}
