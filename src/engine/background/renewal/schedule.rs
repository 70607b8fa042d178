//! One task per manager renews the leases of all its held locks (no task per lock).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::engine::background::renewal::gate::ScheduleSlot;
use crate::engine::background::renewal::watchdog::{renew_once, Keeper};
use crate::engine::background::renewal::Renewable;
use crate::telemetry::TARGET;

/// The renewal schedule of a manager's held locks.
#[derive(Default)]
pub(crate) struct Renewals {
    state: Mutex<ScheduleState>,
    /// Wakes the task: an earlier renewal was scheduled, or the manager is gone.
    wake: Arc<Notify>,
}

#[derive(Default)]
struct ScheduleState {
    /// Renewals the task has sorted, by when they are due.
    due: BTreeMap<(Instant, u64), Entry>,
    /// Renewals scheduled since the task last looked, in numbered places (the task sorts
    /// them when it looks). Most holds are released long before their first renewal, a
    /// third of the lease: such a hold leaves from here and never enters the sorted map,
    /// whose insert and remove cost a few hundred instructions and, for a map of one
    /// entry, a node allocated and freed.
    fresh: Vec<Option<FreshEntry>>,
    /// Empty places in `fresh`.
    free: Vec<usize>,
    /// Entries in `fresh`.
    fresh_len: usize,
    next_id: u64,
    running: bool,
    /// When the task will look at the schedule next (`None`: only when woken): no renewal
    /// is due before it. A renewal due later needs no wake-up, and cancelled entries do not
    /// move this time, so short holds (the common case) seldom wake the task: once per
    /// look, not once per hold.
    next_look: Option<Instant>,
}

struct Entry {
    hold: Arc<dyn Renewable>,
    keeper: Keeper,
}

struct FreshEntry {
    due: Instant,
    id: u64,
    entry: Entry,
}

impl ScheduleState {
    /// Sorts the renewals scheduled since the last look (the task is looking).
    fn sort_fresh(&mut self) {
        if self.fresh_len == 0 {
            return;
        }
        for FreshEntry { due, id, entry } in self.fresh.drain(..).flatten() {
            // A hold whose gate closed meanwhile is being released: its cancel, with the
            // fresh place, finds nothing (the id tells a reused place apart).
            if entry.hold.gate().schedule(ScheduleSlot::Sorted(due, id)) {
                self.due.insert((due, id), entry);
            }
        }
        self.free.clear();
        self.fresh_len = 0;
    }
}

impl Renewals {
    fn state(&self) -> MutexGuard<'_, ScheduleState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Schedules the next renewal of `hold` at `due`.
    pub(crate) fn schedule(
        self: &Arc<Self>,
        hold: Arc<dyn Renewable>,
        keeper: Keeper,
        due: Instant,
    ) {
        let mut state = self.state();
        let runtime = if state.running {
            None
        } else {
            match hold.runtime() {
                Some(runtime) => Some(runtime),
                None => {
                    tracing::warn!(target: TARGET, key = %hold.key(), "tower-lock: no Tokio runtime to renew the lease on; the lock ends with its lease");
                    return;
                }
            }
        };
        let id = state.next_id;
        let place = state.free.last().copied().unwrap_or(state.fresh.len());
        // A hold being released is not scheduled again.
        if !hold.gate().schedule(ScheduleSlot::Fresh { place, id }) {
            return;
        }
        state.next_id += 1;
        // The task looks no later than `next_look`; only an earlier renewal moves it (and
        // wakes the task). Holds released before then never wake it.
        let earlier = state.next_look.is_none_or(|look| due < look);
        if earlier {
            state.next_look = Some(due);
        }
        state.running = true;
        let fresh = Some(FreshEntry {
            due,
            id,
            entry: Entry { hold, keeper },
        });
        if state.free.pop().is_some() {
            state.fresh[place] = fresh;
        } else {
            state.fresh.push(fresh);
        }
        state.fresh_len += 1;
        drop(state);
        if let Some(runtime) = runtime {
            runtime.spawn(run(Arc::downgrade(self), self.wake.clone()));
        } else if earlier {
            self.wake.notify_one();
        }
    }

