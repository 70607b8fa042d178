//! Keeps the subscriber connection's channels in step with the names that have local
//! waiters, and turns unlock messages, reconnects and cluster changes into wake-ups.

use std::sync::Arc;
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::util::redis_keyslot;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

use super::channel_use::ChannelUse;
use super::channels::Channels;
use super::echoes::Echoes;
use super::messages::deliver_messages;
use super::names::{record_channel, waiting_channel};
use super::waiter_channels::WaiterChannels;
use crate::backend::Notices;
use crate::key::{KeyMap, LockKey};
use crate::telemetry::{throttled, TARGET};

/// Starts the tasks of one manager's subscriber connection.
pub(in crate::backend) fn spawn(
    runtime: &tokio::runtime::Handle,
    client: Client,
    subscriber: SubscriberClient,
    sharded: bool,
    notices: Notices,
    echoes: Arc<Echoes>,
) -> Vec<JoinHandle<()>> {
    let channels = Channels {
        subscriber,
        sharded,
    };
    let waiters = WaiterChannels::default();
    let mut tasks = vec![
        runtime.spawn(follow_waiters(
            channels.clone(),
            notices.clone(),
            echoes.clone(),
            waiters.clone(),
        )),
        runtime.spawn(deliver_messages(
            channels.subscriber.clone(),
            notices.clone(),
            echoes.clone(),
            waiters,
        )),
        runtime.spawn(resubscribe_on_reconnect(
            channels.clone(),
            notices.clone(),
            echoes.clone(),
        )),
    ];
    if client.is_clustered() {
        tasks.push(runtime.spawn(follow_cluster_changes(client, channels, notices, echoes)));
    }
    tasks
}

/// Subscribes a name's channel when its first local waiter appears and unsubscribes it when
/// the last one leaves. Changes are batched: one SUBSCRIBE / UNSUBSCRIBE (per slot when
/// sharded) for all names that changed meanwhile, sent in order from this one task. Two
/// names can share a channel (`a` and `{a}`): it stays until neither has waiters. Fair
/// waiters' own channels follow the same way (`waiter_channels`).
async fn follow_waiters(
    channels: Channels,
    notices: Notices,
    echoes: Arc<Echoes>,
    waiters: WaiterChannels,
) {
    // Each subscribed name's channel (the plain lock's, or the read-write lock's), and the
    // record channel of those whose first waiter takes the lock unless recorded.
    let mut subscribed: KeyMap<String> = KeyMap::default();
    let mut records_on: KeyMap<String> = KeyMap::default();
    let mut names_on = ChannelUse::default();
    let mut retry_delay = Duration::from_millis(50);
    let mut failed: Vec<(LockKey, bool)> = Vec::new();
    let mut failed_waiters = Vec::new();
    loop {
        if failed.is_empty() && failed_waiters.is_empty() {
            match waiters.flush_at() {
                Some(at) => tokio::select! {
                    _ = notices.changed() => {}
                    _ = tokio::time::sleep_until(at) => {}
                },
                None => notices.changed().await,
            }
        }
        // Let the tasks woken with the one that signalled (replies read from the socket
        // together) register too: one command for a burst of waiters, at no wait.
        tokio::task::yield_now().await;
        let mut waiter_changes = std::mem::take(&mut failed_waiters);
        waiter_changes.extend(notices.take_waiter_changes());
        if !waiter_changes.is_empty() || waiters.flush_at().is_some() {
            failed_waiters = waiters.apply(&channels, &notices, waiter_changes).await;
        }
        let mut changes = std::mem::take(&mut failed);
        changes.extend(notices.take_changes());
        let (mut add, mut remove, mut switch) = (Vec::new(), Vec::new(), Vec::new());
        for (key, wanted) in changes {
            match (wanted, subscribed.get(&key)) {
                (true, None) => add.push(key),
                (false, Some(_)) => remove.push(key),
                // The name's waiters now wait for the other kind of lock (its queue was made
                // again meanwhile): leave the old channel, then take the new one.
                (true, Some(channel))
                    if *channel != waiting_channel(&key, notices.waiting_kind(&key)) =>
                {
                    switch.push(key.clone());
                    remove.push(key);
                }
                (true, Some(_)) => notices.subscribed(std::slice::from_ref(&key)),
                (false, None) => {}
            }
        }
        if !add.is_empty() {
            let wanted: Vec<String> = add
                .iter()
                .map(|key| waiting_channel(key, notices.waiting_kind(key)))
                .collect();
            let records: Vec<(LockKey, String)> = add
                .iter()
                .filter(|key| notices.waits_for_records(key))
                .map(|key| (key.clone(), record_channel(key)))
                .collect();
            let all: Vec<String> = wanted
                .iter()
                .cloned()
                .chain(records.iter().map(|(_, channel)| channel.clone()))
                .collect();
            match channels.subscribe(names_on.first_of(&all)).await {
                Ok(()) => {
                    names_on.add(&all);
                    echoes.subscribed(&add);
                    notices.subscribed(&add);
                    subscribed.extend(add.into_iter().zip(wanted));
                    records_on.extend(records);
                }
                Err(e) => {
                    throttled!(warn, error = %e, "tower-lock: cannot subscribe to unlock channels; retrying");
                    failed.extend(add.into_iter().map(|k| (k, true)));
                }
            }
        }
        if !remove.is_empty() {
            let leaving: Vec<String> = remove
                .iter()
                .flat_map(|key| [subscribed.get(key), records_on.get(key)])
                .flatten()
                .cloned()
                .collect();
            match channels.unsubscribe(names_on.last_of(&leaving)).await {
                Ok(()) => {
                    names_on.remove(&leaving);
                    echoes.unsubscribed(&remove);
                    for key in &remove {
                        subscribed.remove(key);
                        records_on.remove(key);
                    }
                }
                Err(e) => {
                    throttled!(warn, error = %e, "tower-lock: cannot unsubscribe from unlock channels; retrying");
                    failed.extend(remove.into_iter().map(|k| (k, false)));
                }
            }
        }
        // Taken again on the next round (after the retry pause), on the channel wanted now.
        failed.extend(switch.into_iter().map(|key| (key, true)));
        if failed.is_empty() && failed_waiters.is_empty() {
            retry_delay = Duration::from_millis(50);
        } else {
            tokio::time::sleep(retry_delay).await;
            for ((key, owner), wanted) in &mut failed_waiters {
                *wanted = notices.is_waiter_watched(key, owner);
            }
            retry_delay = (retry_delay * 2).min(Duration::from_secs(2));
            // The wanted state may have changed while we slept: re-read it.
            failed = failed
                .into_iter()
                .map(|(key, _)| {
                    let wanted = notices.is_watched(&key);
                    (key, wanted)
                })
                .collect();
        }
    }
}

