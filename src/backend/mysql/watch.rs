//! A session's watch: the server frees a session's named locks the moment the session ends
//! (killed, closed, broken, the server restarted), and a second connection waiting for the
//! session's own private lock is granted it at that moment. So the holders on a session
//! learn of its end at once, without polling and without waiting for their next renewal.
//! The cost is one more connection per session, idle in that wait.

use sqlx::mysql::{MySqlConnectOptions, MySqlConnection};
use sqlx::{ConnectOptions, Connection};

use super::sql;

/// The name of a session's private lock, held by the session for as long as it lives.
pub(super) fn alive_lock_name() -> String {
    format!("tower-lock:alive:{}", uuid::Uuid::new_v4().simple())
}

/// Takes the session's private lock on its own connection (at once: nobody else knows it).
pub(super) async fn take_alive_lock(
    conn: &mut MySqlConnection,
    name: &str,
) -> Result<(), sqlx::Error> {
    let got: Option<i64> = sqlx::query_scalar(sql::GET_LOCK)
        .bind(name)
        .bind(0.0)
        .fetch_one(&mut *conn)
        .await?;
    match got {
        Some(1) => Ok(()),
        other => Err(sqlx::Error::Protocol(format!(
            "the session's private lock was not granted ({other:?})"
        ))),
    }
}

/// Watches a session: a connection of its own waits for the session's private lock
/// `alive`; granted (the session ended on the server) or failed (the server went away),
/// `ended` runs (the session is ended here too and its holders are told). A session this
/// process ends itself is already over when the watch wakes; a watch that cannot connect
/// leaves the session to its holders' renewals.
pub(super) fn watch<F>(options: MySqlConnectOptions, alive: String, ended: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let Ok(mut watcher) = options.connect().await else {
            return;
        };
        // A year: a session that outlives it is watched by its renewals only.
        let _: Result<Option<i64>, sqlx::Error> = sqlx::query_scalar(sql::WATCH)
            .bind(&alive)
            .bind(31_536_000.0)
            .fetch_one(&mut watcher)
            .await;
        ended.await;
        // Closing frees the private lock if it was granted here.
        let _ = watcher.close().await;
    });
}
