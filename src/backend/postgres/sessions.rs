//! The backend's sessions: at most `max_sessions` connections of its own, opened when
//! needed with the application pool's settings and closed after a minute of holding
//! nothing (one stays); each holds the locks of many holders, and all but one of them may
//! wait in the server's lock queue, one acquisition each (`choose` says which session an
//! acquisition goes to). A session that cannot be opened marks the server down: new
//! acquisitions fail at once until a probe finds it answering again.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::advisory_key::AdvisoryKey;
use super::session::{Holder, Session, SessionEvents, WaitCtl};
use crate::backend::Notices;
use crate::error::BackendError;
use crate::telemetry::TARGET;

/// How long opening a connection may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// A session that has held nothing this long is closed (one always stays).
const IDLE_RETIRE: Duration = Duration::from_secs(60);

/// The sessions of one backend.
pub(super) struct Sessions {
    options: PgConnectOptions,
    pub(super) max: usize,
    /// A small pool beside the sessions: cancels, inspection, the tables.
    control: PgPool,
    set: Mutex<SessionSet>,
    /// A session may have become free (a key or a wait ended, one closed).
    pub(super) freed: Notify,
    notices: OnceLock<Notices>,
    next_id: AtomicU64,
    /// Statements sent on the sessions (tests read it: an idle waiter sends none).
    statements: Arc<AtomicU64>,
    /// The last connection attempt failed: new acquisitions fail at once until one
    /// succeeds (queued ones ride it out).
    down: AtomicBool,
    probing: AtomicBool,
    me: Weak<Sessions>,
}

#[derive(Default)]
pub(super) struct SessionSet {
    pub(super) live: Vec<Arc<Session>>,
    pub(super) opening: usize,
}

/// Where a key is found for a holder.
pub(super) enum Found {
    /// On this session, for this holder.
    Held(Arc<Session>),
    /// Nowhere.
    Nowhere,
}

impl Sessions {
    pub(super) fn new(options: PgConnectOptions, max: usize) -> Arc<Sessions> {
        let control = PgPoolOptions::new()
            .max_connections(2)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .idle_timeout(Some(IDLE_RETIRE))
            .connect_lazy_with(options.clone());
        Arc::new_cyclic(|me| Sessions {
            options,
            max: max.max(2),
            control,
            set: Mutex::new(SessionSet::default()),
            freed: Notify::new(),
            notices: OnceLock::new(),
            next_id: AtomicU64::new(1),
            statements: Arc::new(AtomicU64::new(0)),
            down: AtomicBool::new(false),
            probing: AtomicBool::new(false),
            me: me.clone(),
        })
    }

    pub(super) fn control(&self) -> &PgPool {
        &self.control
    }

    pub(super) fn listen(&self, notices: Notices) {
        let _ = self.notices.set(notices);
    }

    pub(super) fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    pub(super) fn is_available(&self) -> bool {
        !self.down.load(Ordering::Acquire)
    }

    /// Sessions open now.
    pub(super) fn open_sessions(&self) -> usize {
        self.set().live.len()
    }

    pub(super) fn set(&self) -> MutexGuard<'_, SessionSet> {
        self.set.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session that holds (or is taking) `key` for `holder`.
    pub(super) fn find(&self, key: AdvisoryKey, holder: &Holder) -> Found {
        let set = self.set();
        for session in &set.live {
            if !session.is_alive() {
                continue;
            }
            if session.state().hold(key, holder).is_some() {
                return Found::Held(session.clone());
            }
        }
        Found::Nowhere
    }

