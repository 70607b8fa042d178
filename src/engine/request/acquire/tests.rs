//! Tests of the acquisition's checks on what a backend answers.

use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, Capabilities, KindSet, MemoryBackend, ReleaseArgs,
    ReleaseReply, RenewArgs,
};
use crate::error::BackendError;
use crate::{LockError, LockManager};

/// A backend without fenced locks: it takes them like plain ones, with no token.
struct NoTokens(MemoryBackend);

impl Backend for NoTokens {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        let attempt = self.0.acquire(args);
        Box::pin(async move {
            Ok(match attempt.await? {
                Attempt::Fenced(_) => Attempt::Acquired,
                other => other,
            })
        })
    }
    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        self.0.release(args)
    }
    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        self.0.renew(args)
    }
    fn capabilities(&self) -> Capabilities {
        // It says it has fenced locks.
        Capabilities::new().kinds(KindSet::ALL)
    }
    fn name(&self) -> &'static str {
        "tokenless"
    }
}

/// A backend of the plain lock alone, as a backend that says nothing else has.
struct PlainOnly(MemoryBackend);

impl Backend for PlainOnly {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        self.0.acquire(args)
    }
    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        self.0.release(args)
    }
    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        self.0.renew(args)
    }
    fn name(&self) -> &'static str {
        "plain-only"
    }
}

/// What the backend does not have is refused at once with `Unsupported`, naming it, and
/// never reaches the backend; the plain lock works.
#[tokio::test]
async fn what_the_backend_lacks_is_refused_before_it_reaches_it() {
    let memory = MemoryBackend::new();
    let locks = LockManager::builder().backend(PlainOnly(memory.clone()));
    for (request, what) in [
        (locks.fair_lock("x"), "fair locks"),
        (locks.read_lock("x"), "read locks"),
        (locks.fenced_lock("x"), "fenced locks"),
        (locks.semaphore("x", 2), "semaphore locks"),
        (locks.lock("x").unless_recorded(), "locks with a record"),
    ] {
        match request.acquire().await {
            Err(LockError::Unsupported {
                backend,
                what: missing,
            }) => {
                assert_eq!((backend, missing.as_str()), ("plain-only", what))
            }
            other => panic!("{what}: expected Unsupported, got {other:?}"),
        }
    }
    assert!(matches!(
        locks.inspect("x").await,
        Err(LockError::Unsupported { .. })
    ));
    assert!(matches!(
        locks.semaphore_usage("x").await,
        Err(LockError::Unsupported { .. })
    ));
    assert!(memory.is_empty(), "nothing reached the backend");
    let both = locks.multi_lock(["a", "b"]).acquire().await.unwrap();
    assert_eq!(
        both.release().await.unwrap(),
        crate::error::Released::Unlocked
    );
    let guard = locks.lock("x").acquire().await.unwrap();
    assert_eq!(
        guard.release().await.unwrap(),
        crate::error::Released::Unlocked
    );
}

/// A fenced acquisition that a backend grants without a token is an error, and what it
/// took is given back: the name is free at once.
#[tokio::test]
async fn a_fenced_grant_without_a_token_is_refused_and_given_back() {
    let memory = MemoryBackend::new();
    let locks = LockManager::builder().backend(NoTokens(memory.clone()));
    let error = locks.fenced_lock("tokenless").acquire().await.unwrap_err();
    assert!(
        matches!(&error, LockError::Unavailable(e) if e.to_string().contains("no fencing token")),
        "{error}"
    );
    assert!(memory.is_empty(), "nothing left held");
    let plain = locks.lock("tokenless").try_acquire().await.expect("free");
    assert_eq!(plain.fencing_token(), None);
    assert_eq!(
        plain.release().await.unwrap(),
        crate::error::Released::Unlocked
    );
}
