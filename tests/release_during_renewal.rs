//! A release that meets a renewal under way, on a backend that answers at once. A
//! `LockGuard`'s release cannot be answered at once then: it falls back to waiting for the
//! renewal, then frees the lock, and no renewal follows it. The HTTP layer drops its own
//! watchdog, renewal and all, with the handler's future, so its release is answered at once.
//!
//! The in-memory backend answers a renewal at once, so the renewal is held open by a
//! wrapper that lets it through only when the test says so. Time is paused: the watchdog's
//! first renewal (a third of the lease) comes as soon as every task waits, and a timeout
//! elapses only once nothing else can run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use http::{Request, StatusCode};
use tokio::sync::{mpsc, Notify, Semaphore};
use tower::ServiceExt;
use tower_lock::backend::BackendError;
use tower_lock::backend::{
    AcquireArgs, Attempt, Backend, BoxFuture, MemoryBackend, ReleaseArgs, ReleaseReply, RenewArgs,
};
use tower_lock::layer::LockLayer;
use tower_lock::lock::Released;
use tower_lock::LockManager;

const LEASE: Duration = Duration::from_secs(30);

/// The in-memory backend, with each renewal held until the test lets one through.
struct HeldRenewals {
    inner: MemoryBackend,
    /// A message per renewal that has started.
    started: mpsc::UnboundedSender<()>,
    /// A permit per renewal allowed to go on.
    proceed: Arc<Semaphore>,
    /// Renewals that reached the in-memory backend.
    renewed: Arc<AtomicUsize>,
}

/// The test's side of a [`HeldRenewals`].
struct Renewals {
    started: mpsc::UnboundedReceiver<()>,
    proceed: Arc<Semaphore>,
    renewed: Arc<AtomicUsize>,
}

impl Renewals {
    /// Checks that `name` is free (takes and releases it), then waits three leases: how
    /// many renewals reached the backend in all.
    async fn free_then_count_renewals(&self, locks: &LockManager, name: &str) -> usize {
        let next = locks
            .lock(name)
            .try_acquire()
            .await
            .expect("the lock is free after the release");
        let _ = next.release().await.unwrap();
        tokio::time::sleep(LEASE * 3).await;
        self.renewed.load(Ordering::SeqCst)
    }
}

fn held_renewals() -> (HeldRenewals, Renewals) {
    let (started, started_rx) = mpsc::unbounded_channel();
    let proceed = Arc::new(Semaphore::new(0));
    let renewed = Arc::new(AtomicUsize::new(0));
    let backend = HeldRenewals {
        inner: MemoryBackend::new(),
        started,
        proceed: proceed.clone(),
        renewed: renewed.clone(),
    };
    let renewals = Renewals {
        started: started_rx,
        proceed,
        renewed,
    };
    (backend, renewals)
}

impl Backend for HeldRenewals {
    fn acquire(&self, args: AcquireArgs) -> BoxFuture<Result<Attempt, BackendError>> {
        self.inner.acquire(args)
    }

    fn release(&self, args: ReleaseArgs) -> BoxFuture<Result<ReleaseReply, BackendError>> {
        self.inner.release(args)
    }

    fn renew(&self, args: RenewArgs) -> BoxFuture<Result<bool, BackendError>> {
        let _ = self.started.send(());
        let (inner, proceed, renewed) = (
            self.inner.clone(),
            self.proceed.clone(),
            self.renewed.clone(),
        );
        Box::pin(async move {
            proceed.acquire().await.expect("never closed").forget();
            renewed.fetch_add(1, Ordering::SeqCst);
            inner.renew(args).await
        })
    }

    fn name(&self) -> &'static str {
        "memory, renewals held"
    }
}

/// Whether `future` is still waiting once nothing else can run (time is paused, so the
/// timeout elapses only then).
async fn still_waiting<F: std::future::Future + Unpin>(future: &mut F) -> bool {
    tokio::time::timeout(LEASE / 6, future).await.is_err()
}

#[tokio::test(start_paused = true)]
async fn a_guard_released_during_a_renewal_waits_for_it_then_frees_the_lock() {
    let (backend, mut renewals) = held_renewals();
    let locks = LockManager::builder().lease(LEASE).backend(backend);
    let guard = locks.lock("order-1").acquire().await.unwrap();
    assert!(guard.is_renewed());
    renewals.started.recv().await.expect("the watchdog renews");

    let mut release = tokio::spawn(guard.release());
    assert!(
        still_waiting(&mut release).await,
        "the release went ahead of the renewal under way"
    );
    assert!(
        locks.lock("order-1").try_acquire().await.is_err(),
        "the lock is held until the release is done"
    );

    renewals.proceed.add_permits(1);
    let released = tokio::time::timeout(LEASE, release)
        .await
        .expect("the release ends once the renewal is done")
        .unwrap();
    assert_eq!(released.unwrap(), Released::Unlocked);
    assert_eq!(
        renewals.free_then_count_renewals(&locks, "order-1").await,
        1,
        "only the renewal under way at the release reached the backend"
    );
}

#[tokio::test(start_paused = true)]
async fn a_response_that_ends_during_a_renewal_drops_it_and_frees_the_lock_at_once() {
    let (backend, mut renewals) = held_renewals();
    let locks = LockManager::builder().lease(LEASE).backend(backend);
    // The handler waits until the test lets it answer, so that the layer's watchdog runs.
    let answer = Arc::new(Notify::new());
    let handler = {
        let answer = answer.clone();
        move || async move {
            answer.notified().await;
            "paid"
        }
    };
    let app = Router::new()
        .route("/orders/{orderId}/pay", post(handler))
        .route_layer(LockLayer::by_path_param("orderId").manager(locks.clone()));
    let request = Request::post("/orders/7/pay").body(Body::empty()).unwrap();
    let response = tokio::spawn(app.oneshot(request));

    renewals.started.recv().await.expect("the watchdog renews");
    answer.notify_one();
    // The layer polls its watchdog itself and drops it with the handler's future, renewal
    // and all, so the release is answered at once. (On Redis a renewal already sent
    // reaches Redis before the release, on the same connection, and finds its owner.)
    let response = tokio::time::timeout(LEASE / 6, response)
        .await
        .expect("the response does not wait for the renewal")
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    renewals.proceed.add_permits(1);
    assert_eq!(
        renewals.free_then_count_renewals(&locks, "7").await,
        0,
        "the dropped renewal never reached the backend, and none came after the release"
    );
}