    /// Opens a session (the caller counted it in `opening`), and once `prepare` has set it
    /// up (keeping a key, marking a wait) makes it one of the live sessions; the count is
    /// given back however this ends, a dropped caller included.
    pub(super) async fn open(
        &self,
        prepare: impl FnOnce(&Arc<Session>),
    ) -> Result<Arc<Session>, BackendError> {
        struct Opening<'a>(&'a Sessions);
        impl Drop for Opening<'_> {
            fn drop(&mut self) {
                self.0.set().opening -= 1;
                self.0.freed.notify_waiters();
            }
        }
        let opening = Opening(self);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .idle_timeout(None)
            .max_lifetime(None)
            .test_before_acquire(false)
            .connect_lazy_with(self.options.clone());
        let events: Arc<dyn SessionEvents> = Arc::new(Events(self.me.clone()));
        match Session::open(id, pool, self.statements.clone(), events).await {
            Ok(session) => {
                self.down.store(false, Ordering::Release);
                prepare(&session);
                // Live and no longer opening in one step: the count never exceeds the most.
                let mut set = self.set();
                set.live.push(session.clone());
                set.opening -= 1;
                drop(set);
                std::mem::forget(opening);
                self.freed.notify_waiters();
                Ok(session)
            }
            Err(error) => {
                self.went_down();
                Err(BackendError::with_source(
                    "could not open a PostgreSQL connection for locks",
                    error,
                ))
            }
        }
    }

    /// A connection failed: new acquisitions fail at once until the server answers again
    /// (a probe every so often, started once).
    fn went_down(&self) {
        self.down.store(true, Ordering::Release);
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(me) = self.me.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                tokio::time::sleep(pause).await;
                let answered = sqlx::query(super::sql::KEEP_ALIVE)
                    .execute(&me.control)
                    .await
                    .is_ok();
                if answered {
                    break;
                }
                pause = (pause * 2).min(Duration::from_secs(2));
                if Arc::strong_count(&me) == 1 {
                    // The backend is gone.
                    return;
                }
            }
            me.down.store(false, Ordering::Release);
            me.probing.store(false, Ordering::Release);
            tracing::info!(target: TARGET, "tower-lock: PostgreSQL answers again");
            if let Some(notices) = me.notices.get() {
                notices.resync();
            }
            me.freed.notify_waiters();
        });
    }

    /// Closes sessions that held nothing for a while (keeping one).
    pub(super) fn retire_idle(&self, set: &mut SessionSet) {
        set.live.retain(|session| session.is_alive());
        if set.live.len() <= 1 {
            return;
        }
        let now = Instant::now();
        let mut keep = set.live.len();
        for session in &set.live {
            if keep <= 1 {
                break;
            }
            let state = session.state();
            let idle = state.is_empty()
                && state.waiting.is_none()
                && session.in_flight() == 0
                && state
                    .empty_since
                    .is_some_and(|since| now.duration_since(since) >= IDLE_RETIRE);
            if idle {
                session.kill();
                keep -= 1;
            }
        }
        set.live.retain(|session| session.is_alive());
    }

    /// Every hold of this backend's sessions (for inspection: the server knows sessions,
    /// the backend knows their holders).
    pub(super) fn holders_on(&self, pid: i32) -> Vec<(AdvisoryKey, Holder, u32, u32, Instant)> {
        let set = self.set();
        set.live
            .iter()
            .filter(|session| session.pid == pid)
            .flat_map(|session| {
                session
                    .state()
                    .each_hold()
                    .map(|(key, hold)| {
                        let holder = hold.holder.clone();
                        (key, holder, hold.exclusive, hold.shared, hold.deadline)
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The lock keys this backend's sessions hold or take under `key`.
    pub(super) fn names_of(&self, key: AdvisoryKey) -> Vec<crate::key::LockKey> {
        let set = self.set();
        let mut names: Vec<crate::key::LockKey> = set
            .live
            .iter()
            .flat_map(|session| {
                session
                    .state()
                    .each_hold()
                    .filter(|(held, _)| *held == key)
                    .map(|(_, hold)| hold.holder.key.clone())
                    .collect::<Vec<_>>()
            })
            .collect();
        names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        names.dedup();
        names
    }

    /// Sends a cancel for the wait `ctl`, if it waits on a session now.
    pub(super) async fn cancel(&self, ctl: &Arc<WaitCtl>) {
        let on = self
            .set()
            .live
            .iter()
            .find(|session| {
                session
                    .state()
                    .waiting
                    .as_ref()
                    .is_some_and(|waiting| Arc::ptr_eq(waiting, ctl))
            })
            .cloned();
        if let Some(session) = on {
            session.cancel(ctl, &self.control).await;
        }
    }
}

/// What sessions tell their set.
struct Events(Weak<Sessions>);

impl SessionEvents for Events {
    fn freed(&self) {
        if let Some(sessions) = self.0.upgrade() {
            sessions.freed.notify_waiters();
        }
    }

    fn ended(&self, session: &Session, lost: Vec<Holder>) {
        let Some(sessions) = self.0.upgrade() else {
            return;
        };
        sessions
            .set()
            .live
            .retain(|live| !std::ptr::eq(Arc::as_ptr(live), session));
        if !lost.is_empty() {
            tracing::warn!(
                target: TARGET,
                holds = lost.len(),
                "tower-lock: a PostgreSQL session ended with locks held; their holders are told they lost them"
            );
            if let Some(notices) = sessions.notices.get() {
                for holder in &lost {
                    notices.lost(&holder.key, &holder.owner);
                }
            }
        }
        sessions.freed.notify_waiters();
    }
}
