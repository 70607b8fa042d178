//! The backend's sessions: at most `max_sessions`, opened when needed with the pool's
//! settings. A try goes to the least busy session that does not hold the name (the server
//! would grant it again to the same session: never two owners through one session); a
//! waiting acquisition needs a session that holds nothing (its `GET_LOCK` blocks the
//! connection, and calling it off kills the connection). A control connection sends the
//! kills and inspection.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::ConnectOptions;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::session::{Hold, Reservation, Session, SessionEvents};
use super::sql;
use crate::backend::Notices;
use crate::error::BackendError;
use crate::key::OwnerId;

/// What the sessions share with the set (a session reports its end through it).
#[derive(Default)]
pub(super) struct Shared {
    list: Mutex<Vec<Arc<Session>>>,
    /// A session may have become free for a wait (a statement ended, a session closed).
    pub(super) freed: Notify,
    pub(super) notices: OnceLock<Notices>,
    /// The last attempt to open a session failed.
    pub(super) unreachable: AtomicBool,
}

impl Shared {
    fn list(&self) -> MutexGuard<'_, Vec<Arc<Session>>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl SessionEvents for Shared {
    fn freed(&self) {
        self.freed.notify_waiters();
    }

    /// `session` ended: it leaves the set, and the holders of `lost` are told.
    fn ended(&self, session: &Session, lost: Vec<Hold>) {
        self.list().retain(|s| s.id != session.id);
        if let Some(notices) = self.notices.get() {
            for hold in lost {
                notices.lost(&hold.key, &hold.owner);
            }
        }
        self.freed.notify_waiters();
    }
}

/// A session just opened: reserved for the try that opened it, or listed for any.
enum Opened {
    Reserved(Reservation),
    Listed,
}

pub(super) struct Sessions {
    options: MySqlConnectOptions,
    max: usize,
    pub(super) shared: Arc<Shared>,
    statements: Arc<AtomicU64>,
    /// Sessions being opened (counted against the limit).
    opening: Mutex<usize>,
    control: tokio::sync::Mutex<Option<MySqlConnection>>,
}

impl Sessions {
    pub(super) fn new(options: MySqlConnectOptions, max: usize) -> Sessions {
        Sessions {
            options,
            max,
            shared: Arc::default(),
            statements: Arc::default(),
            opening: Mutex::new(0),
            control: tokio::sync::Mutex::new(None),
        }
    }

    pub(super) fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    pub(super) fn open_sessions(&self) -> usize {
        self.shared.list().len()
    }

    pub(super) fn is_available(&self) -> bool {
        !self.shared.unreachable.load(Ordering::Relaxed)
    }

    /// The session on which `owner` holds `name`, if any.
    pub(super) fn find(&self, name: &str, owner: &OwnerId) -> Option<Arc<Session>> {
        self.shared
            .list()
            .iter()
            .find(|s| s.holds().get(name).is_some_and(|hold| hold.owner == *owner))
            .cloned()
    }

    /// Every session, for inspection.
    pub(super) fn all(&self) -> Vec<Arc<Session>> {
        self.shared.list().clone()
    }

    /// A session for a try of `name`: the least busy that does not hold it and is not
    /// waiting (among them, one that holds most: empty ones are kept for waits); a new one
    /// when all are busy and the limit allows; at the limit, a busy one (its statements run
    /// in turn), or the first to open or free up.
    pub(super) async fn for_try(&self, name: &str) -> Result<Reservation, BackendError> {
        loop {
            let freed = self.shared.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let found = {
                let list = self.shared.list();
                let best = list
                    .iter()
                    .filter(|s| s.is_alive() && !s.waiting.load(Ordering::Acquire))
                    .filter(|s| !s.holds().contains_key(name) && !s.is_trying(name))
                    .min_by_key(|s| (s.in_flight(), usize::MAX - s.holds().len()));
                // Reserved under the list's lock, where waits and other tries choose too.
                match best {
                    Some(session)
                        if session.in_flight() == 0 || !self.may_open_with(list.len()) =>
                    {
                        return Ok(session.reserve(name));
                    }
                    best => best.is_some(),
                }
            };
            match self.open(Some(name)).await? {
                Some(Opened::Reserved(reserved)) => return Ok(reserved),
                Some(Opened::Listed) => continue,
                None if found => continue,
                // Every session is opening, waiting or holds the name: the first to free up.
                None => freed.await,
            }
        }
    }

