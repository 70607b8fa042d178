//! Which kind of lock the layer takes: the plain lock, a read-write lock's read or write
//! side, the side the request's method calls for, the fair or the fenced lock, or a
//! semaphore's permit; and the layer's options that choose it.

use super::LockLayer;
use crate::error::LockError;
use crate::kind::{KindSet, LockKind, Permits};
#[cfg(doc)]
use crate::LockManager;

impl LockLayer {
    /// Takes the read side of a read-write lock for GET, HEAD and OPTIONS requests and the
    /// write side for every other method: reads of one key run at once, a write runs
    /// alone (see [`LockManager::read_lock`]). Same key sources and failure answers as the
    /// plain lock; Redisson's `RReadWriteLock` on Redis.
    ///
    /// ```
    /// use axum::{routing::get, Router};
    /// use tower_lock::layer::LockLayer;
    /// use tower_lock::LockManager;
    ///
    /// async fn show() -> &'static str { "order" }      // GETs of one order run together
    /// async fn update() -> &'static str { "updated" }  // a POST runs alone
    ///
    /// let app: Router = Router::new()
    ///     .route("/orders/{orderId}", get(show).post(update))
    ///     .route_layer(
    ///         LockLayer::by_path_param("orderId")
    ///             .read_write_by_method()
    ///             .manager(LockManager::memory()),
    ///     );
    /// ```
    pub fn read_write_by_method(mut self) -> Self {
        self.config_mut().kinds = LayerKinds::ByMethod;
        self
    }

    /// Takes the read side of a read-write lock for every request (a read-only route
    /// beside write routes of the same keys).
    pub fn read_lock(mut self) -> Self {
        self.config_mut().kinds = LayerKinds::Read;
        self
    }

    /// Takes the write side of a read-write lock for every request (a write route beside
    /// read routes of the same keys).
    pub fn write_lock(mut self) -> Self {
        self.config_mut().kinds = LayerKinds::Write;
        self
    }

    /// Takes the fair lock ([`LockManager::fair_lock`]): requests for one key are let in
    /// in the order they arrived, across every process (Redisson's `RFairLock` on Redis).
    /// Same key sources and failure answers as the plain lock; a request whose wait ends
    /// (or whose client goes away) leaves the queue.
    ///
    /// ```
    /// use axum::{routing::post, Router};
    /// use tower_lock::layer::LockLayer;
    /// use tower_lock::LockManager;
    ///
    /// async fn pay() -> &'static str { "paid" } // payments of one order, first come first served
    ///
    /// let app: Router = Router::new()
    ///     .route("/orders/{orderId}/payments", post(pay))
    ///     .route_layer(LockLayer::by_path_param("orderId").fair().manager(LockManager::memory()));
    /// ```
    pub fn fair(mut self) -> Self {
        self.config_mut().kinds = LayerKinds::Fair;
        self
    }

    /// Takes the fenced lock ([`LockManager::fenced_lock`]): the plain lock, plus a fencing
    /// token for each request, which the handler reads from [`HeldLock::fencing_token`] or
    /// its extractor's `fencing_token()` ([`Locked`] reenters the layer's hold with a
    /// token of its own) and sends with its writes, so that the store refuses the late
    /// write of a request whose lock ran out. Redisson's `RFencedLock` on Redis.
    ///
    /// ```
    /// use axum::{routing::put, Extension, Router};
    /// use tower_lock::extract::HeldLock;
    /// use tower_lock::layer::LockLayer;
    /// use tower_lock::LockManager;
    ///
    /// async fn save(Extension(lock): Extension<HeldLock>) -> String {
    ///     let token = lock.fencing_token().expect("a fenced layer's lock has a token");
    ///     // UPDATE documents SET body = $1, fence = $token WHERE id = $2 AND fence < $token
    ///     format!("saved with token {token}")
    /// }
    ///
    /// let app: Router = Router::new()
    ///     .route("/documents/{docId}", put(save))
    ///     .route_layer(LockLayer::by_path_param("docId").fenced().manager(LockManager::memory()));
    /// ```
    ///
    /// [`HeldLock::fencing_token`]: crate::extract::HeldLock::fencing_token
    /// [`Locked`]: crate::extract::Locked
    pub fn fenced(mut self) -> Self {
        self.config_mut().kinds = LayerKinds::Fenced;
        self
    }

