//! The session's own task: it watches the idle session's socket, so that a session the
//! server ends is known at once, and frees holds whose lease ended.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use sqlx::postgres::{PgListener, PgPool};
use tokio::time::Instant;

use super::{lock, AdvisoryKey, Holder, Mode, Session, SessionEvents, IDLE_BEFORE_WATCH};
use crate::backend::postgres::sql;

/// The session's task: once the session has been idle a moment, holds the connection and
/// watches its socket (giving it up to any statement that comes), frees holds whose lease
/// ended; when the session ends, closes the connection and reports what was held.
pub(super) async fn watch(session: Arc<Session>, pool: PgPool, events: Arc<dyn SessionEvents>) {
    while session.is_alive() {
        // Idle a moment first: a statement that comes meanwhile needs no hand-over.
        let idle = session.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if session.in_flight.load(Ordering::SeqCst) > 0 {
            idle.await;
            continue;
        }
        let idle_since = *lock(&session.last_use);
        if idle_since.elapsed() < IDLE_BEFORE_WATCH {
            tokio::time::sleep_until(idle_since + IDLE_BEFORE_WATCH).await;
            continue;
        }
        let mut guard = session.conn.lock().await;
        let Some(conn) = guard.as_mut() else {
            break;
        };
        session.watching.store(true, Ordering::SeqCst);
        while session.is_alive() && session.in_flight.load(Ordering::SeqCst) == 0 {
            let moved = session.deadlines_moved.notified();
            let next = session.next_deadline();
            tokio::select! {
                biased;
                _ = session.wanted.notified() => {}
                _ = moved => {}
                _ = sleep_until(next) => expire(&session, conn).await,
                message = conn.try_recv() => match message {
                    // No channel is listened to; a notification is nothing to act on.
                    Ok(Some(_)) => {}
                    // The server closed the connection (terminated, shut down) or it broke.
                    Ok(None) | Err(_) => session.kill(),
                },
            }
        }
        session.watching.store(false, Ordering::SeqCst);
        drop(guard);
        *lock(&session.last_use) = Instant::now();
    }
    let lost: Vec<Holder> = {
        let mut state = session.state();
        state.waiting = None;
        state.drain().into_iter().map(|hold| hold.holder).collect()
    };
    // Closed, not returned to a pool: whatever the server still has for it goes with it.
    drop(session.conn.lock().await.take());
    pool.close().await;
    events.ended(&session, lost);
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Frees the holds whose lease ended (a fixed lease, or a watchdog that could not renew):
/// the server has no leases, so the session ends them at their time.
pub(super) async fn expire(session: &Arc<Session>, conn: &mut PgListener) {
    let now = Instant::now();
    let due: Vec<(AdvisoryKey, Holder, u32, u32)> = session
        .state()
        .each_hold()
        .filter(|(_, hold)| hold.total() > 0 && hold.deadline <= now)
        .map(|(key, hold)| (key, hold.holder.clone(), hold.exclusive, hold.shared))
        .collect();
    for (key, holder, exclusive, shared) in due {
        let mut freed = true;
        for (mode, count) in [(Mode::Exclusive, exclusive), (Mode::Shared, shared)] {
            for _ in 0..count {
                session.statements.fetch_add(1, Ordering::Relaxed);
                let unlocked = sql::unlock(key, mode).fetch_one(&mut *conn).await;
                if let Err(error) = &unlocked {
                    freed = false;
                    if sql::ends_session(error) {
                        session.kill();
                        return;
                    }
                }
            }
        }
        let mut state = session.state();
        if freed {
            if let Some(hold) = state.hold_mut(key, &holder) {
                hold.exclusive = 0;
                hold.shared = 0;
            }
            state.tidy(key);
        }
    }
    session.events.freed();
}
