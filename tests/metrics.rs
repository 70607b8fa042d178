//! The `metrics` feature: counters and histograms labelled by lock kind, never by key.
//! Run by `scripts/test.sh` as `cargo test --features metrics --test metrics`.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::{routing, Router};
use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use tokio::sync::{mpsc, Semaphore};
use tower::ServiceExt;
use tower_lock::backend::MemoryBackend;
use tower_lock::idempotency::{IdempotencyLayer, OnConcurrent};
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

/// One histogram's samples.
#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

/// A recorder that keeps every counter and histogram by name and labels.
#[derive(Default)]
struct Capture {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Samples>>>,
}

/// `name{label=value,…}`.
fn id(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Recorder for Capture {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut counters = self.counters.lock().unwrap();
        Counter::from_arc(counters.entry(id(key)).or_default().clone())
    }

    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut histograms = self.histograms.lock().unwrap();
        Histogram::from_arc(histograms.entry(id(key)).or_default().clone())
    }
}

/// Held by each test for its whole run: the recorder is global and each test counts from 0.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The recorder, installed once for this test process.
fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture: &'static Capture = Box::leak(Box::default());
        metrics::set_global_recorder(capture).expect("the only recorder");
        capture
    })
}

impl Capture {
    /// Forgets every count: each test starts from 0 (under [`SERIAL`]).
    fn reset(&self) {
        self.counters.lock().unwrap().clear();
        self.histograms.lock().unwrap().clear();
    }

    fn counter(&self, name: &str) -> u64 {
        self.labelled(name, "kind=plain")
    }

    /// The counter `name{labels}`, 0 if it was never incremented.
    fn labelled(&self, name: &str, labels: &str) -> u64 {
        let counters = self.counters.lock().unwrap();
        counters
            .get(&format!("{name}{{{labels}}}"))
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }

