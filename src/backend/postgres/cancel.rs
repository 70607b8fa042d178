//! Cancelling a wait in the server's queue without cutting off anything else: a cancel
//! (`pg_cancel_backend`) stops whatever statement its session runs when it arrives, so the
//! session sends nothing after the wait until a cancel on its way has been sent; and a
//! session whose wait ended before a sent cancel could stop it is retired (the cancel may
//! still arrive, and would stop its next statement).

use std::sync::{Arc, Mutex};

use sqlx::postgres::PgPool;

use super::session_state::{SessionState, WaitCtl};
use super::sql;

/// Held while a cancel of a session's wait is being sent.
#[derive(Debug, Default)]
pub(super) struct CancelGate(tokio::sync::Mutex<()>);

fn lock(state: &Mutex<SessionState>) -> std::sync::MutexGuard<'_, SessionState> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn waits(state: &SessionState, ctl: &Arc<WaitCtl>) -> bool {
    state
        .waiting
        .as_ref()
        .is_some_and(|waiting| Arc::ptr_eq(waiting, ctl))
}

impl CancelGate {
    /// The wait `ctl` ended on the session whose state is `state` (`canceled`: cut off by a
    /// cancel). Waits for a cancel being sent; `true` when a cancel was sent that the
    /// server did not use on the wait: the session must be retired.
    pub(super) async fn after_wait(
        &self,
        state: &Mutex<SessionState>,
        ctl: &Arc<WaitCtl>,
        canceled: bool,
    ) -> bool {
        let cancel_sent = {
            let mut state = lock(state);
            if waits(&state, ctl) {
                state.waiting = None;
            }
            std::mem::take(&mut state.cancel_sent)
        };
        // A cancel being sent now was asked while the statement waited: let it finish.
        drop(self.0.lock().await);
        cancel_sent && !canceled
    }

    /// Sends a cancel for the wait `ctl` of session `pid` through `via` (another
    /// connection), if it still waits; whether a statement was sent.
    pub(super) async fn cancel(
        &self,
        state: &Mutex<SessionState>,
        ctl: &Arc<WaitCtl>,
        pid: i32,
        via: &PgPool,
    ) -> bool {
        let _gate = self.0.lock().await;
        {
            let mut state = lock(state);
            if !waits(&state, ctl) {
                return false;
            }
            state.cancel_sent = true;
        }
        if sqlx::query(sql::CANCEL)
            .bind(pid)
            .execute(via)
            .await
            .is_err()
        {
            // Not sent: the wait ends with its lock timeout.
            tracing::debug!(target: crate::telemetry::TARGET, "tower-lock: a PostgreSQL wait could not be cancelled; it ends with its lock timeout");
        }
        true
    }
}
