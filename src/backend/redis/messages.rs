//! Unlock messages on the subscriber connection: another process's unlock wakes the local
//! head (this process's own come back too, and are told apart), a fair waiter's message is
//! its turn, and a run that a tower-lock process announces counts as its turn's length.

use std::sync::Arc;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use tokio::sync::broadcast::error::RecvError;

use super::echoes::Echoes;
use super::names::{
    keys_of_channel, keys_of_read_write_channel, keys_of_record_channel, keys_of_semaphore_channel,
};
use super::scripts::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::backend::redis::waiter_channels::WaiterChannels;
use crate::backend::Notices;
use crate::telemetry::TARGET;

/// Turns unlock messages of other processes into wake-ups of local heads (our own come
/// back too: they are taken off `echoes`), and a fair waiter's message into its turn.
pub(in crate::backend) async fn deliver_messages(
    subscriber: SubscriberClient,
    notices: Notices,
    echoes: Arc<Echoes>,
    waiters: WaiterChannels,
) {
    let mut messages = subscriber.message_rx();
    // A run's announcement (`-<holds>`) and the unlock message after it come from one
    // script run: nothing comes between them on their channel.
    let mut announced: Option<(String, u32)> = None;
    loop {
        match messages.recv().await {
            Ok(message) => {
                if let Some((key, owner)) = waiters.waiter(&message.channel) {
                    notices.turn(&key, &owner);
                    continue;
                }
                // A record sent to the waiters of a lock taken unless recorded (on
                // tower-lock's record channel, before the unlock message of its release);
                // the message's own bytes, not a copy (a record may be large).
                if let Some(keys) = keys_of_record_channel(&message.channel) {
                    let record = match message.value {
                        Value::Bytes(record) => Some(record),
                        Value::String(record) => Some(record.into_inner()),
                        _ => None,
                    };
                    if let Some(record) = record {
                        for key in keys {
                            notices.recorded(&key, &record);
                        }
                    }
                    continue;
                }
                let text = message.value.as_str();
                // A read-write lock's messages: `1` (a write release) lets every reader
                // in, `0` (a read release) the next waiter; this process's own come back
                // too, and are taken off `echoes`.
                if message.channel.starts_with("redisson_rwlock:") {
                    for key in keys_of_read_write_channel(&message.channel) {
                        match text.as_deref() {
                            Some(UNLOCK_MESSAGE | READ_UNLOCK_MESSAGE) if echoes.take(&key) => {}
                            Some(UNLOCK_MESSAGE) => notices.unlocked(&key),
                            Some(READ_UNLOCK_MESSAGE) => notices.unlocked_all(&key),
                            _ => {}
                        }
                    }
                    continue;
                }
                // A semaphore's messages carry the permits now available (Redisson's
                // rule): the next local waiter looks (and, if it gets permits, the one
                // behind it).
                if message.channel.starts_with("redisson_sc:") {
                    for key in keys_of_semaphore_channel(&message.channel) {
                        if !echoes.take(&key) {
                            notices.unlocked(&key);
                        }
                    }
                    continue;
                }
                if let Some(holds) = text.as_deref().and_then(announced_run) {
                    announced = Some((message.channel.to_string(), holds));
                    continue;
                }
                let run = announced
                    .take()
                    .filter(|(channel, _)| *channel == *message.channel)
                    .map(|(_, holds)| holds);
                for key in keys_of_channel(&message.channel) {
                    match (text.as_deref(), run) {
                        (Some(UNLOCK_MESSAGE), _) if echoes.take(&key) => {}
                        (Some(UNLOCK_MESSAGE), Some(holds)) => {
                            notices.unlocked_after_run(&key, holds)
                        }
                        (Some(UNLOCK_MESSAGE), None) => notices.unlocked(&key),
                        (Some(READ_UNLOCK_MESSAGE), _) => notices.unlocked_all(&key),
                        _ => {}
                    }
                }
            }
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    target: TARGET,
                    missed,
                    "tower-lock: unlock messages were dropped; every waiter retries"
                );
                echoes.forget_expected();
                notices.resync();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// The holds of a run that a tower-lock release announced (`-<holds>`), if `text` is one.
fn announced_run(text: &str) -> Option<u32> {
    text.strip_prefix('-')?.parse().ok()
}
