//! Flights in one process: the requests of one coalescing key that arrive while one of
//! them is out asking the backend wait for it in memory, so that a process sends one
//! acquisition per key however many of its requests want it.
//!
//! Most flights have no follower (distinct keys): the channel that tells followers is made
//! by the first of them, so that a lone leader costs a map entry and nothing more.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use super::outcome::Outcome;

/// What a flight's followers hear from: the leader's word, once.
type Tell = Arc<watch::Sender<Option<Outcome>>>;

/// The flights of one layer, by key digest (a layer's lock names are made from it).
#[derive(Default)]
pub(super) struct Flights {
    shards: [FlightShard; SHARDS],
}

/// Open flights, split by digest: every request opens and closes one, so that requests on
/// different threads seldom take the same mutex or pass its cache lines back and forth
/// (one map cost a coalesced request on distinct keys a tenth of its time in process).
const SHARDS: usize = 16;

/// One part of the open flights, on a cache line of its own.
#[derive(Default)]
#[repr(align(64))]
struct FlightShard(Mutex<OpenFlights>);

type OpenFlights = HashMap<[u8; 32], Option<Tell>, BuildHasherDefault<DigestHasher>>;

/// What a request is in its key's flight.
pub(super) enum Seat {
    /// The first: it asks the backend, and tells the others what came of it.
    Leader(FlightLead),
    /// Another: it waits for the leader's word.
    Follower(watch::Receiver<Option<Outcome>>),
}

impl Flights {
    /// Joins the flight of the key whose digest is `digest`, or opens one.
    pub(super) fn board(self: &Arc<Self>, digest: &[u8; 32]) -> Seat {
        let mut open = self.shard(digest);
        if let Some(flight) = open.get_mut(digest) {
            let tell = flight.get_or_insert_with(|| Arc::new(watch::Sender::new(None)));
            return Seat::Follower(tell.subscribe());
        }
        open.insert(*digest, None);
        Seat::Leader(FlightLead {
            flights: self.clone(),
            digest: *digest,
            told: false,
        })
    }

    /// The open flights that `digest`'s would be among (its ninth byte picks them: the
    /// maps hash the first eight).
    fn shard(&self, digest: &[u8; 32]) -> MutexGuard<'_, OpenFlights> {
        let shard = &self.shards[usize::from(digest[8]) % SHARDS];
        shard.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every part of the open flights, one after another (for counts).
    fn each_shard(&self) -> impl Iterator<Item = MutexGuard<'_, OpenFlights>> {
        self.shards
            .iter()
            .map(|shard| shard.0.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// How many flights are open (tests drive it back to zero).
    pub(super) fn open(&self) -> usize {
        self.each_shard().map(|open| open.len()).sum()
    }

    /// How many requests wait for their flight's leader.
    pub(super) fn followers(&self) -> usize {
        self.each_shard()
            .map(|open| {
                open.values()
                    .flatten()
                    .map(|tell| tell.receiver_count())
                    .sum::<usize>()
            })
            .sum()
    }

    /// Closes the flight of `digest` and tells its followers, if it has any.
    fn close(&self, digest: &[u8; 32], outcome: impl FnOnce() -> Outcome) {
        let flight = self.shard(digest).remove(digest);
        if let Some(Some(tell)) = flight {
            tell.send_replace(Some(outcome()));
        }
    }
}

/// A flight's leader: closes the flight when it tells its outcome, and if it goes away
/// without a word, tells the followers to lead in turn (so that none waits for nothing).
pub(super) struct FlightLead {
    flights: Arc<Flights>,
    digest: [u8; 32],
    told: bool,
}

impl FlightLead {
    /// Tells the followers. The flight is closed first (in the same step, under the map's
    /// lock): a request that comes after the outcome is known starts a flight of its own
    /// rather than take an outcome it did not wait for.
    pub(super) fn tell(self, outcome: Outcome) {
        self.tell_with(|| outcome);
    }