    /// Takes a hold off the schedule (it is being released): `slot` is its place, as
    /// [`RenewGate::try_close`](crate::engine::background::renewal::RenewGate::try_close) or `close` gave it.
    pub(crate) fn cancel(&self, slot: Option<ScheduleSlot>) {
        // Most holds of the layers are never scheduled (their watchdog starts only when the
        // handler waits): the schedule's lock, shared by every hold, is left alone then.
        let Some(slot) = slot else {
            return;
        };
        let mut state = self.state();
        let state = &mut *state;
        match slot {
            ScheduleSlot::Fresh { place, id } => {
                let Some(fresh) = state.fresh.get_mut(place) else {
                    return;
                };
                if fresh.as_ref().is_some_and(|fresh| fresh.id == id) {
                    *fresh = None;
                    state.fresh_len -= 1;
                    if state.fresh_len == 0 {
                        state.fresh.clear();
                        state.free.clear();
                    } else {
                        state.free.push(place);
                    }
                }
            }
            ScheduleSlot::Sorted(due, id) => {
                state.due.remove(&(due, id));
            }
        }
    }

    /// How many held locks have a renewal scheduled.
    pub(crate) fn len(&self) -> usize {
        let state = self.state();
        state.due.len() + state.fresh_len
    }

    /// Stops the task (the manager is gone).
    pub(crate) fn shut_down(&self) {
        self.wake.notify_one();
    }
}