/// Subscribes again, retrying with backoff, then lets every waiting head retry (messages
/// may have been missed meanwhile).
async fn resubscribe_and_resync(channels: &Channels, notices: &Notices, echoes: &Echoes) {
    let mut delay = Duration::from_millis(50);
    while let Err(e) = channels.resubscribe().await {
        throttled!(warn, error = %e, "tower-lock: cannot resubscribe to unlock channels; retrying");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(2));
    }
    echoes.forget_expected();
    notices.resync();
}

/// After a reconnect the subscriptions are gone and messages may have been missed.
async fn resubscribe_on_reconnect(channels: Channels, notices: Notices, echoes: Arc<Echoes>) {
    let mut reconnects = channels.subscriber.reconnect_rx();
    loop {
        match reconnects.recv().await {
            Ok(_) | Err(RecvError::Lagged(_)) => {
                resubscribe_and_resync(&channels, &notices, &echoes).await
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// A failover or a slot move drops sharded subscriptions of the moved slots without a
/// reconnect (the server unsubscribes them, and fred does not report it). When the command
/// connection is redirected (its cluster state changes), or when the once-a-second check
/// made while this process has waiters finds a subscribed slot served by another primary
/// than the subscriber's, refresh the subscriber's routing and subscribe again.
async fn follow_cluster_changes(
    client: Client,
    channels: Channels,
    notices: Notices,
    echoes: Arc<Echoes>,
) {
    let mut redirected = client.cluster_change_rx();
    let mut check = tokio::time::interval(Duration::from_secs(1));
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let changed = tokio::select! {
            change = redirected.recv() => match change {
                Ok(_) | Err(RecvError::Lagged(_)) => true,
                Err(RecvError::Closed) => return,
            },
            _ = check.tick() => channels.sharded && notices.has_waiters() && subscriptions_moved(&client, &channels).await,
        };
        if changed {
            if let Err(e) = channels.subscriber.sync_cluster().await {
                tracing::warn!(target: TARGET, error = %e, "cannot refresh the cluster routing of the subscriber");
            }
            resubscribe_and_resync(&channels, &notices, &echoes).await;
        }
    }
}

/// Whether a subscribed channel's slot is now served by another primary than the one the
/// subscriber's routing table names (`CLUSTER SLOTS` asked through the command client).
async fn subscriptions_moved(client: &Client, channels: &Channels) -> bool {
    let tracked = channels.subscriber.tracked_shard_channels();
    if tracked.is_empty() {
        return false;
    }
    let Some(routing) = channels.subscriber.cached_cluster_state() else {
        return true;
    };
    let Ok(reply) = client
        .custom::<Value, _>(fred::cmd!("CLUSTER"), vec!["SLOTS"])
        .await
    else {
        return false;
    };
    let ranges: Vec<(u16, u16, String)> = reply
        .into_array()
        .into_iter()
        .filter_map(|range| {
            let range = range.into_array();
            let start = u16::try_from(range.first()?.as_i64()?).ok()?;
            let end = u16::try_from(range.get(1)?.as_i64()?).ok()?;
            let primary = range.get(2)?.clone().into_array();
            let host = primary.first()?.as_string()?;
            let port = primary.get(1)?.as_i64()?;
            Some((start, end, format!("{host}:{port}")))
        })
        .collect();
    tracked.iter().any(|channel| {
        let slot = redis_keyslot(channel.as_bytes());
        let serving = ranges
            .iter()
            .find(|(start, end, _)| *start <= slot && slot <= *end)
            .map(|(_, _, primary)| primary.as_str());
        let ours = routing
            .get_server(slot)
            .map(|s| format!("{}:{}", s.host, s.port));
        serving != ours.as_deref()
    })
}