    /// A session for a waiting acquisition: one that holds nothing and runs nothing, marked
    /// waiting; `None` when none frees up (nor can be opened) before `until`.
    pub(super) async fn for_wait(
        &self,
        until: Instant,
    ) -> Result<Option<Arc<Session>>, BackendError> {
        loop {
            let freed = self.shared.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let idle = {
                let list = self.shared.list();
                list.iter()
                    .find(|s| {
                        s.is_alive()
                            && s.in_flight() == 0
                            && s.holds().is_empty()
                            && s.waiting
                                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                                .is_ok()
                    })
                    .cloned()
            };
            if let Some(session) = idle {
                return Ok(Some(session));
            }
            // Opened, it is taken as the others are (above, under the list's lock).
            if self.open(None).await?.is_some() {
                continue;
            }
            tokio::select! {
                _ = freed => {}
                _ = tokio::time::sleep_until(until) => return Ok(None),
            }
        }
    }

    /// Whether another session may be opened, with `open` open now.
    fn may_open_with(&self, open: usize) -> bool {
        open + *self.opening.lock().unwrap_or_else(|e| e.into_inner()) < self.max
    }

    /// Opens a session; `None` at the limit.
    async fn open(&self, try_of: Option<&str>) -> Result<Option<Opened>, BackendError> {
        {
            // The list's lock is never taken inside the count's (choosing takes them the
            // other way round).
            let open = self.shared.list().len();
            let mut opening = self.opening.lock().unwrap_or_else(|e| e.into_inner());
            if open + *opening >= self.max {
                return Ok(None);
            }
            *opening += 1;
        }
        let events: Arc<dyn SessionEvents> = self.shared.clone();
        let opened = Session::open(
            &self.options,
            self.statements.clone(),
            Arc::downgrade(&events),
        )
        .await;
        let opened = match opened {
            Ok(session) => {
                self.shared.unreachable.store(false, Ordering::Relaxed);
                // Listed and, for a try, reserved under the list's lock: no wait takes it
                // in between (a wait for the same name granted there would let the try in
                // too: the server counts one session's holds as one owner's).
                let mut list = self.shared.list();
                list.push(session.clone());
                Ok(Some(match try_of {
                    Some(name) => Opened::Reserved(session.reserve(name)),
                    None => Opened::Listed,
                }))
            }
            Err(error) => {
                self.shared.unreachable.store(true, Ordering::Relaxed);
                Err(sql::failed("open a session", error))
            }
        };
        // Counted as opening until listed, so that the limit holds throughout.
        *self.opening.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
        self.shared.freed.notify_waiters();
        opened
    }

    /// Runs `statement` on the control connection (opened again if it broke).
    pub(super) async fn control<T, F>(&self, what: &str, statement: F) -> Result<T, BackendError>
    where
        F: for<'c> FnOnce(&'c mut MySqlConnection) -> super::session::ConnFuture<'c, T>,
    {
        let mut guard = self.control.lock().await;
        if guard.is_none() {
            let conn = self
                .options
                .connect()
                .await
                .map_err(|error| sql::failed("open the control connection", error))?;
            *guard = Some(conn);
        }
        let conn = guard.as_mut().expect("opened above");
        self.statements.fetch_add(1, Ordering::Relaxed);
        match statement(conn).await {
            Ok(value) => Ok(value),
            Err(error) => {
                if sql::ends_session(&error) {
                    guard.take();
                }
                Err(sql::failed(what, error))
            }
        }
    }

    /// Kills the connection of `session` (a waiting acquisition called off: the session
    /// holds nothing else).
    pub(super) async fn kill(&self, session: &Arc<Session>) {
        let id = session.id;
        let _ = self
            .control("end a waiting session", move |conn| {
                Box::pin(async move {
                    // Already gone: nothing to kill (error 1094, unknown thread).
                    match sqlx::query(&format!("KILL {id}")).execute(&mut *conn).await {
                        Ok(_) => Ok(()),
                        Err(sqlx::Error::Database(_)) => Ok(()),
                        Err(error) => Err(error),
                    }
                })
            })
            .await;
    }
}
