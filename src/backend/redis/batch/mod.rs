//! Group commit: lock operations that arrive while two sends are on their way to Redis
//! are sent together, in one script call, as soon as one returns.
//!
//! An operation that finds a send slot free is sent at once (no extra task hop, so an
//! uncontended lock costs one round trip as before). Under load the operations of many
//! requests share one round trip and one script run, which is most of what a lock costs
//! Redis and the client (each command costs fred a channel hop, an encoding and often a
//! write syscall; each script call costs Redis a fixed overhead).
//!
//! Each operation carries the count it expects (see `scripts`), so a batch that fred
//! re-sends after a reconnect applies at most once, like a single operation.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use fred::prelude::*;
use tokio::sync::oneshot;

mod arguments;
mod layout;
mod operation;
mod script;

use crate::backend::redis::commands::eval_script;
use crate::backend::redis::scripts;
use crate::backend::redis::BackendInner;
use crate::backend::BoxFuture;
use crate::error::BackendError;
use arguments::arguments;
use layout::Layout;
pub(in crate::backend) use operation::{OpKind, Operation, RecordPart};
pub(in crate::backend) use script::script;

/// The most operations one script call carries (a bound on how long it runs in Redis).
const MAX_BATCH: usize = 128;

/// Sends on their way at once; the next operations wait and go together.
///
/// Measured with 64 concurrent workers on 2 cores: no batching 28–34k lock+unlock/s, one
/// send at a time 36–42k/s, two 49–54k/s, three no better than two.
const MAX_IN_FLIGHT: usize = 2;

/// What the script answered for one operation.
#[derive(Debug)]
pub(in crate::backend) enum Answer {
    /// A reply code (see the script).
    Code(i64),
    /// A claim found the lock's record.
    Recorded(bytes::Bytes),
}

impl Answer {
    /// The reply code; a record where an operation never answers one is an error.
    pub(in crate::backend) fn code(self) -> Result<i64, BackendError> {
        match self {
            Answer::Code(code) => Ok(code),
            Answer::Recorded(_) => Err(BackendError::new(
                "Redis answered a record to an operation that never reads one",
            )),
        }
    }
}

type Reply = Result<Answer, BackendError>;

/// An operation waiting for a send slot, with where its reply goes.
struct QueuedOperation {
    operation: Operation,
    reply: oneshot::Sender<Reply>,
}

/// Operations waiting for a send slot.
pub(in crate::backend) struct Batcher {
    state: Mutex<BatcherState>,
    /// The runtime that batches are sent from: the client's (where it was made), so that
    /// a batch does not die with the runtime of the caller that happened to free a slot.
    runtime: Option<tokio::runtime::Handle>,
}

#[derive(Default)]
struct BatcherState {
    /// Sends (single or batch) on their way to Redis.
    in_flight: usize,
    /// Counts the times the connection was found down: sends of an earlier generation may
    /// hang on the lost connection until their time limit, and no longer hold a slot.
    generation: u64,
    queue: Vec<QueuedOperation>,
    /// Operations sent in a batch of more than one (for tests and tuning).
    batched: u64,
}

impl Batcher {
    /// Sends batches from the current runtime, if any (else from the caller's).
    pub(in crate::backend) fn new() -> Batcher {
        Batcher {
            state: Mutex::default(),
            runtime: tokio::runtime::Handle::try_current().ok(),
        }
    }

    fn state(&self) -> MutexGuard<'_, BatcherState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many operations were sent together with others.
    pub(in crate::backend) fn batched(&self) -> u64 {
        self.state().batched
    }

    /// How many operations wait for a send slot now.
    pub(in crate::backend) fn queued(&self) -> usize {
        self.state().queue.len()
    }
}

/// An operation on its way to Redis.
///
/// Under load nearly every operation is queued, and then only waits for its batch's reply:
/// a small future. Only an operation that found a send slot free carries fred's command
/// future, which is several kilobytes (boxed apart, so that queued operations do not pay
/// for its size: an allocation over 1 KiB misses the allocator's per-thread cache).
pub(in crate::backend) enum Submitted {
    Sent(BoxFuture<Reply>),
    Queued(oneshot::Receiver<Reply>),
    /// Failed before it was sent (the connection is down).
    Failed(Option<BackendError>),
}

impl Future for Submitted {
    type Output = Reply;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Reply> {
        match self.get_mut() {
            Submitted::Sent(send) => send.as_mut().poll(cx),
            Submitted::Queued(receiver) => Pin::new(receiver)
                .poll(cx)
                .map(|reply| reply.unwrap_or_else(|_| Err(missing_reply()))),
            Submitted::Failed(error) => {
                Poll::Ready(Err(error.take().unwrap_or_else(missing_reply)))
            }
        }
    }
}

