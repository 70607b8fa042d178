//! One session: a connection of the backend's own, on which this process holds named locks.
//! Statements run on it one at a time in the order they came, each in a task of its own so
//! that it finishes (and its effect is counted) even if its caller goes away. A statement
//! that finds the connection broken or killed ends the session: its locks went with it on
//! the server, and their holders are told.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::ConnectOptions;
use tokio::time::Instant;

use super::{sql, watch};
use crate::abort::AbortOnDrop;
use crate::key::{LockKey, OwnerId};

/// A statement's future, borrowing the session's connection.
pub(super) type ConnFuture<'c, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, sqlx::Error>> + Send + 'c>>;

/// What a session tells the set it belongs to.
pub(super) trait SessionEvents: Send + Sync {
    /// It may have become free for other work (a statement ended).
    fn freed(&self);
    /// It ended; these holds went with it.
    fn ended(&self, session: &Session, lost: Vec<Hold>);
}

/// A lock this session holds for one owner.
#[derive(Debug, Clone)]
pub(super) struct Hold {
    pub(super) key: LockKey,
    pub(super) owner: OwnerId,
    /// The owner's holds (the server counts as many: `GET_LOCK` is reentrant per session).
    pub(super) count: u32,
    /// When the lease ends unless renewed: the lock is released then.
    pub(super) until: Instant,
    /// A fenced lock's token.
    pub(super) token: Option<u64>,
    /// The lock is marked in the records' table as held for some work (taken back with
    /// the release).
    pub(super) work_marked: bool,
    /// The timer that releases it when its lease ends unrenewed (see `expiry`): it stops
    /// when the hold goes (its last copy dropped), not at its own time.
    pub(super) expiry: Option<Arc<AbortOnDrop>>,
}

/// Why a statement did not run, or failed.
#[derive(Debug)]
pub(super) enum SessionError {
    /// The session ended (before or during the statement).
    Ended,
    Sql(sqlx::Error),
}

impl SessionError {
    pub(super) fn into_backend(self, what: &str) -> crate::error::BackendError {
        match self {
            SessionError::Ended => crate::error::BackendError::new(format!(
                "MySQL: could not {what}: the session ended (its connection broke or was killed)"
            )),
            SessionError::Sql(error) => sql::failed(what, error),
        }
    }
}

pub(super) struct Session {
    /// The server's id of the connection (`CONNECTION_ID()`: what `KILL` names).
    pub(super) id: u64,
    /// The server is MariaDB (its `GET_LOCK` takes fractions of a second).
    pub(super) mariadb: bool,
    conn: Arc<tokio::sync::Mutex<Option<MySqlConnection>>>,
    /// Its locks, by server lock name.
    holds: Mutex<HashMap<String, Hold>>,
    alive: AtomicBool,
    /// A waiting `GET_LOCK` is on its way (nothing else runs on it meanwhile).
    pub(super) waiting: AtomicBool,
    /// The name and owner it waits for (for inspection).
    pub(super) waiting_on: Mutex<Option<(String, OwnerId)>>,
    /// Names a try on its way will take on it: no other try of those names comes here
    /// (the server would grant a name twice to one session: two owners).
    trying: Mutex<std::collections::HashSet<String>>,
    in_flight: AtomicUsize,
    statements: Arc<AtomicU64>,
    events: Weak<dyn SessionEvents>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("id", &self.id).finish()
    }
}

impl Session {
    pub(super) async fn open(
        options: &MySqlConnectOptions,
        statements: Arc<AtomicU64>,
        events: Weak<dyn SessionEvents>,
    ) -> Result<Arc<Session>, sqlx::Error> {
        let mut conn = options.connect().await?;
        let (id, version): (u64, String) = sqlx::query_as(sql::CONNECTION_ID)
            .fetch_one(&mut conn)
            .await?;
        let alive = watch::alive_lock_name();
        watch::take_alive_lock(&mut conn, &alive).await?;
        statements.fetch_add(2, Ordering::Relaxed);
        let session = Arc::new(Session {
            id,
            mariadb: version.contains("MariaDB"),
            conn: Arc::new(tokio::sync::Mutex::new(Some(conn))),
            holds: Mutex::default(),
            alive: AtomicBool::new(true),
            waiting: AtomicBool::new(false),
            waiting_on: Mutex::new(None),
            trying: Mutex::default(),
            in_flight: AtomicUsize::new(0),
            statements,
            events,
        });
        let watched = Arc::downgrade(&session);
        watch::watch(options.clone(), alive, async move {
            if let Some(session) = watched.upgrade() {
                session.ended_on_server().await;
            }
        });
        Ok(session)
    }