    /// Takes a permit of a semaphore ([`LockManager::semaphore`]) instead of a lock: at most
    /// `limit` requests of one key run at once, across every process (Redisson's
    /// `RPermitExpirableSemaphore` on Redis). A request that finds every permit in use waits
    /// (the layer's [`wait`](Self::wait)), then is answered `429 Too Many Requests` with
    /// `Retry-After` ([`LockRejection::NoPermit`]; call
    /// [`busy_status`](Self::busy_status) after this to answer another status); `503` when
    /// the backend is down. The permit is released before the response goes out, or at
    /// once when the request is dropped. For one limit for the whole route, name one key
    /// for every request: [`LockLayer::by_fn`]`(|_| Some("exports".into()))`.
    ///
    /// A limit of 0 or over [`MAX_PERMITS`](crate::lock::MAX_PERMITS) answers every request
    /// 500 ([`LockRejection::InvalidPermits`]), naming the mistake.
    ///
    /// ```
    /// use axum::{routing::post, Router};
    /// use tower_lock::layer::LockLayer;
    /// use tower_lock::LockManager;
    ///
    /// async fn export() -> &'static str { "exported" }
    ///
    /// // At most 8 exports per tenant at once, across every replica of the service.
    /// let app: Router = Router::new()
    ///     .route("/tenants/{tenant}/exports", post(export))
    ///     .route_layer(LockLayer::by_path_param("tenant").semaphore(8).manager(LockManager::memory()));
    /// ```
    ///
    /// [`LockRejection::NoPermit`]: crate::rejection::LockRejection::NoPermit
    /// [`LockRejection::InvalidPermits`]: crate::rejection::LockRejection::InvalidPermits
    pub fn semaphore(mut self, limit: u32) -> Self {
        self.config_mut().kinds = LayerKinds::Semaphore { limit };
        let busy = &mut self.options_mut().busy;
        busy.status = http::StatusCode::TOO_MANY_REQUESTS;
        busy.permits = Some(limit);
        self
    }
}

/// Which kind of lock the layer takes for a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LayerKinds {
    /// The plain lock, for every request.
    Plain,
    /// The read lock, for every request.
    Read,
    /// The write lock, for every request.
    Write,
    /// The read lock for safe methods (GET, HEAD, OPTIONS), the write lock for the others.
    ByMethod,
    /// The fair lock, for every request.
    Fair,
    /// The fenced lock, for every request.
    Fenced,
    /// A permit of a semaphore of this limit, for every request (checked per request: a
    /// builder method cannot fail).
    Semaphore { limit: u32 },
}

impl LayerKinds {
    /// Every kind a request may take.
    pub(crate) fn kinds(self) -> KindSet {
        let one = |kind| KindSet::EMPTY.with(kind);
        match self {
            LayerKinds::Plain => one(LockKind::Plain),
            LayerKinds::Read => one(LockKind::Read),
            LayerKinds::Write => one(LockKind::Write),
            LayerKinds::ByMethod => one(LockKind::Read).with(LockKind::Write),
            LayerKinds::Fair => one(LockKind::Fair),
            LayerKinds::Fenced => one(LockKind::Fenced),
            LayerKinds::Semaphore { .. } => one(LockKind::Semaphore(Permits::ONE)),
        }
    }

    /// The kind a request of `method` takes (an error for a semaphore's invalid limit).
    pub(crate) fn for_method(self, method: &http::Method) -> Result<LockKind, LockError> {
        Ok(match self {
            LayerKinds::Plain => LockKind::Plain,
            LayerKinds::Read => LockKind::Read,
            LayerKinds::Write => LockKind::Write,
            LayerKinds::Fair => LockKind::Fair,
            LayerKinds::Fenced => LockKind::Fenced,
            LayerKinds::Semaphore { limit } => match Permits::new(limit, 1) {
                Ok(permits) => LockKind::Semaphore(permits),
                Err(reason) => return Err(LockError::InvalidPermits { reason }),
            },
            LayerKinds::ByMethod => {
                let safe = [http::Method::GET, http::Method::HEAD, http::Method::OPTIONS];
                if safe.contains(method) {
                    LockKind::Read
                } else {
                    LockKind::Write
                }
            }
        })
    }
}
