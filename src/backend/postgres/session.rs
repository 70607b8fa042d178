//! One session: a connection of its own on which this process holds advisory locks. A
//! statement runs on it from its caller's task, one at a time in the order they came
//! (the connection is behind a first-come mutex), and finishes even if its caller goes
//! away; between statements, once the session has been idle a moment, a task of its own
//! takes the connection and watches the socket, so that a session the server ends (a
//! broken connection, `pg_terminate_backend`, a restart) is known at once and every hold on
//! it is reported lost. That task also frees holds whose lease ended.
//!
//! The session's advisory locks live as long as it does: a grant is the server's answer to
//! a statement on it, and the session is the lease's counterpart. What it holds is kept
//! beside it, per advisory key and holder ([`Holder`]): PostgreSQL lets a session take
//! again what it holds, so a key held here is tried here only by its holder, or by a
//! reader joining readers.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::Notify;
use tokio::time::Instant;

mod task;

use super::advisory_key::AdvisoryKey;
use super::cancel::CancelGate;
pub(super) use super::mode::Mode;
pub(super) use super::session_state::{Holder, SessionState, WaitCtl};
use super::sql;
pub(super) use super::sql::SessionError;

/// A statement's future, borrowing the session's connection.
pub(super) type ConnFuture<'c, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'c>>;

/// What the session tells the set it belongs to.
pub(super) trait SessionEvents: Send + Sync {
    /// It may have become free for other work (a key or a wait ended).
    fn freed(&self);
    /// It ended; these holds went with it.
    fn ended(&self, session: &Session, lost: Vec<Holder>);
}

/// How long a keep-alive may take before the session is taken for dead.
pub(super) const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a session is idle before its task takes the connection to watch it (a
/// statement that comes meanwhile needs no hand-over from the task).
const IDLE_BEFORE_WATCH: Duration = Duration::from_millis(5);

/// One session.
pub(super) struct Session {
    pub(super) id: u64,
    /// Its server process (what `pg_locks` shows, and what a cancel names).
    pub(super) pid: i32,
    /// The connection: statements take it in turn, and the task while the session idles
    /// (`None` once the session ended).
    conn: tokio::sync::Mutex<Option<PgListener>>,
    state: Mutex<SessionState>,
    alive: AtomicBool,
    /// Statements waiting for the connection or running.
    in_flight: AtomicUsize,
    /// The task holds the connection to watch it.
    watching: AtomicBool,
    /// A statement wants the connection: the task gives it up.
    wanted: Notify,
    /// The last statement under way ended.
    idle: Notify,
    /// When the last statement ended.
    last_use: Mutex<Instant>,
    /// The earliest lease end may have moved.
    deadlines_moved: Notify,
    /// Held while a cancel of the waiting statement is being sent: the task waits for it
    /// before sending anything else.
    cancel_gate: CancelGate,
    /// When a statement last came back (a keep-alive answered from it if recent).
    last_answer: Mutex<Instant>,
    /// Statements sent on every session of the backend.
    statements: Arc<AtomicU64>,
    /// A number no other session has: what the records table names a holder's session by
    /// (a process id may be used again after the session ends).
    pub(super) token: i64,
    events: Arc<dyn SessionEvents>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("pid", &self.pid)
            .field("alive", &self.is_alive())
            .finish()
    }
}

impl Session {
    /// Opens a session on a connection of `pool` (a pool of its own, closed with it), and
    /// starts its task.
    pub(super) async fn open(
        id: u64,
        pool: PgPool,
        statements: Arc<AtomicU64>,
        events: Arc<dyn SessionEvents>,
    ) -> Result<Arc<Session>, sqlx::Error> {
        let mut conn = PgListener::connect_with(&pool).await?;
        conn.ignore_pool_close_event(true);
        conn.eager_reconnect(false);
        let pid: i32 = sqlx::query_scalar(sql::SESSION_SETUP)
            .fetch_one(&mut conn)
            .await?;
        statements.fetch_add(1, Ordering::Relaxed);
        let session = Arc::new(Session {
            id,
            pid,
            conn: tokio::sync::Mutex::new(Some(conn)),
            state: Mutex::new(SessionState::new()),
            alive: AtomicBool::new(true),
            in_flight: AtomicUsize::new(0),
            watching: AtomicBool::new(false),
            wanted: Notify::new(),
            idle: Notify::new(),
            last_use: Mutex::new(Instant::now()),
            deadlines_moved: Notify::new(),
            cancel_gate: CancelGate::default(),
            last_answer: Mutex::new(Instant::now()),
            statements,
            token: uuid::Uuid::new_v4().as_u64_pair().0 as i64,
            events: events.clone(),
        });
        tokio::spawn(task::watch(session.clone(), pool, events));
        Ok(session)
    }

    pub(super) fn state(&self) -> MutexGuard<'_, SessionState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    pub(super) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Takes the session for dead: no statement is sent on it any more, and its task
    /// closes the connection.
    pub(super) fn kill(&self) {
        self.alive.store(false, Ordering::Release);
        self.deadlines_moved.notify_one();
        self.wanted.notify_one();
        self.idle.notify_one();
    }

    /// Keeps `key` here for `holder` while an acquisition in `mode` is on its way (ended
    /// by [`settle`](Self::settle)).
    pub(super) fn keep(&self, key: AdvisoryKey, holder: &Holder, mode: Mode) {
        self.state().keep(key, holder, mode);
    }