    pub(super) fn holds(&self) -> MutexGuard<'_, HashMap<String, Hold>> {
        self.holds.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Runs `statement` on the connection after those that came before it. It runs to its
    /// end even if the caller goes away; an error that ends the connection ends the
    /// session (its holders are told).
    pub(super) async fn run<T, F>(self: &Arc<Self>, statement: F) -> Result<T, SessionError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut MySqlConnection) -> ConnFuture<'c, T> + Send + 'static,
    {
        if !self.is_alive() {
            return Err(SessionError::Ended);
        }
        let session = self.clone();
        session.in_flight.fetch_add(1, Ordering::SeqCst);
        FinishOnDrop(Some(Box::pin(async move {
            let mut guard = session.conn.lock().await;
            let result = match guard.as_mut() {
                Some(conn) if session.is_alive() => {
                    session.statements.fetch_add(1, Ordering::Relaxed);
                    let result = statement(conn).await;
                    if matches!(&result, Err(error) if sql::ends_session(error)) {
                        guard.take();
                        session.end();
                    }
                    result.map_err(SessionError::Sql)
                }
                _ => Err(SessionError::Ended),
            };
            drop(guard);
            session.in_flight.fetch_sub(1, Ordering::SeqCst);
            if let Some(events) = session.events.upgrade() {
                events.freed();
            }
            result
        })))
        .await
    }

    /// Counts a try of `name` on its way before it is sent, so that no waiting acquisition
    /// takes the session meanwhile (a waiting `GET_LOCK` would hold the try back for its
    /// whole wait), and no other try of the name comes to this session. Made under the
    /// set's lock, where both are looked at.
    pub(super) fn reserve(self: &Arc<Self>, name: &str) -> Reservation {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        lock(&self.trying).insert(name.to_owned());
        Reservation(self.clone(), name.to_owned())
    }

    /// Whether a try of `name` is on its way here.
    pub(super) fn is_trying(&self, name: &str) -> bool {
        lock(&self.trying).contains(name)
    }

    /// The server ended the session (its watch says so): it is over here too, its holders
    /// are told, and its connection is closed.
    pub(super) async fn ended_on_server(&self) {
        if !self.is_alive() {
            return;
        }
        self.end();
        // Whatever statement still runs on it fails with the connection; then it closes.
        let conn = self.conn.lock().await.take();
        drop(conn);
    }

    /// The session is over (its connection broke, was killed, or is given up): its holds
    /// went with it; their holders are told.
    pub(super) fn end(&self) {
        if !self.alive.swap(false, Ordering::AcqRel) {
            return;
        }
        let lost: Vec<Hold> = self.holds().drain().map(|(_, hold)| hold).collect();
        if let Some(events) = self.events.upgrade() {
            events.ended(self, lost);
        }
    }
}

/// A try counted on a session before it is sent (see [`Session::reserve`]); it ends when
/// the try's statement has ended (moved into it), so that the name is held or free on the
/// session before another try may come.
pub(super) struct Reservation(Arc<Session>, String);

impl Reservation {
    pub(super) fn session(&self) -> &Arc<Session> {
        &self.0
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        lock(&self.0.trying).remove(&self.1);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(events) = self.0.events.upgrade() {
            events.freed();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A statement's future that is finished in the background if its caller drops it: a
/// statement cut off midway would leave the connection unusable and its effect uncounted.
struct FinishOnDrop<O: Send + 'static>(
    Option<std::pin::Pin<Box<dyn std::future::Future<Output = O> + Send + 'static>>>,
);

impl<O: Send + 'static> std::future::Future for FinishOnDrop<O> {
    type Output = O;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<O> {
        let future = self.0.as_mut().expect("polled after completion");
        let output = future.as_mut().poll(cx);
        if output.is_ready() {
            self.0 = None;
        }
        output
    }
}

impl<O: Send + 'static> Drop for FinishOnDrop<O> {
    fn drop(&mut self) {
        if let (Some(future), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(future);
        }
    }
}