/// Sends `operation` now if a send slot is free, else with the next batch. Fails at once
/// while the client knows its connection is down: nothing waits for a reconnect.
pub(in crate::backend) fn submit(inner: &Arc<BackendInner>, operation: Operation) -> Submitted {
    let mut state = inner.batcher.state();
    if !inner.commands.is_connected() {
        state.connection_lost();
        return Submitted::Failed(Some(disconnected()));
    }
    if state.in_flight < MAX_IN_FLIGHT && state.queue.is_empty() {
        state.in_flight += 1;
        let slot = SendSlot(inner.clone(), state.generation);
        drop(state);
        // Whatever happens to this future (even a drop before its first poll), its slot
        // is handed on once the send is over.
        let inner = inner.clone();
        return Submitted::Sent(Box::pin(async move {
            let _slot = slot;
            let mut replies = call(&inner, std::slice::from_ref(&operation)).await;
            replies.pop().unwrap_or_else(|| Err(missing_reply()))
        }));
    }
    let (reply, receiver) = oneshot::channel();
    state.queue.push(QueuedOperation { operation, reply });
    // Normally both slots are busy here; if not, nothing else would send the queue.
    send_queued(inner, state);
    Submitted::Queued(receiver)
}

fn missing_reply() -> BackendError {
    BackendError::new("the lock operation was abandoned before Redis answered")
}

fn disconnected() -> BackendError {
    BackendError::new("the connection to Redis is down (reconnecting); not waiting for it")
}

impl BatcherState {
    /// The connection is down: queued operations fail now (they were never sent), and the
    /// sends on their way stop counting (they may hang until their time limit; operations
    /// after a reconnect must not queue behind them).
    fn connection_lost(&mut self) {
        for queued in self.queue.drain(..) {
            let _ = queued.reply.send(Err(disconnected()));
        }
        if self.in_flight > 0 {
            self.in_flight = 0;
            self.generation += 1;
        }
    }
}

/// A send slot of one generation (see [`BatcherState::generation`]), freed on drop: the queue
/// gets it.
struct SendSlot(Arc<BackendInner>, u64);

impl Drop for SendSlot {
    fn drop(&mut self) {
        let mut state = self.0.batcher.state();
        if state.generation == self.1 {
            state.in_flight -= 1;
        }
        send_queued(&self.0, state);
    }
}

/// Sends queued operations in batches while send slots are free.
fn send_queued<'a>(inner: &'a Arc<BackendInner>, mut state: MutexGuard<'a, BatcherState>) {
    if !state.queue.is_empty() && !inner.commands.is_connected() {
        state.connection_lost();
        return;
    }
    while state.in_flight < MAX_IN_FLIGHT {
        // Callers that went away before their operation was sent: nothing to do.
        state.queue.retain(|queued| !queued.reply.is_closed());
        if state.queue.is_empty() {
            return;
        }
        let current;
        let runtime = match &inner.batcher.runtime {
            Some(runtime) => runtime,
            None => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    current = runtime;
                    &current
                }
                Err(_) => {
                    // No runtime (dropped at shutdown): the queued callers learn it at once.
                    for queued in state.queue.drain(..) {
                        let _ = queued
                            .reply
                            .send(Err(BackendError::new("the Tokio runtime is gone")));
                    }
                    return;
                }
            },
        };
        let take = state.queue.len().min(MAX_BATCH);
        if take > 1 {
            state.batched += take as u64;
        }
        let batch: Vec<QueuedOperation> = state.queue.drain(..take).collect();
        state.in_flight += 1;
        let slot = SendSlot(inner.clone(), state.generation);
        // Spawned without the lock: a runtime that is shutting down drops the task at once,
        // and with it the slot, whose drop takes the lock. The slot lives in the task's
        // future, so that such a drop (even before a first poll) gives it back.
        drop(state);
        runtime.spawn(async move {
            let (operations, senders): (Vec<_>, Vec<_>) = batch
                .into_iter()
                .map(|queued| (queued.operation, queued.reply))
                .unzip();
            let replies = send(&slot.0, operations).await;
            for (sender, reply) in senders.into_iter().zip(replies) {
                let _ = sender.send(reply);
            }
            drop(slot);
        });
        state = inner.batcher.state();
    }
}

