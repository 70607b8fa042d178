//! `EVALSHA`'s arguments for a call of the batch script, written into one shared buffer.

use fred::bytes::BytesMut;
use fred::bytes_utils::Str;
use fred::prelude::*;

use super::layout::Layout;
use super::operation::{OpKind, Operation, RecordPart};
use crate::backend::redis::names::{channel_parts, record_parts};

/// `EVALSHA`'s arguments for `operations` (the SHA, the key count, the keys, the script's
/// arguments), written into one buffer that they all share: fred keeps a handle on every
/// argument of a command (to re-send it), and a handle on a buffer of its own costs an
/// allocation, so this saves several per operation.
pub(in crate::backend) fn arguments(
    operations: &[Operation],
    layout: &Layout,
    sha: &Str,
) -> Vec<Value> {
    let mut text = BytesMut::with_capacity(
        operations
            .iter()
            .map(|operation| {
                2 * operation.key.as_str().len()
                    + operation.owner.as_bytes().len()
                    + operation
                        .successor
                        .as_ref()
                        .map_or(0, |s| s.as_bytes().len())
                    + 64
                    + match &operation.record {
                        RecordPart::None => 0,
                        RecordPart::Work(work) => work.len() + operation.key.as_str().len() + 32,
                        RecordPart::Record(_) => 2 * operation.key.as_str().len() + 72,
                    }
            })
            .sum(),
    );
    // Each piece is written, then split off the front of the buffer (all share it).
    let mut piece = |parts: &[&[u8]]| {
        for part in parts {
            text.extend_from_slice(part);
        }
        text.split().freeze()
    };
    // A release has its channel too; a claim its record; a store both (the record's
    // channel, used only when someone waits, is made by the script from the lock's).
    let keys: usize = operations
        .iter()
        .map(|operation| match operation.kind {
            OpKind::Release | OpKind::Claim => 2,
            OpKind::Store => 3,
            OpKind::Acquire | OpKind::HandOver | OpKind::Renew => 1,
        })
        .sum();
    let mut arguments = Vec::with_capacity(2 + keys + operations.len() * 6 + 3);
    arguments.push(Value::String(sha.clone()));
    arguments.push(Value::Integer(keys as i64));
    let ordered = || layout.order().map(|index| &operations[index]);
    for operation in ordered() {
        let key = operation.key.as_str().as_bytes();
        arguments.push(Value::Bytes(piece(&[key])));
        // The record, then the channel (see `batch.lua`).
        let record = matches!(operation.kind, OpKind::Claim | OpKind::Store)
            .then(|| record_parts(&operation.key));
        let channel = matches!(operation.kind, OpKind::Release | OpKind::Store)
            .then(|| channel_parts(&operation.key));
        for parts in [record, channel].into_iter().flatten() {
            arguments.push(Value::Bytes(piece(&parts.map(str::as_bytes))));
        }
    }
    if layout.has_header() {
        for count in [
            layout.shared_exists,
            layout.shared_claims,
            layout.deferred_from,
        ] {
            arguments.push(Value::Bytes(piece(&[itoa::Buffer::new()
                .format(count)
                .as_bytes()])));
        }
    }
    for operation in ordered() {
        let lease = operation.lease.as_millis().clamp(1, i64::MAX as u128) as u64;
        arguments.push(Value::Bytes(piece(&[itoa::Buffer::new()
            .format(lease)
            .as_bytes()])));
        arguments.push(Value::Bytes(piece(&[operation.owner.as_bytes()])));
        arguments.push(operation.op_text());
        if let Some(successor) = &operation.successor {
            arguments.push(Value::Bytes(piece(&[successor.as_bytes()])));
        }
        match &operation.record {
            RecordPart::None => {}
            RecordPart::Work(work) => arguments.push(Value::Bytes(work.clone())),
            RecordPart::Record(record) => {
                let retention = record.retention.as_millis().clamp(1, i64::MAX as u128) as u64;
                arguments.push(Value::Bytes(piece(&[itoa::Buffer::new()
                    .format(operation.expected)
                    .as_bytes()])));
                // Stored only if awaited: the retention's leading '-', or '?' when the
                // record is withheld (see `batch.lua`).
                let withheld = operation.record.withheld();
                let mark: &[u8] = match (record.only_if_awaited, withheld) {
                    (_, true) => b"?",
                    (true, false) => b"-",
                    (false, false) => b"",
                };
                arguments.push(Value::Bytes(piece(&[
                    mark,
                    itoa::Buffer::new().format(retention).as_bytes(),
                ])));
                arguments.push(Value::Bytes(if withheld {
                    bytes::Bytes::new()
                } else {
                    record.value.clone()
                }));
            }
        }
    }
    arguments
}
