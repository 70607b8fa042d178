//! Which session an acquisition goes to: a try to the holder's own session when its mode
//! may join its holds, a read to a session where only readers hold the key, else to the
//! least busy session that holds nothing of it (or a new one); a wait to a session that
//! holds nothing and does nothing (or a new one), all but one of the sessions at most.

use std::sync::Arc;

use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::mode::Mode;
use super::session::{Holder, Session, WaitCtl};
use super::sessions::Sessions;
use crate::error::BackendError;

/// How a session chosen for a try holds the key already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Share {
    /// Not at all.
    Fresh,
    /// For this holder, in a mode this one may join (a writer's read).
    Own,
    /// For other holders, all reading.
    Readers,
}

impl Sessions {
    /// A session for a try of `key` by `holder` in `mode`, with the key kept for the
    /// holder: the one where the holder has it in a mode that allows this one (a writer may
    /// read; a reader may not write, here or elsewhere); for a read, one where only readers
    /// hold it; else the least busy that holds nothing of the key. `None`: no session may
    /// take it (every one holds it for other holders, or waits) and no other may be opened.
    pub(super) async fn for_try(
        &self,
        key: AdvisoryKey,
        holder: &Holder,
        mode: Mode,
    ) -> Result<Option<(Arc<Session>, Share)>, BackendError> {
        {
            let mut set = self.set();
            self.retire_idle(&mut set);
            let mut readers: Option<&Arc<Session>> = None;
            let mut best: Option<&Arc<Session>> = None;
            for session in &set.live {
                if !session.is_alive() {
                    continue;
                }
                let state = session.state();
                if let Some(hold) = state.hold(key, holder) {
                    if hold.exclusive > 0 || mode == Mode::Shared {
                        drop(state);
                        session.keep(key, holder, mode);
                        return Ok(Some((session.clone(), Share::Own)));
                    }
                    continue;
                }
                if state.waiting.is_some() {
                    continue;
                }
                if state.has_key(key) {
                    if mode == Mode::Shared && !state.exclusive(key) && readers.is_none() {
                        readers = Some(session);
                    }
                    continue;
                }
                if best.is_none_or(|best| session.in_flight() < best.in_flight()) {
                    best = Some(session);
                }
            }
            if let Some(session) = readers {
                let session = session.clone();
                session.keep(key, holder, mode);
                return Ok(Some((session, Share::Readers)));
            }
            let idle = best.filter(|session| session.in_flight() == 0);
            let room = set.live.len() + set.opening < self.max;
            match (idle, best, room) {
                (Some(session), _, _) | (None, Some(session), false) => {
                    let session = session.clone();
                    session.keep(key, holder, mode);
                    return Ok(Some((session, Share::Fresh)));
                }
                (None, None, false) => return Ok(None),
                (None, _, true) => set.opening += 1,
            }
        }
        let session = self.open(|session| session.keep(key, holder, mode)).await?;
        Ok(Some((session, Share::Fresh)))
    }

    /// A session for `holder` to wait on for `key`, marked as waiting for `ctl`, with the
    /// key kept for the holder: one that holds nothing and does nothing, or a new one
    /// (all but one session may wait). Waits for one to come free until `until`; `None`
    /// then, or if the acquirer left.
    pub(super) async fn for_wait(
        &self,
        key: AdvisoryKey,
        holder: &Holder,
        mode: Mode,
        ctl: &Arc<WaitCtl>,
        until: Instant,
    ) -> Result<Option<Arc<Session>>, BackendError> {
        loop {
            let freed = self.freed.notified();
            let left = ctl.wake.notified();
            tokio::pin!(freed, left);
            freed.as_mut().enable();
            left.as_mut().enable();
            if ctl.has_left() || Instant::now() >= until {
                return Ok(None);
            }
            let open = {
                let mut set = self.set();
                self.retire_idle(&mut set);
                let free = set.live.iter().find(|session| {
                    let state = session.state();
                    session.is_alive()
                        && state.is_empty()
                        && state.waiting.is_none()
                        && session.in_flight() == 0
                });
                if let Some(session) = free {
                    let session = session.clone();
                    take_for_wait(&session, key, holder, mode, ctl);
                    return Ok(Some(session));
                }
                let waiting = set
                    .live
                    .iter()
                    .filter(|session| session.state().waiting.is_some())
                    .count();
                let room = set.live.len() + set.opening < self.max && waiting + 1 < self.max;
                if room {
                    set.opening += 1;
                }
                room
            };
            if open {
                let session = self
                    .open(|session| take_for_wait(session, key, holder, mode, ctl))
                    .await?;
                return Ok(Some(session));
            }
            tokio::select! {
                _ = freed => {}
                _ = left => {}
                _ = tokio::time::sleep_until(until) => {}
            }
        }
    }
}

/// Marks `session` as waiting for `ctl`, with `key` kept for `holder`.
fn take_for_wait(
    session: &Arc<Session>,
    key: AdvisoryKey,
    holder: &Holder,
    mode: Mode,
    ctl: &Arc<WaitCtl>,
) {
    session.keep(key, holder, mode);
    session.state().waiting = Some(ctl.clone());
}
