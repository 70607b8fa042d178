//! The gate between a hold's renewals and its release: a renewal starts only while the
//! hold is open, and closing waits for one already under way.

use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Orders renewals before the release without joining the watchdog: a renewal starts only
/// while the hold is open, and closing waits for a renewal that already started.
#[derive(Debug, Default)]
pub(crate) struct RenewGate {
    state: Mutex<GateState>,
    done: Notify,
}

#[derive(Debug, Default)]
struct GateState {
    closed: bool,
    renewing: bool,
    /// The hold's slot in the manager's renewal schedule, while one is due (kept here so
    /// that a release closes the gate and takes the slot in one step).
    slot: Option<ScheduleSlot>,
}

/// A hold's place in the renewal schedule; the number in each makes it unique.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScheduleSlot {
    /// Scheduled since the renewal task last looked: a numbered place among those.
    Fresh { place: usize, id: u64 },
    /// Sorted by the task: when it is due.
    Sorted(Instant, u64),
}

impl RenewGate {
    fn state(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a renewal, unless the hold is being released.
    pub(in crate::engine) fn begin(&self) -> Option<Renewing<'_>> {
        let mut state = self.state();
        if state.closed {
            return None;
        }
        state.renewing = true;
        Some(Renewing(self))
    }

    /// Puts the hold in the renewal schedule at `slot` (replacing its old place), unless
    /// the gate is closed (`false`).
    pub(crate) fn schedule(&self, slot: ScheduleSlot) -> bool {
        let mut state = self.state();
        if state.closed {
            return false;
        }
        state.slot = Some(slot);
        true
    }

    /// Takes the hold's place in the renewal schedule (its renewal has been started).
    pub(crate) fn unschedule(&self) {
        self.state().slot = None;
    }

    /// Closes the gate unless a renewal is under way. `Some`: closed, with the place in
    /// the renewal schedule to cancel; `None`: a renewal runs, [`close`](Self::close)
    /// waits for it.
    pub(crate) fn try_close(&self) -> Option<Option<ScheduleSlot>> {
        let mut state = self.state();
        state.closed = true;
        (!state.renewing).then(|| state.slot.take())
    }

    /// No renewal starts after this returns, and none is still running. Returns the place
    /// in the renewal schedule to cancel.
    pub(crate) async fn close(&self) -> Option<ScheduleSlot> {
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            done.as_mut().enable();
            {
                let mut state = self.state();
                state.closed = true;
                if !state.renewing {
                    return state.slot.take();
                }
            }
            done.await;
        }
    }
}

/// A renewal in progress; ends when dropped (also when its watchdog is aborted).
pub(in crate::engine) struct Renewing<'a>(&'a RenewGate);

impl Drop for Renewing<'_> {
    fn drop(&mut self) {
        self.0.state().renewing = false;
        self.0.done.notify_waiters();
    }
}
