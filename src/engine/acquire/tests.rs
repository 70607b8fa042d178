//! Tests of the acquisition's checks on what a backend answers.

use crate::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, MemoryBackend, ReleaseArgs, ReleaseReply, RenewArgs,
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
    fn name(&self) -> &'static str {
        "tokenless"
    }
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
