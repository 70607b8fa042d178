//! Flights in one process: the requests of one coalescing key that arrive while one of
//! them is out asking the backend wait for it in memory, so that a process sends one
//! acquisition per key however many of its requests want it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::outcome::Outcome;

/// The flights of one layer, by lock name.
#[derive(Default)]
pub(super) struct Flights {
    open: Mutex<HashMap<String, Arc<watch::Sender<Option<Outcome>>>>>,
}

/// What a request is in its key's flight.
pub(super) enum Seat {
    /// The first: it asks the backend, and tells the others what came of it.
    Leader(FlightLead),
    /// Another: it waits for the leader's word.
    Follower(watch::Receiver<Option<Outcome>>),
}

impl Flights {
    /// Joins the flight of `name`, or opens one.
    pub(super) fn board(self: &Arc<Self>, name: &str) -> Seat {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(flight) = open.get(name) {
            return Seat::Follower(flight.subscribe());
        }
        let tell = Arc::new(watch::Sender::new(None));
        open.insert(name.to_owned(), tell.clone());
        Seat::Leader(FlightLead {
            flights: self.clone(),
            name: name.to_owned(),
            tell: Some(tell),
        })
    }

    /// How many flights are open (tests drive it back to zero).
    pub(super) fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// How many requests wait for their flight's leader.
    pub(super) fn followers(&self) -> usize {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.values().map(|flight| flight.receiver_count()).sum()
    }

    fn close(&self, name: &str) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(name);
    }
}

/// A flight's leader: closes the flight when it tells its outcome, and if it goes away
/// without a word, tells the followers to lead in turn (so that none waits for nothing).
pub(super) struct FlightLead {
    flights: Arc<Flights>,
    name: String,
    tell: Option<Arc<watch::Sender<Option<Outcome>>>>,
}

impl FlightLead {
    /// Tells the followers. The flight is closed first: a request that comes after the
    /// outcome is known starts a flight of its own rather than take an outcome it did not
    /// wait for.
    pub(super) fn tell(mut self, outcome: Outcome) {
        self.flights.close(&self.name);
        if let Some(tell) = self.tell.take() {
            tell.send_replace(Some(outcome));
        }
    }
}

impl Drop for FlightLead {
    fn drop(&mut self) {
        if let Some(tell) = self.tell.take() {
            self.flights.close(&self.name);
            tell.send_replace(Some(Outcome::LeadNext));
        }
    }
}
