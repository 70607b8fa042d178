//! The channels of the subscriber connection, counted by the names that use them (two
//! names can share one: `k` and `{k}`).

use std::collections::HashMap;

/// How many subscribed names share each channel.
#[derive(Default)]
pub(in crate::backend) struct ChannelUse(HashMap<String, usize>);

impl ChannelUse {
    /// The channels that subscribing names on `channels` adds (those no subscribed name
    /// uses yet).
    pub(in crate::backend) fn first_of(&self, channels: &[String]) -> Vec<String> {
        let mut new: Vec<String> = channels
            .iter()
            .filter(|channel| !self.0.contains_key(*channel))
            .cloned()
            .collect();
        new.sort_unstable();
        new.dedup();
        new
    }

    /// The channels that unsubscribing names on `channels` leaves without names.
    pub(in crate::backend) fn last_of(&self, channels: &[String]) -> Vec<String> {
        let mut leaving: HashMap<String, usize> = HashMap::new();
        for channel in channels {
            *leaving.entry(channel.clone()).or_default() += 1;
        }
        leaving
            .into_iter()
            .filter(|(channel, n)| self.0.get(channel).is_none_or(|names| names <= n))
            .map(|(channel, _)| channel)
            .collect()
    }

    pub(in crate::backend) fn add(&mut self, channels: &[String]) {
        for channel in channels {
            *self.0.entry(channel.clone()).or_default() += 1;
        }
    }

    pub(in crate::backend) fn remove(&mut self, channels: &[String]) {
        for channel in channels {
            if let Some(names) = self.0.get_mut(channel) {
                *names -= 1;
                if *names == 0 {
                    self.0.remove(channel);
                }
            }
        }
    }
}
