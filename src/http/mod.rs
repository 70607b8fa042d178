//! The HTTP face: the layers, the extractors, their rejections, and where keys come from.

mod acquire_failure;
mod fair_extract;
mod fenced_extract;
mod held;
mod held_multi;
mod key_source;
pub mod layer;
mod locked;
mod manager_state;
mod multi_extract;
mod read_write_extract;
mod rejection;
mod semaphore_extract;

pub use fair_extract::FairLocked;
pub use fenced_extract::FencedLocked;
pub use held::HeldLock;
pub use held_multi::HeldMultiLock;
pub use key_source::KeySource;
pub use locked::{Held, Lockable, Locked};
pub use manager_state::LockManagerState;
pub use multi_extract::MultiLocked;
pub use read_write_extract::{ReadLocked, WriteLocked};
pub use rejection::{LockRejection, DEFAULT_BUSY_RETRY_AFTER, SHOWN_CHARS};
pub use semaphore_extract::{Limited, Permit};
