//! The read-write lock (Redisson's `RReadWriteLock`): readers share, a writer excludes
//! everyone but itself, the writer may also read (a downgrade) and a reader cannot also
//! write. Each reader's holds have their own lease (Redis: one timeout key per hold), and a
//! writer waiting behind readers marks its wait (`{name}:tower_lock:waiting_writers`) so
//! that new readers hold back. `read_write.lua` on Redis, `memory.rs` in memory.

use std::time::Duration;

/// How long a waiting writer's mark lives unless the writer renews it: its attempts, made
/// at least every third of this while it waits, renew it, so that the mark of a writer
/// whose process died holds new readers back for at most this long.
pub(crate) const WRITER_MARK_LEASE: Duration = Duration::from_millis(1500);

pub(in crate::backend) mod memory;
#[cfg(feature = "redis")]
pub(in crate::backend) mod redis;