/// Runs `operations` in script calls (one per cluster slot) and returns one reply each.
async fn send(inner: &Arc<BackendInner>, operations: Vec<Operation>) -> Vec<Reply> {
    if !inner.commands.first().is_clustered() || operations.len() == 1 {
        return call(inner, &operations).await;
    }
    // Keys of one script call must share a slot: one call per slot, all at once.
    let mut slots: Vec<(u16, Vec<usize>)> = Vec::new();
    for (index, operation) in operations.iter().enumerate() {
        let slot = fred::util::redis_keyslot(operation.key.as_str().as_bytes());
        match slots.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, indexes)) => indexes.push(index),
            None => slots.push((slot, vec![index])),
        }
    }
    let mut operations: Vec<Option<Operation>> = operations.into_iter().map(Some).collect();
    let mut calls = tokio::task::JoinSet::new();
    for (_, indexes) in slots {
        let group: Vec<Operation> = indexes
            .iter()
            .map(|&i| operations[i].take().expect("each operation is in one slot"))
            .collect();
        let inner = inner.clone();
        calls.spawn(async move { (indexes, call(&inner, &group).await) });
    }
    let mut replies: Vec<Option<Reply>> = (0..operations.len()).map(|_| None).collect();
    while let Some(done) = calls.join_next().await {
        if let Ok((indexes, group_replies)) = done {
            for (index, reply) in indexes.into_iter().zip(group_replies) {
                replies[index] = Some(reply);
            }
        }
    }
    replies
        .into_iter()
        .map(|reply| reply.unwrap_or_else(|| Err(missing_reply())))
        .collect()
}

/// One script call for `operations` (all in one slot).
async fn call(inner: &Arc<BackendInner>, operations: &[Operation]) -> Vec<Reply> {
    let layout = Layout::of(operations);
    let arguments = || arguments(operations, &layout, inner.batch.sha1());
    let reply = |value: Value, operation: &Operation| match value {
        Value::Integer(code) => Ok(Answer::Code(code)),
        Value::Array(parts) if operation.kind == OpKind::Claim => recorded(parts),
        other => Err(BackendError::new(format!(
            "Redis rejected the lock operation on `{}`: {} (does the key hold other data?)",
            operation.key,
            other.as_string().unwrap_or_default()
        ))),
    };
    let client = inner.next_client();
    let script = &inner.batch;
    match eval_script(
        client,
        &inner.options,
        script,
        &operations[0].key,
        arguments,
    )
    .await
    {
        // A single operation's reply comes bare (a claim's record too: an array of two).
        Ok(value) if operations.len() == 1 && !is_batch_reply(&value, &operations[0]) => {
            vec![reply(value, &operations[0])]
        }
        Ok(Value::Array(values)) if values.len() == operations.len() => {
            let mut replies: Vec<Option<Reply>> = (0..operations.len()).map(|_| None).collect();
            for (value, index) in values.into_iter().zip(layout.order()) {
                replies[index] = Some(reply(value, &operations[index]));
            }
            replies
                .into_iter()
                .map(|reply| reply.unwrap_or_else(|| Err(missing_reply())))
                .collect()
        }
        Ok(value) => {
            let values = value.into_array();
            let error = format!(
                "Redis answered {} results for {} lock operations",
                values.len(),
                operations.len()
            );
            operations
                .iter()
                .map(|_| Err(BackendError::new(error.clone())))
                .collect()
        }
        Err(error) => operations.iter().map(|_| Err(error.clone())).collect(),
    }
}

/// Whether a call's reply is the batch's array of replies rather than one operation's bare
/// reply (a claim's record is an array too: its code, then the record).
fn is_batch_reply(value: &Value, operation: &Operation) -> bool {
    match value {
        Value::Array(parts) if operation.kind == OpKind::Claim => {
            !matches!(parts.first(), Some(Value::Integer(code)) if *code == scripts::RECORDED)
        }
        Value::Array(_) => true,
        _ => false,
    }
}

/// A claim's `{RECORDED, record}`.
fn recorded(parts: Vec<Value>) -> Reply {
    let mut parts = parts.into_iter();
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Value::Integer(scripts::RECORDED)), Some(Value::Bytes(record)), None) => {
            Ok(Answer::Recorded(record))
        }
        (Some(Value::Integer(scripts::RECORDED)), Some(Value::String(record)), None) => Ok(
            Answer::Recorded(bytes::Bytes::copy_from_slice(record.as_bytes())),
        ),
        other => Err(BackendError::new(format!(
            "Redis answered {other:?} to a claim, which the lock script never answers"
        ))),
    }
}
