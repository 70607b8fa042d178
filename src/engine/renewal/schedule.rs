//! One task per manager renews the leases of all its held locks (no task per lock).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::Notify;
use tokio::time::Instant;

use super::gate::ScheduleSlot;
use super::watchdog::{renew_once, Keeper};
use super::Renewable;
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
    due: BTreeMap<(Instant, u64), (Arc<dyn Renewable>, Keeper)>,
    next_id: u64,
    running: bool,
    /// When the task will look at the schedule next (`None`: only when woken). A renewal
    /// due later needs no wake-up: cancelled entries are not removed from this time, so
    /// short holds (the common case) never wake the task.
    next_look: Option<Instant>,
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
        let id = state.next_id;
        // A hold being released is not scheduled again.
        if !hold.gate().schedule((due, id)) {
            return;
        }
        state.next_id += 1;
        let earlier = state.next_look.is_none_or(|look| due < look);
        let start = !state.running;
        let runtime = if start {
            match hold.runtime() {
                Some(runtime) => Some(runtime),
                None => {
                    tracing::warn!(target: TARGET, key = %hold.key(), "tower-lock: no Tokio runtime to renew the lease on; the lock ends with its lease");
                    return;
                }
            }
        } else {
            None
        };
        state.running = true;
        state.due.insert((due, id), (hold, keeper));
        drop(state);
        if let Some(runtime) = runtime {
            runtime.spawn(run(Arc::downgrade(self), self.wake.clone()));
        } else if earlier {
            self.wake.notify_one();
        }
    }

    /// Takes a hold off the schedule (it is being released): `slot` is its place, as
    /// [`RenewGate::try_close`](super::RenewGate::try_close) or `close` gave it.
    pub(crate) fn cancel(&self, slot: Option<ScheduleSlot>) {
        if let Some(slot) = slot {
            self.state().due.remove(&slot);
        }
    }

    /// How many held locks have a renewal scheduled.
    pub(crate) fn len(&self) -> usize {
        self.state().due.len()
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
            while let Some(entry) = state.due.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let (hold, keeper) = entry.remove();
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
