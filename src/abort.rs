//! A spawned task that ends with the last handle on it: a backend's timer or watch that
//! belongs to one hold or place stops when that hold or place is gone, rather than living
//! on until its time comes.

use std::sync::Arc;

use tokio::task::{AbortHandle, JoinHandle};

/// Aborts its task when dropped. Shared (`Arc`) by the copies of the record it belongs to.
#[derive(Debug)]
pub(crate) struct AbortOnDrop(AbortHandle);

impl AbortOnDrop {
    /// Ties `task` to the returned handle.
    pub(crate) fn new<T>(task: JoinHandle<T>) -> Arc<AbortOnDrop> {
        Arc::new(AbortOnDrop(task.abort_handle()))
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
