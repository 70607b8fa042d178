//! What a manager shares with every lock it hands out: the backend (through its store),
//! the wait queues, owner ids, settings, the renewal schedule and the runtime for
//! background work.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::runtime::Handle;

use crate::backend::{Backend, Notices};
use crate::engine::background::renewal::Renewals;
use crate::engine::manager::registry::Registry;
use crate::engine::manager::settings::Settings;
use crate::engine::manager::store::Store;
use crate::key::{Ids, OwnerId};
use crate::wait::WaitQueues;

/// What a manager shares with its requests and holds.
pub(crate) struct ManagerInner {
    store: Store,
    queues: WaitQueues,
    ids: Ids,
    settings: Settings,
    renewals: Arc<Renewals>,
    /// Every live hold (for operators: `LockManager::local_holds`).
    registry: Arc<Registry>,
    /// Whether last releases hand the lock to a local waiter: the backend hands over and
    /// the limit is not 0.
    hands_over: bool,
    /// The loss margin of the default lease, worked out once (every hold of a request
    /// without a lease of its own needs it).
    default_margin: Duration,
    /// The runtime the manager was built or first used in: background work (a dropped
    /// guard's release, the renewal task) goes there when it starts outside a runtime.
    /// Holds do not keep a handle each: cloning one changes a count shared by every
    /// thread of the runtime.
    runtime: OnceLock<Handle>,
}

impl ManagerInner {
    /// A manager's state with `settings` on `backend`, listening for its notices.
    pub(in crate::engine) fn new(settings: Settings, backend: impl Backend) -> Self {
        let store = Store::new(backend);
        let capabilities = store.capabilities();
        let queues = WaitQueues::new(!capabilities.subscribes);
        let registry = Arc::new(Registry::default());
        store.listen(Notices::new(queues.clone(), registry.clone()));
        let hands_over = capabilities.hands_over && settings.hand_over_limit > 0;
        let default_margin = settings.loss_margin.for_lease(settings.lease);
        ManagerInner {
            default_margin,
            store,
            queues,
            ids: Ids::new(),
            settings,
            renewals: Arc::default(),
            registry,
            hands_over,
            runtime: Handle::try_current()
                .map(OnceLock::from)
                .unwrap_or_default(),
        }
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn queues(&self) -> &WaitQueues {
        &self.queues
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// How long before `lease` could end a hold is presumed lost (the manager's
    /// [`LossMargin`](crate::lock::LossMargin) for that lease).
    pub(crate) fn loss_margin(&self, lease: Duration) -> Duration {
        if lease == self.settings.lease {
            return self.default_margin;
        }
        self.settings.loss_margin.for_lease(lease)
    }

    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    pub(crate) fn renewals(&self) -> &Arc<Renewals> {
        &self.renewals
    }

    /// The manager's id (the first part of its owner ids).
    pub(crate) fn manager_id(&self) -> &str {
        self.ids.manager_id()
    }

    pub(crate) fn next_owner(&self) -> OwnerId {
        self.ids.next_owner()
    }

    /// Whether last releases may hand the lock to the next local waiter.
    pub(crate) fn hands_over(&self) -> bool {
        self.hands_over
    }

    /// Where background work runs: the current runtime, else the one remembered.
    pub(crate) fn runtime(&self) -> Option<Handle> {
        Handle::try_current()
            .ok()
            .or_else(|| self.runtime.get().cloned())
    }

    /// Whether a runtime is known (remembering the current one on first use): locks that
    /// may need background work are only granted when one is.
    pub(crate) fn has_runtime(&self) -> bool {
        if self.runtime.get().is_some() {
            return true;
        }
        match Handle::try_current() {
            Ok(handle) => {
                let _ = self.runtime.set(handle);
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for ManagerInner {
    fn drop(&mut self) {
        self.renewals.shut_down();
    }
}
