//! The [`Backend`] implementation: one exhaustive `match` per operation, into each kind's
//! own file (`plain.rs`, `fair.rs`, …), and what every kind shares (listening for
//! unlocks, capabilities, the connection's state).

use fred::prelude::*;

use super::echoes::Unsettled;
use super::{names, subscriptions, RedisBackend};
use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, ForceUnlocked, KindSet, LeaveArgs,
    LockInfo, Notices, PermitUsage, ReleaseArgs, ReleaseReply, RenewArgs,
};
use crate::error::BackendError;
use crate::key::LockKey;
use crate::kind::LockKind;
use crate::telemetry::TARGET;

impl Backend for RedisBackend {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        match args.kind {
            // A claim: the plain lock's first acquisition, unless the lock has a record.
            _ if args.unless_recorded && args.kind.rules().records => self.plain_acquire(args),
            _ if args.unless_recorded => self.no_records(args.kind),
            LockKind::Plain => self.plain_acquire(args),
            LockKind::Read | LockKind::Write => self.read_write_acquire(args),
            // A waiting fair acquisition takes (or keeps) its place in the queue; a single
            // try and a reentry never queue.
            LockKind::Fair if args.waits && args.expected == 0 => self.fair_queue(args),
            LockKind::Fair => self.fair_try(args),
            LockKind::Fenced => self.fenced_acquire(args),
            LockKind::Semaphore(_) => self.semaphore_acquire(args),
        }
    }

    fn release(&self, mut args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        let record = args.record.take();
        match (args.kind, record) {
            (kind, Some(record)) if kind.rules().records => self.plain_release(args, Some(record)),
            (kind, Some(_)) => self.no_records(kind),
            // A fenced lock's release is the plain lock's (its successors acquire, each
            // with a token of its own, so it is never handed over).
            (LockKind::Plain | LockKind::Fenced, None) => self.plain_release(args, None),
            (LockKind::Read | LockKind::Write, None) => self.read_write_release(args),
            (LockKind::Fair, None) => self.fair_release(args),
            (LockKind::Semaphore(_), None) => self.semaphore_release(args),
        }
    }

    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        match args.kind {
            // A fair or fenced lock's hash is the plain lock's: renewed with it.
            LockKind::Plain | LockKind::Fair | LockKind::Fenced => self.plain_renew(args),
            LockKind::Read | LockKind::Write => self.read_write_renew(args),
            LockKind::Semaphore(_) => self.semaphore_renew(args),
        }
    }

    fn leave_queue(&self, args: LeaveArgs) -> BoxFuture<Result<(), BackendError>> {
        match args.kind {
            LockKind::Fair => self.fair_leave(args),
            LockKind::Write => self.write_leave(args),
            // No place or mark to take back.
            LockKind::Plain | LockKind::Read | LockKind::Fenced | LockKind::Semaphore(_) => {
                Box::pin(std::future::ready(Ok(())))
            }
        }
    }

    fn set_semaphore_limit(&self, key: LockKey, limit: u32) -> BoxFuture<Result<(), BackendError>> {
        self.semaphore_set_limit(key, limit)
    }

    fn semaphore_usage(&self, key: LockKey) -> BoxFuture<Result<PermitUsage, BackendError>> {
        self.semaphore_read_usage(key)
    }

    fn inspect(&self, key: LockKey) -> BoxFuture<Result<LockInfo, BackendError>> {
        self.inspect_name(key)
    }

    fn force_unlock(&self, key: LockKey) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        self.force_unlock_name(key)
    }

    fn list_names(
        &self,
        pattern: String,
        limit: usize,
    ) -> BoxFuture<Result<Vec<LockKey>, BackendError>> {
        self.scan_names(pattern, limit)
    }

    fn listen(&self, notices: Notices) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(
                target: TARGET,
                "the Redis lock manager was built outside a Tokio runtime; waiters will only \
                 retry when the holder's lease ends"
            );
            return;
        };
        let _ = self.inner.notices.set(notices.clone());
        let mut tasks = subscriptions::spawn(
            &runtime,
            self.inner.commands.first().clone(),
            self.inner.subscriber.clone(),
            self.inner.sharded,
            notices.clone(),
            self.inner.echoes.clone(),
        );
        for client in self.inner.commands.all() {
            tasks.push(runtime.spawn(super::connect::notice_outages(
                client.clone(),
                notices.clone(),
            )));
        }
        self.inner
            .tasks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(tasks);
    }

    fn capabilities(&self) -> Capabilities {
        // A successor's acquisition would skip the replica acknowledgement; waiting for
        // replicas (and undoing on too few) also takes longer than one command.
        let plain = self.inner.replica_ack.is_none();
        // Queued behind sends on their way (each bounded by the time limit), then sent.
        let limit = self.inner.options.timeout.map(|limit| limit * 2);
        Capabilities::new()
            .kinds(KindSet::ALL)
            .records(true)
            .inspects(true)
            .hands_over(plain)
            .attempt_time_limit(limit.filter(|_| plain))
            .subscribes(true)
    }

    fn is_available(&self) -> bool {
        self.inner.commands.is_connected()
    }

    fn unavailable_reason(&self) -> BackendError {
        let config = self.inner.commands.first().client_config();
        BackendError::new(format!(
            "Redis at {} is unreachable (reconnecting)",
            super::connect::servers(&config)
        ))
    }

    fn check_key(&self, key: &LockKey) -> Result<(), String> {
        if !self.inner.commands.first().is_clustered() {
            return Ok(());
        }
        let slot = fred::util::redis_keyslot(key.as_str().as_bytes());
        if fred::util::redis_keyslot(names::unlock_channel(key).as_bytes()) == slot {
            Ok(())
        } else {
            Err(format!(
                "on Redis Cluster the braces in `{key}` must form a hash tag such as `{{order:42}}`; \
                 as they are, the lock and its unlock channel would land in different slots"
            ))
        }
    }

    fn name(&self) -> &'static str {
        "redis"
    }
}

impl RedisBackend {
    /// The answer of a kind without records to an operation that asks for one.
    fn no_records<T: Send + 'static>(&self, kind: LockKind) -> BoxFuture<Result<T, BackendError>> {
        let error = BackendError::new(format!(
            "a lock with a record is a plain lock (not a {} lock)",
            kind.name()
        ));
        Box::pin(std::future::ready(Err(error)))
    }

    /// When this process's subscriber listens on `key`'s channel, a release's notice is
    /// counted as expected back (see `echoes`) until the release's answer settles it. No
    /// lock is taken for a name without local waiters (most releases).
    pub(in crate::backend) fn expect_echo(&self, key: &LockKey) -> Option<Unsettled> {
        let notices = self.inner.notices.get()?;
        if !notices.may_be_watched(key) || !self.inner.echoes.expect(key) {
            return None;
        }
        Some(Unsettled::new(
            self.inner.echoes.clone(),
            notices.clone(),
            key.clone(),
        ))
    }
}