async fn run(renewals: Weak<Renewals>, wake: Arc<Notify>) {
    loop {
        let woken = wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let next = {
            let Some(renewals) = renewals.upgrade() else {
                return;
            };
            let now = Instant::now();
            let mut state = renewals.state();
            if state.next_look.is_some_and(|look| look > now) {
                // Woken early (an earlier renewal was scheduled): nothing is due before
                // the time it set.
                state.next_look
            } else {
                state.sort_fresh();
                while let Some(entry) = state.due.first_entry() {
                    if entry.key().0 > now {
                        break;
                    }
                    let Entry { hold, keeper } = entry.remove();
                    hold.gate().unschedule();
                    let renewals = renewals.clone();
                    tokio::spawn(async move {
                        let mut keeper = keeper;
                        if let Some(due) = renew_once(&*hold, &mut keeper).await {
                            renewals.schedule(hold, keeper, due);
                        }
                    });
                }
                let next = state.due.first_key_value().map(|((due, _), _)| *due);
                state.next_look = next;
                next
            }
        };
        match next {
            Some(due) => {
                tokio::select! {
                    _ = woken => {}
                    _ = tokio::time::sleep_until(due) => {}
                }
            }
            None => woken.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;
    use crate::backend::BoxFuture;
    use crate::engine::background::renewal::RenewGate;
    use crate::engine::hold::loss::Loss;
    use crate::error::BackendError;
    use crate::key::{LockKey, OwnerId};
    use crate::kind::LockKind;

    const LEASE: Duration = Duration::from_secs(3);

    /// A hold whose renewals are counted and reported on a channel.
    struct Probe {
        key: LockKey,
        owner: OwnerId,
        loss: Loss,
        gate: RenewGate,
        renewed: AtomicUsize,
        report: mpsc::UnboundedSender<&'static str>,
        name: &'static str,
    }

    fn probe(name: &'static str, report: &mpsc::UnboundedSender<&'static str>) -> Arc<Probe> {
        Arc::new(Probe {
            key: LockKey::new("", name, 100).unwrap(),
            owner: OwnerId::from_raw("owner:1"),
            loss: Loss::new(Instant::now() + LEASE, Duration::ZERO),
            gate: RenewGate::default(),
            renewed: AtomicUsize::new(0),
            report: report.clone(),
            name,
        })
    }

    impl Renewable for Probe {
        fn key(&self) -> &LockKey {
            &self.key
        }
        fn owner(&self) -> &OwnerId {
            &self.owner
        }
        fn kind(&self) -> LockKind {
            LockKind::Plain
        }
        fn loss(&self) -> &Loss {
            &self.loss
        }
        fn gate(&self) -> &RenewGate {
            &self.gate
        }
        fn renew(&self) -> BoxFuture<Result<bool, BackendError>> {
            self.renewed.fetch_add(1, Ordering::SeqCst);
            let _ = self.report.send(self.name);
            Box::pin(async { Ok(true) })
        }
        fn mark_lost(&self) {}
        fn runtime(&self) -> Option<tokio::runtime::Handle> {
            tokio::runtime::Handle::try_current().ok()
        }
    }

    fn schedule(renewals: &Arc<Renewals>, hold: &Arc<Probe>) -> Instant {
        let keeper = Keeper::new(LEASE);
        let due = keeper.first_due(&**hold);
        renewals.schedule(hold.clone(), keeper, due);
        due
    }

    /// Closes the hold's gate and takes it off the schedule, as a release does.
    fn release(renewals: &Renewals, hold: &Probe) {
        renewals.cancel(hold.gate.try_close().expect("no renewal runs"));
    }

    #[tokio::test(start_paused = true)]
    async fn holds_released_before_their_renewal_leave_nothing_behind() {
        let renewals = Arc::new(Renewals::default());
        let (report, mut reported) = mpsc::unbounded_channel();
        let holds: Vec<_> = (0..100).map(|_| probe("short", &report)).collect();
        for hold in &holds {
            schedule(&renewals, hold);
            tokio::task::yield_now().await;
            release(&renewals, hold);
        }
        assert_eq!(renewals.len(), 0);
        // Well past every first renewal: nothing was renewed.
        tokio::time::sleep(LEASE * 3).await;
        assert!(reported.try_recv().is_err());
        assert_eq!(renewals.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_kept_is_renewed_every_third_of_its_lease_until_released() {
        let renewals = Arc::new(Renewals::default());
        let (report, mut reported) = mpsc::unbounded_channel();
        let hold = probe("kept", &report);
        let due = schedule(&renewals, &hold);
        // A short hold scheduled after it is released meanwhile (a fresh place reused).
        let short = probe("short", &report);
        schedule(&renewals, &short);
        release(&renewals, &short);
        assert_eq!(reported.recv().await, Some("kept"));
        assert!(Instant::now() >= due);
        assert_eq!(reported.recv().await, Some("kept"));
        assert!(Instant::now() >= due + LEASE / 3);
        assert_eq!(renewals.len(), 1);
        release(&renewals, &hold);
        assert_eq!(renewals.len(), 0);
        tokio::time::sleep(LEASE * 3).await;
        assert!(reported.try_recv().is_err());
        assert_eq!(hold.renewed.load(Ordering::SeqCst), 2);
        assert_eq!(short.renewed.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_cancel_never_takes_another_hold_off_the_schedule() {
        let renewals = Arc::new(Renewals::default());
        let (report, mut reported) = mpsc::unbounded_channel();
        // Released while fresh, its cancel not sent yet; the task looks meanwhile and
        // drops it (its gate is closed).
        let gone = probe("gone", &report);
        schedule(&renewals, &gone);
        let stale = gone.gate.try_close().expect("no renewal runs");
        tokio::time::sleep(LEASE).await;
        // A new hold takes the first fresh place again; a second one is cancelled twice.
        let kept = probe("kept", &report);
        schedule(&renewals, &kept);
        let twice = probe("twice", &report);
        schedule(&renewals, &twice);
        let slot = twice.gate.try_close().expect("no renewal runs");
        renewals.cancel(slot);
        let again = probe("again", &report);
        schedule(&renewals, &again);
        renewals.cancel(slot);
        renewals.cancel(stale);
        assert_eq!(renewals.len(), 2, "`kept` and `again` stay scheduled");
        let mut first = [reported.recv().await, reported.recv().await];
        first.sort();
        assert_eq!(first, [Some("again"), Some("kept")]);
        assert_eq!(gone.renewed.load(Ordering::SeqCst), 0);
        assert_eq!(twice.renewed.load(Ordering::SeqCst), 0);
        release(&renewals, &kept);
        release(&renewals, &again);
        assert_eq!(renewals.len(), 0);
    }
}
