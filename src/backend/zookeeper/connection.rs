//! The backend's ZooKeeper session (the lease of every node this process holds), swapped
//! for a new one when it expires (see `events`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use zookeeper_client as zk;

use crate::backend::Notices;
use crate::error::BackendError;

/// The session in use, swapped for a new one when it expires.
pub(super) struct Connection {
    hosts: String,
    session_timeout: Duration,
    client: RwLock<zk::Client>,
    /// Bumped with every new session: a node made in an older one is gone.
    generation: AtomicU64,
    connected: AtomicBool,
    pub(super) notices: OnceLock<Notices>,
    /// The last reason the server could not be reached.
    last_error: Mutex<Option<String>>,
}

impl Connection {
    /// Connects (the first session is made here, so a bad address fails at once).
    pub(super) async fn open(
        hosts: &str,
        session_timeout: Duration,
    ) -> Result<Arc<Connection>, BackendError> {
        let client = connect(hosts, session_timeout).await?;
        Ok(Arc::new(Connection {
            hosts: hosts.to_owned(),
            session_timeout,
            client: RwLock::new(client),
            generation: AtomicU64::new(1),
            connected: AtomicBool::new(true),
            notices: OnceLock::new(),
            last_error: Mutex::new(None),
        }))
    }

    /// The session in use, and its generation.
    pub(super) fn client(&self) -> (zk::Client, u64) {
        let client = self.client.read().unwrap_or_else(|e| e.into_inner());
        (client.clone(), self.generation.load(Ordering::Acquire))
    }

    /// The generation of the session in use.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether the session is connected now.
    pub(super) fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Why the server cannot be reached, as last seen.
    pub(super) fn unavailable_reason(&self) -> BackendError {
        let last = self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        BackendError::new(format!(
            "ZooKeeper ({}) cannot be reached now{}",
            self.hosts,
            last.as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ))
    }

    /// Records whether the session is connected now.
    pub(super) fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Release);
    }

    /// Makes a new session, retrying with backoff until one is made.
    pub(super) async fn reconnect(&self) {
        let mut delay = Duration::from_millis(50);
        loop {
            match connect(&self.hosts, self.session_timeout).await {
                Ok(client) => {
                    *self.client.write().unwrap_or_else(|e| e.into_inner()) = client;
                    self.generation.fetch_add(1, Ordering::AcqRel);
                    self.connected.store(true, Ordering::Release);
                    if let Some(notices) = self.notices.get() {
                        notices.resync();
                    }
                    return;
                }
                Err(error) => {
                    *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(error.to_string());
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

async fn connect(hosts: &str, session_timeout: Duration) -> Result<zk::Client, BackendError> {
    zk::Client::connector()
        .with_session_timeout(session_timeout)
        .connect(hosts)
        .await
        .map_err(|error| {
            BackendError::with_source(format!("could not connect to ZooKeeper at {hosts}"), error)
        })
}

/// A ZooKeeper error as the backend's, saying what was being done.
pub(super) fn failed(what: &str, error: zk::Error) -> BackendError {
    BackendError::with_source(format!("ZooKeeper: could not {what}"), error)
}