    /// Tells the followers the outcome that `outcome` makes, made only if there are any
    /// (as [`tell`](Self::tell)).
    pub(super) fn tell_with(mut self, outcome: impl FnOnce() -> Outcome) {
        self.told = true;
        self.flights.close(&self.digest, outcome);
    }
}

impl Drop for FlightLead {
    fn drop(&mut self) {
        if !self.told {
            self.flights.close(&self.digest, || Outcome::LeadNext);
        }
    }
}

/// Hashes a key digest (SHA-256: its first eight bytes are as good as a hash gets) without
/// hashing it again.
#[derive(Default)]
pub(super) struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn write(&mut self, bytes: &[u8]) {
        // The digest's bytes come in one piece; a length prefix (a `usize`) adds nothing.
        for (n, byte) in bytes.iter().take(8).enumerate() {
            self.0 ^= u64::from(*byte) << (8 * n);
        }
    }

    fn write_usize(&mut self, _length: usize) {}

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Boards `digest`'s flight, which must open: its leader.
    fn leads(flights: &Arc<Flights>, digest: &[u8; 32]) -> FlightLead {
        match flights.board(digest) {
            Seat::Leader(lead) => lead,
            Seat::Follower(_) => panic!("the first of a key leads"),
        }
    }

    /// Boards `digest`'s open flight: what its follower hears.
    fn follows(flights: &Arc<Flights>, digest: &[u8; 32]) -> watch::Receiver<Option<Outcome>> {
        match flights.board(digest) {
            Seat::Follower(hear) => hear,
            Seat::Leader(_) => panic!("the next of a key follows"),
        }
    }

    #[test]
    fn followers_hear_their_leader_and_a_lone_leader_makes_no_channel() {
        let flights = Arc::new(Flights::default());
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let lone = leads(&flights, &a);
        assert!(matches!(flights.shard(&a).get(&a), Some(None)));
        let lead = leads(&flights, &b);
        let mut hear = follows(&flights, &b);
        assert_eq!((flights.open(), flights.followers()), (2, 1));
        lead.tell(Outcome::RunYourselves);
        assert!(matches!(
            hear.borrow_and_update().as_ref(),
            Some(Outcome::RunYourselves)
        ));
        drop(lone);
        assert_eq!(flights.open(), 0);
        // A leader gone without a word: its followers lead in turn.
        let lead = leads(&flights, &a);
        let hear = follows(&flights, &a);
        drop(lead);
        assert!(matches!(hear.borrow().as_ref(), Some(Outcome::LeadNext)));
    }

    /// A leader without followers makes no outcome (its response is not copied for
    /// nobody); one with followers makes it once, for all of them.
    #[test]
    fn an_outcome_is_made_only_for_followers() {
        let flights = Arc::new(Flights::default());
        let lone = leads(&flights, &[3; 32]);
        lone.tell_with(|| panic!("nobody follows: nothing to make"));
        let lead = leads(&flights, &[4; 32]);
        let hears: Vec<_> = (0..3).map(|_| follows(&flights, &[4; 32])).collect();
        let mut made = 0;
        lead.tell_with(|| {
            made += 1;
            Outcome::RunYourselves
        });
        assert_eq!(made, 1);
        for hear in hears {
            assert!(matches!(
                hear.borrow().as_ref(),
                Some(Outcome::RunYourselves)
            ));
        }
        assert_eq!(flights.open(), 0);
    }

    /// Flights of many keys, spread over the parts of the map: each key has one flight,
    /// every count sees them all, and they all close.
    #[test]
    fn flights_of_many_keys_are_counted_and_closed() {
        let flights = Arc::new(Flights::default());
        let digests: Vec<[u8; 32]> = (0..=255u8)
            .map(|n| {
                // One map hash for all (it is made of the first eight bytes); the ninth
                // picks the part.
                let mut digest = [n; 32];
                digest[..8].fill(7);
                digest
            })
            .collect();
        let leads: Vec<_> = digests
            .iter()
            .map(|digest| leads(&flights, digest))
            .collect();
        let hears: Vec<_> = digests
            .iter()
            .map(|digest| follows(&flights, digest))
            .collect();
        assert_eq!((flights.open(), flights.followers()), (256, 256));
        for lead in leads {
            lead.tell(Outcome::LeadNext);
        }
        assert_eq!((flights.open(), flights.followers()), (0, 0));
        assert!(hears
            .iter()
            .all(|hear| matches!(hear.borrow().as_ref(), Some(Outcome::LeadNext))));
    }
}