    fn samples(&self, name: &str) -> Vec<f64> {
        let histograms = self.histograms.lock().unwrap();
        histograms
            .get(&format!("{name}{{kind=plain}}"))
            .map_or_else(Vec::new, |h| h.0.lock().unwrap().clone())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_and_histograms_by_kind() {
    let _serial = SERIAL.lock().await;
    let capture = capture();
    capture.reset();
    let memory = MemoryBackend::new();
    // The watchdog renews every 500 ms and finds a deleted lock gone then, a second before
    // the loss deadline would fire the signal on its own (uncounted by the watchdog).
    let locks = LockManager::builder()
        .lease(Duration::from_millis(1500))
        .backend(memory.clone());
    let name = support::unique("metrics");

    let guard = locks.lock(&name).acquire().await.unwrap();
    assert_eq!(capture.counter("tower_lock_acquired_total"), 1);
    assert_eq!(capture.samples("tower_lock_wait_seconds").len(), 1);

    assert!(locks.lock(&name).try_acquire().await.is_err());
    assert_eq!(capture.counter("tower_lock_busy_total"), 1);
    let waited = locks
        .lock(&name)
        .wait(Duration::from_millis(20))
        .acquire()
        .await;
    assert!(matches!(waited, Err(LockError::TimedOut { .. })));
    assert_eq!(capture.counter("tower_lock_timed_out_total"), 1);

    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    let held = capture.samples("tower_lock_hold_seconds");
    assert_eq!(held.len(), 1);
    assert!(held[0] >= 0.0);

    // A lock deleted behind its holder: the watchdog finds it gone.
    let guard = locks.lock(&name).acquire().await.unwrap();
    assert!(memory.force_unlock(guard.key()));
    guard.lost().await;
    assert_eq!(capture.counter("tower_lock_lost_total"), 1);
    drop(guard);

    // An unreachable backend.
    let unreachable = format!("redis://127.0.0.1:{}", support::free_port());
    let down = LockManager::builder()
        .redis_lazy(&unreachable)
        .await
        .unwrap();
    let refused = down.lock(&name).try_acquire().await;
    assert!(matches!(refused, Err(LockError::Unavailable(_))));
    assert_eq!(capture.counter("tower_lock_backend_errors_total"), 1);

    // Labelled by kind only: no key in any metric's labels.
    let names: Vec<String> = capture.counters.lock().unwrap().keys().cloned().collect();
    assert!(
        names
            .iter()
            .filter(|n| !n.starts_with("tower_lock_idempotency_"))
            .all(|n| n.ends_with("{kind=plain}")),
        "{names:?}"
    );
    assert_eq!(capture.counter("tower_lock_acquired_total"), 2);
}

/// One request through `app` with the idempotency key `key` (none if empty) and `body`.
async fn post(app: &Router, key: &str, body: &'static str) -> StatusCode {
    let mut request = Request::post("/orders");
    if !key.is_empty() {
        request = request.header("idempotency-key", key);
    }
    let request = request.body(Body::from(body)).unwrap();
    app.clone().oneshot(request).await.unwrap().status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_outcomes_are_counted() {
    let _serial = SERIAL.lock().await;
    let capture = capture();
    capture.reset();
    let outcome = |name: &str| {
        capture.labelled(
            "tower_lock_idempotency_requests_total",
            &format!("outcome={name}"),
        )
    };
    let locks = LockManager::builder().backend(MemoryBackend::new());
    let layer = IdempotencyLayer::new()
        .manager(locks)
        .on_concurrent(OnConcurrent::Conflict);
    let (entered, mut inside) = mpsc::channel::<()>(1);
    let gate = Arc::new(Semaphore::new(0));
    let handler_gate = gate.clone();
    let app = Router::new()
        .route(
            "/orders",
            routing::post(move |body: String| {
                let entered = entered.clone();
                let gate = handler_gate.clone();
                async move {
                    if body == "held" {
                        entered.send(()).await.unwrap();
                        gate.acquire().await.unwrap().forget();
                    }
                    if body == "failing" {
                        return (StatusCode::SERVICE_UNAVAILABLE, "try later");
                    }
                    (StatusCode::CREATED, "made")
                }
            }),
        )
        .route_layer(layer);
    let key = support::unique("metrics-key");

    assert_eq!(post(&app, &key, "order").await, StatusCode::CREATED);
    assert_eq!(outcome("executed"), 1);
    assert_eq!(post(&app, &key, "order").await, StatusCode::CREATED);
    assert_eq!(outcome("replayed"), 1);
    assert_eq!(
        post(&app, &key, "another order").await,
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(outcome("key_reused"), 1);
    assert_eq!(post(&app, "", "order").await, StatusCode::BAD_REQUEST);
    assert_eq!(outcome("missing_key"), 1);
    let failing = support::unique("metrics-key");
    assert_eq!(
        post(&app, &failing, "failing").await,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // Executed, and then not stored: counted under both.
    assert_eq!(outcome("not_stored"), 1);
    assert_eq!(outcome("executed"), 2);

    // A duplicate while the first still runs: 409 at once (Conflict).
    let held = support::unique("metrics-key");
    let first = tokio::spawn({
        let app = app.clone();
        let held = held.clone();
        async move { post(&app, &held, "held").await }
    });
    inside.recv().await.unwrap();
    assert_eq!(post(&app, &held, "held").await, StatusCode::CONFLICT);
    assert_eq!(outcome("in_progress"), 1);
    gate.add_permits(1);
    assert_eq!(first.await.unwrap(), StatusCode::CREATED);
    assert_eq!(outcome("executed"), 3);

    // Labelled by outcome only: no key in any label.
    let names: Vec<String> = capture.counters.lock().unwrap().keys().cloned().collect();
    assert!(
        names
            .iter()
            .filter(|n| n.starts_with("tower_lock_idempotency_"))
            .all(|n| n.contains("{outcome=") && !n.contains("metrics-key")),
        "{names:?}"
    );
}
