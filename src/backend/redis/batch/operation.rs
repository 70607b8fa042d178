//! One lock operation of a batch script call (see `batch.lua`), and the text that tells the
//! script what to do with it.

use std::time::Duration;

use fred::prelude::*;

use crate::backend::LockRecord;
use crate::key::{LockKey, OwnerId};

/// One lock operation for the batch script.
pub(in crate::backend) struct Operation {
    pub(in crate::backend) kind: OpKind,
    pub(in crate::backend) key: LockKey,
    pub(in crate::backend) owner: OwnerId,
    pub(in crate::backend) lease: Duration,
    pub(in crate::backend) expected: u32,
    /// A hand-over's successor (see `batch.lua`).
    pub(in crate::backend) successor: Option<OwnerId>,
    /// A last release's run to announce (see `ReleaseArgs::announce_run`).
    pub(in crate::backend) announce: Option<u32>,
    /// A claim's work (empty: none), or a store's record: see [`OpKind::Claim`] and
    /// [`OpKind::Store`].
    pub(in crate::backend) record: RecordPart,
}

/// What an operation on a lock with a record carries.
pub(in crate::backend) enum RecordPart {
    /// Not an operation on a record.
    None,
    /// A claim: the work it is for (`AcquireArgs::work`; empty: none).
    Work(bytes::Bytes),
    /// A store: the record and its retention.
    Record(LockRecord),
}

/// The longest record stored [only if awaited](LockRecord::only_if_awaited) that goes with
/// its release: a longer one is withheld (most often nobody waits, and Redis pays for each
/// byte an operation carries), and sent by a second call when the release finds that
/// someone waits.
pub(in crate::backend) const RECORD_INLINE_LIMIT: usize = 1024;

impl RecordPart {
    /// A store's record that its operation does not carry (see [`RECORD_INLINE_LIMIT`]).
    pub(in crate::backend) fn withheld(&self) -> bool {
        matches!(self, RecordPart::Record(record)
            if record.only_if_awaited && record.value.len() > RECORD_INLINE_LIMIT)
    }
}

/// What an operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::backend) enum OpKind {
    Acquire,
    Release,
    /// The owner's last hold goes straight to [`Operation::successor`].
    HandOver,
    Renew,
    /// A first acquisition unless the lock has a record (`AcquireArgs::unless_recorded`):
    /// answered with the record when it has one. Keys: the lock and its record.
    Claim,
    /// A release that stores [`Operation::record`] when it ends the owner's last hold, in
    /// the same step, and publishes as a last release does (and, when a claim found the
    /// lock held, the record on the record's channel first). Keys: the lock, its record and
    /// its channel. A [withheld](RecordPart::withheld) record's store that finds someone
    /// waiting keeps the lock and answers `RECORD_WANTED`, as one that finds the lock gone
    /// (only the record tells whether it was a re-sent store that took effect).
    Store,
}

impl Operation {
    /// What the script does (see `batch.lua`); small counts are static text
    /// (rendering an integer costs fred a logarithm).
    pub(in crate::backend) fn op_text(&self) -> Value {
        match (self.kind, self.expected) {
            (OpKind::Renew, _) => Value::from_static_str("r"),
            (OpKind::HandOver, _) => Value::from_static_str("h"),
            (OpKind::Claim, _) => Value::from_static_str("c"),
            (OpKind::Store, _) => Value::from_static_str("s"),
            (OpKind::Acquire, 0) => Value::from_static_str("0"),
            (OpKind::Acquire, 1) => Value::from_static_str("1"),
            (OpKind::Acquire, 2) => Value::from_static_str("2"),
            (OpKind::Acquire, n) => Value::from(n.to_string()),
            // A release always has a hold to drop (`ReleaseArgs::expected` ≥ 1); `-0` would
            // read as an acquisition.
            (OpKind::Release, 0 | 1) => match self.announce {
                None => Value::from_static_str("-1"),
                // A last release that announces the run it ends (rare: once a run).
                Some(holds) => Value::from(format!("a{holds}")),
            },
            (OpKind::Release, 2) => Value::from_static_str("-2"),
            (OpKind::Release, n) => Value::from(format!("-{n}")),
        }
    }
}
