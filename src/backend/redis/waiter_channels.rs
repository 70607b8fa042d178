//! The fair waiters' channels on the subscriber connection: one per waiter
//! (`redisson_lock__channel:{name}:<owner>`), subscribed and unsubscribed in batches with
//! the names' channels, and the way back from a channel to its waiter.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use super::channels::Channels;
use crate::backend::redis::names::fair_channel;
use crate::backend::Notices;
use crate::key::{LockKey, OwnerId};
use crate::telemetry::throttled;

/// A fair waiter: its name and owner.
type WaiterId = (LockKey, OwnerId);

/// Channels of waiters gone are unsubscribed together: when this many wait, or this long
/// after the first of them left. (Waiters leave one by one as each takes the lock; a
/// channel kept a little longer costs nothing, and a message on it finds nobody.)
const LEAVING_BATCH: usize = 32;
const LEAVING_LINGER: Duration = Duration::from_millis(50);

/// The subscribed waiter channels, each with its waiter, and those to unsubscribe.
#[derive(Clone, Default)]
pub(in crate::backend) struct WaiterChannels {
    known: Arc<Mutex<HashMap<String, WaiterId>>>,
    leaving: Arc<Mutex<Leaving>>,
}

#[derive(Default)]
struct Leaving {
    channels: Vec<(String, WaiterId)>,
    since: Option<Instant>,
}

impl WaiterChannels {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, WaiterId>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn leaving(&self) -> MutexGuard<'_, Leaving> {
        self.leaving.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the channels of waiters gone are due to be unsubscribed, if any are.
    pub(in crate::backend) fn flush_at(&self) -> Option<Instant> {
        self.leaving().since.map(|since| since + LEAVING_LINGER)
    }

    /// The waiter whose channel `channel` is, if it is one of ours.
    pub(in crate::backend) fn waiter(&self, channel: &str) -> Option<WaiterId> {
        self.lock().get(channel).cloned()
    }

    /// Subscribes the channels of new waiters at once and unsubscribes those of waiters
    /// gone in batches (see [`LEAVING_BATCH`]), one command each (per slot when sharded). A
    /// newly subscribed waiter looks again (a release just before its subscription is not
    /// missed). Returns the changes that failed, to be tried again.
    pub(in crate::backend) async fn apply(
        &self,
        channels: &Channels,
        notices: &Notices,
        changes: Vec<(WaiterId, bool)>,
    ) -> Vec<(WaiterId, bool)> {
        let mut failed = Vec::new();
        let (mut add, mut remove) = (Vec::new(), Vec::new());
        for (id, wanted) in changes {
            let channel = fair_channel(&id.0, &id.1);
            match (wanted, self.lock().contains_key(&channel)) {
                (true, false) => add.push((channel, id)),
                (false, true) => remove.push((channel, id)),
                (true, true) => notices.turn(&id.0, &id.1),
                (false, false) => {}
            }
        }
        if !add.is_empty() {
            // Known before the subscription is in place: a message may follow at once.
            self.lock().extend(add.iter().cloned());
            let names = add.iter().map(|(channel, _)| channel.clone()).collect();
            match channels.subscribe(names).await {
                Ok(()) => {
                    for (_, (key, owner)) in &add {
                        notices.turn(key, owner);
                    }
                }
                Err(e) => {
                    throttled!(warn, error = %e, "tower-lock: cannot subscribe to fair waiters' channels; retrying");
                    let mut known = self.lock();
                    for (channel, id) in add {
                        known.remove(&channel);
                        failed.push((id, true));
                    }
                }
            }
        }
        let remove = {
            let mut leaving = self.leaving();
            if !remove.is_empty() && leaving.since.is_none() {
                leaving.since = Some(Instant::now());
            }
            leaving.channels.extend(remove);
            let due = leaving
                .since
                .is_some_and(|since| since + LEAVING_LINGER <= Instant::now());
            if leaving.channels.len() >= LEAVING_BATCH || due {
                leaving.since = None;
                std::mem::take(&mut leaving.channels)
            } else {
                Vec::new()
            }
        };
        if !remove.is_empty() {
            let names = remove.iter().map(|(channel, _)| channel.clone()).collect();
            match channels.unsubscribe(names).await {
                Ok(()) => {
                    let mut known = self.lock();
                    for (channel, _) in &remove {
                        known.remove(channel);
                    }
                }
                Err(e) => {
                    throttled!(warn, error = %e, "tower-lock: cannot unsubscribe from fair waiters' channels; retrying");
                    failed.extend(remove.into_iter().map(|(_, id)| (id, false)));
                }
            }
        }
        failed
    }
}
