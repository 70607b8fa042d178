//! Taking turns with waiters of other processes.
//!
//! A last release may hand the lock to this process's next waiter in the same step (see
//! `offer`), so a busy process could keep a lock for run after run. When waiters of other
//! processes listen, the lock is shared by runs:
//!
//! - a release that frees the lock while others listen *yields*: this process's next waiter
//!   holds back for a courtesy delay, so that the others' attempts land first, and the holds
//!   they make until this process holds the lock again are counted (a Redisson release
//!   counts one; a tower-lock process announces the length of its run, which counts one more,
//!   so that two tower-lock processes lengthen their runs back to the hand-over limit);
//! - this process's next run is then capped at that many holds: as many as the others had;
//! - when nobody else took the lock during the courtesy delay, the delay doubles (a Redisson
//!   waiter takes a millisecond or more to react); after three such misses in a row the
//!   others count as not competing: no cap, and the delay starts again from the round trip;
//! - a release that frees the lock with nobody else listening lifts the cap.
//!
//! Every grant is still the backend's: this only decides whether a release offers the lock
//! to a local waiter or frees it, and how long the next local waiter holds back.

use std::time::Duration;

/// The longest courtesy delay.
pub(crate) const COURTESY_MAX: Duration = Duration::from_millis(50);

/// Yields in a row in which nobody else took the lock before the others count as not
/// competing.
const MISSES_TO_GIVE_UP: u32 = 3;

/// One name's turn-taking state (kept while the name has local waiters).
#[derive(Debug, Default)]
pub(super) struct Turns {
    /// Hand-overs in a row in the current run.
    handed: u32,
    /// A release of ours freed the lock while others listened; our next acquisition ends
    /// the others' turn.
    yielded: bool,
    /// Holds of other processes counted since we yielded.
    foreign: u32,
    /// The most holds our runs may have (`None`: the hand-over limit alone).
    cap: Option<u32>,
    /// The courtesy delay learnt from the others' reactions (`None`: the round trip's).
    courtesy: Option<Duration>,
    /// The courtesy delay of the last yield.
    held_back: Duration,
    /// Yields in a row in which nobody else took the lock.
    misses: u32,
}

impl Turns {
    /// Whether a release may hand the lock over once more, with at most `limit` hand-overs
    /// in a row.
    pub(super) fn may_hand_over(&self, limit: u32) -> bool {
        let capped = self.cap.map_or(limit, |cap| cap.saturating_sub(1));
        self.handed < limit.min(capped)
    }

    /// A release handed the lock over.
    pub(super) fn handed(&mut self) {
        self.handed += 1;
    }

    /// A release frees the lock, ending the run: the run's length to announce to other
    /// processes, when it is worth their knowing (a run of hand-overs, or one cut short by
    /// a cap).
    pub(super) fn run_ends(&mut self) -> Option<u32> {
        let holds = std::mem::take(&mut self.handed) + 1;
        (holds > 1 || self.cap.is_some()).then_some(holds)
    }

    /// A release of ours freed the lock while others listened; `delay`: the courtesy delay
    /// by the release's round trip. Returns the delay to hold back for.
    pub(super) fn yielded(&mut self, delay: Duration) -> Duration {
        self.yielded = true;
        self.foreign = 0;
        self.held_back = self.courtesy.map_or(delay, |learnt| learnt.max(delay));
        self.held_back
    }

    /// A release of ours freed the lock and nobody else listened.
    pub(super) fn alone(&mut self) {
        self.yielded = false;
        self.cap = None;
        self.courtesy = None;
        self.misses = 0;
    }

    /// Another process released the lock after `holds` holds (1 for a release that
    /// announced nothing).
    pub(super) fn foreign_release(&mut self, holds: u32) {
        if self.yielded {
            self.foreign = self.foreign.saturating_add(holds);
        }
    }

    /// A waiter of ours took the lock by its own attempt. After a yield, the others' turn
    /// is over: our run is capped at their holds; if they made none, the courtesy delay
    /// was too short for them to react.
    pub(super) fn acquired(&mut self) {
        if !std::mem::take(&mut self.yielded) {
            return;
        }
        if self.foreign > 0 {
            self.cap = Some(self.foreign);
            self.misses = 0;
            return;
        }
        self.misses += 1;
        if self.misses >= MISSES_TO_GIVE_UP {
            self.alone();
        } else {
            self.courtesy = Some((self.held_back * 2).min(COURTESY_MAX));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: u32 = 8;
    const DELAY: Duration = Duration::from_millis(1);

    fn run_length(turns: &mut Turns) -> u32 {
        let mut holds = 1;
        while turns.may_hand_over(LIMIT) {
            turns.handed();
            holds += 1;
        }
        turns.run_ends();
        holds
    }

    #[test]
    fn alone_a_run_goes_to_the_limit_and_announces_itself() {
        let mut turns = Turns::default();
        assert_eq!(run_length(&mut turns), LIMIT + 1);
        turns.handed();
        assert_eq!(turns.run_ends(), Some(2));
        assert_eq!(turns.run_ends(), None, "a lone hold announces nothing");
    }

    #[test]
    fn after_one_redisson_hold_the_next_run_is_one_hold() {
        let mut turns = Turns::default();
        assert_eq!(turns.yielded(DELAY), DELAY);
        turns.foreign_release(1);
        turns.acquired();
        assert_eq!(run_length(&mut turns), 1);
        assert_eq!(turns.run_ends(), Some(1), "capped runs announce themselves");
    }

    #[test]
    fn two_tower_lock_processes_lengthen_their_runs_to_the_limit() {
        let (mut a, mut b) = (Turns::default(), Turns::default());
        // Both start capped at one hold, as after Redisson's.
        for turns in [&mut a, &mut b] {
            turns.yielded(DELAY);
            turns.foreign_release(1);
            turns.acquired();
        }
        let mut runs = Vec::new();
        for _ in 0..20 {
            a.yielded(DELAY);
            let run = run_length(&mut b);
            a.foreign_release(run + 1);
            a.acquired();
            b.yielded(DELAY);
            let run = run_length(&mut a);
            b.foreign_release(run + 1);
            b.acquired();
            runs.push(run);
        }
        assert_eq!(*runs.last().unwrap(), LIMIT + 1, "{runs:?}");
    }

    #[test]
    fn a_slow_other_process_gets_a_longer_courtesy_then_is_given_up_on() {
        let mut turns = Turns::default();
        turns.yielded(DELAY);
        turns.foreign_release(1);
        turns.acquired();
        assert_eq!(turns.yielded(DELAY), DELAY);
        turns.acquired();
        assert_eq!(
            turns.yielded(DELAY),
            DELAY * 2,
            "nobody took it: a longer courtesy"
        );
        assert_eq!(run_length(&mut turns), 1, "still capped");
        turns.acquired();
        assert_eq!(turns.yielded(DELAY), DELAY * 4);
        turns.acquired();
        assert_eq!(turns.yielded(DELAY), DELAY, "given up on: the round trip's");
        turns.acquired();
        assert_eq!(run_length(&mut turns), LIMIT + 1, "no cap");
    }

    #[test]
    fn a_release_with_nobody_else_listening_lifts_the_cap() {
        let mut turns = Turns::default();
        turns.yielded(DELAY);
        turns.foreign_release(1);
        turns.acquired();
        turns.alone();
        assert_eq!(run_length(&mut turns), LIMIT + 1);
    }
}