    /// An acquisition of `key` in `mode` by `holder` on its way here ended: the key is no
    /// longer kept for it, and if it took the lock (`held_until`: its lease end) the holder
    /// has one hold more. Runs inside the acquisition's statement job, so that what the
    /// server did is counted even if the caller went away.
    pub(super) fn settle(
        &self,
        key: AdvisoryKey,
        holder: &Holder,
        mode: Mode,
        held_until: Option<Instant>,
    ) {
        self.state().settle(key, holder, mode, held_until);
        if held_until.is_some() {
            self.deadlines_moved();
        }
        self.events.freed();
    }

    /// Tells the set that this session may be free for other work.
    pub(super) fn freed(&self) {
        self.events.freed();
    }

    /// A lease end moved (a new hold, a renewal): the task looks again.
    pub(super) fn deadlines_moved(&self) {
        self.deadlines_moved.notify_one();
    }

    /// Runs `statement` on the session's connection after the statements that came before
    /// it, and answers its result. It runs to its end even if the caller goes away (what
    /// it does to the session's state, it does inside). An error that ends the connection
    /// ends the session.
    pub(super) async fn run<T, F>(self: &Arc<Self>, statement: F) -> Result<T, SessionError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut PgListener) -> ConnFuture<'c, Result<T, sqlx::Error>>
            + Send
            + 'static,
    {
        if !self.is_alive() {
            return Err(SessionError::Ended);
        }
        let session = self.clone();
        FinishOnDrop(Some(Box::pin(async move {
            session.in_flight.fetch_add(1, Ordering::SeqCst);
            if session.watching.load(Ordering::SeqCst) {
                session.wanted.notify_one();
            }
            let mut guard = session.conn.lock().await;
            let result = match guard.as_mut() {
                Some(conn) if session.is_alive() => {
                    session.statements.fetch_add(1, Ordering::Relaxed);
                    let result = statement(conn).await;
                    match &result {
                        Err(error) if sql::ends_session(error) => session.kill(),
                        _ => *lock(&session.last_answer) = Instant::now(),
                    }
                    if session.is_alive() && session.expiry_due() {
                        task::expire(&session, conn).await;
                    }
                    result.map_err(SessionError::Sql)
                }
                _ => Err(SessionError::Ended),
            };
            *lock(&session.last_use) = Instant::now();
            if session.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
                session.idle.notify_one();
            }
            drop(guard);
            result
        })))
        .await
    }

    /// Whether the session still answers: at once if a statement came back within
    /// `recent`, else after a keep-alive statement (at most [`KEEP_ALIVE_TIMEOUT`]: a
    /// session that does not answer by then is taken for dead).
    pub(super) async fn keep_alive(self: &Arc<Self>, recent: Duration) -> bool {
        if !self.is_alive() {
            return false;
        }
        let last = *self.last_answer.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() < recent {
            return true;
        }
        let session = self.clone();
        let answered = self
            .run(move |conn| {
                Box::pin(async move {
                    match tokio::time::timeout(
                        KEEP_ALIVE_TIMEOUT,
                        sqlx::query(sql::KEEP_ALIVE).execute(&mut *conn),
                    )
                    .await
                    {
                        Ok(result) => result.map(|_| ()),
                        Err(_) => {
                            // The statement is cut off mid-way: the connection is unusable.
                            session.kill();
                            Err(sqlx::Error::Protocol("no answer to a keep-alive".into()))
                        }
                    }
                })
            })
            .await;
        answered.is_ok() && self.is_alive()
    }

    /// The wait on its way on this session (`ctl`) ended (`canceled`: cut off by a
    /// cancel): the session is retired if a cancel was sent that the server may not have
    /// used yet (see [`CancelGate::after_wait`]).
    pub(super) async fn wait_ended(&self, ctl: &Arc<WaitCtl>, canceled: bool) {
        if self
            .cancel_gate
            .after_wait(&self.state, ctl, canceled)
            .await
        {
            self.kill();
        }
    }

    /// Sends a cancel for the waiting statement `ctl` through `via` (another connection),
    /// if it still waits on this session.
    pub(super) async fn cancel(&self, ctl: &Arc<WaitCtl>, via: &PgPool) {
        let sent = self
            .cancel_gate
            .cancel(&self.state, ctl, self.pid, via)
            .await;
        if sent {
            self.statements.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether a hold's lease has ended.
    fn expiry_due(&self) -> bool {
        self.next_deadline()
            .is_some_and(|deadline| deadline <= Instant::now())
    }

    /// The earliest lease end among its holds.
    fn next_deadline(&self) -> Option<Instant> {
        self.state()
            .each_hold()
            .filter(|(_, hold)| hold.total() > 0)
            .map(|(_, hold)| hold.deadline)
            .min()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A statement's future that is finished in the background if its caller drops it: a
/// statement cut off midway would leave the connection unusable and its effect uncounted.
struct FinishOnDrop<T: Send + 'static>(Option<ConnFuture<'static, T>>);

impl<T: Send + 'static> std::future::Future for FinishOnDrop<T> {
    type Output = T;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<T> {
        let future = self.0.as_mut().expect("polled after completion");
        let output = future.as_mut().poll(cx);
        if output.is_ready() {
            self.0 = None;
        }
        output
    }
}

impl<T: Send + 'static> Drop for FinishOnDrop<T> {
    fn drop(&mut self) {
        if let (Some(future), Ok(runtime)) = (self.0.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn(future);
        }
    }
}
