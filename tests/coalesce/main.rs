//! `CoalesceLayer` from outside: identical requests over two layers (as two processes would
//! be) run the handler once on every backend, and the rules that keep responses from being
//! shared (`behaviour`); two real processes on one Redis, and a leader SIGKILLed
//! (`processes`).

#[path = "../support/mod.rs"]
mod support;

mod behaviour;
mod processes;
mod rules;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, Request, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use support::suite::BackendUnderTest;
use tokio::sync::watch;
use tower::ServiceExt;
use tower_lock::coalesce::{CoalesceLayer, CACHE_STATUS};
use tower_lock::LockManager;

/// The handler's side: how many times it ran, and a gate that holds every execution until
/// the test opens it.
#[derive(Clone)]
struct Origin {
    executions: Arc<AtomicUsize>,
    /// Executions running now, and the most that ever ran at once.
    running: Arc<AtomicUsize>,
    most_at_once: Arc<AtomicUsize>,
    open: watch::Sender<bool>,
    /// What the handler answers.
    answer: fn(usize) -> Response,
}

impl Origin {
    fn new(answer: fn(usize) -> Response) -> Origin {
        Origin {
            executions: Arc::default(),
            running: Arc::default(),
            most_at_once: Arc::default(),
            open: watch::Sender::new(false),
            answer,
        }
    }

    fn executions(&self) -> usize {
        self.executions.load(Ordering::SeqCst)
    }

    fn most_at_once(&self) -> usize {
        self.most_at_once.load(Ordering::SeqCst)
    }

    fn open(&self) {
        self.open.send_replace(true);
    }
}

/// The answer of a plain report: `200`, numbered by execution.
fn report(n: usize) -> Response {
    format!("report, execution {n}").into_response()
}

async fn handler(State(origin): State<Origin>, uri: Uri) -> Response {
    let n = origin.executions.fetch_add(1, Ordering::SeqCst) + 1;
    let now = origin.running.fetch_add(1, Ordering::SeqCst) + 1;
    origin.most_at_once.fetch_max(now, Ordering::SeqCst);
    let mut open = origin.open.subscribe();
    let _ = open.wait_for(|open| *open).await;
    origin.running.fetch_sub(1, Ordering::SeqCst);
    let mut response = (origin.answer)(n);
    let query = uri.query().unwrap_or("").to_owned();
    response
        .headers_mut()
        .insert("x-query", query.parse().unwrap());
    response
}

/// An app with `layer` on `GET /report`, over `origin`.
fn app(layer: CoalesceLayer, origin: &Origin) -> Router {
    Router::new()
        .route("/report", get(handler))
        .route_layer(layer)
        .with_state(origin.clone())
}

/// A response as the test reads it.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    status: StatusCode,
    shared: bool,
    body: String,
}

async fn get_with(app: &Router, uri: &str, headers: &[(&str, &str)]) -> Answer {
    let mut request = Request::get(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .unwrap();
    answer(response).await
}

async fn answer(response: Response) -> Answer {
    let status = response.status();
    let shared = shared(response.headers());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    Answer {
        status,
        shared,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

fn shared(headers: &HeaderMap) -> bool {
    headers
        .get(CACHE_STATUS)
        .is_some_and(|value| value == "tower-lock; fwd=miss; collapsed")
}

/// A response marked private.
fn private(n: usize) -> Response {
    (
        [(header::CACHE_CONTROL, "private, max-age=60")],
        format!("yours, execution {n}"),
    )
        .into_response()
}

/// A response that says "try again".
fn unavailable(n: usize) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("busy, execution {n}"),
    )
        .into_response()
}

/// Two managers of one backend (two processes, as the backend sees them).
async fn two_managers(backend: BackendUnderTest) -> [LockManager; 2] {
    match backend {
        BackendUnderTest::Memory => {
            let memory = tower_lock::backend::MemoryBackend::new();
            [
                LockManager::builder().backend(memory.clone()),
                LockManager::builder().backend(memory),
            ]
        }
        _ => [
            backend.manager(LockManager::builder()).await,
            backend.manager(LockManager::builder()).await,
        ],
    }
}

/// Two layers of one namespace (new for each test) on two managers of one backend.
async fn two_layers(
    backend: BackendUnderTest,
    configure: impl Fn(CoalesceLayer) -> CoalesceLayer,
) -> [CoalesceLayer; 2] {
    let namespace = support::unique("reports");
    two_managers(backend)
        .await
        .map(|locks| configure(CoalesceLayer::new().namespace(&namespace).manager(locks)))
}

/// Waits until `waiting` requests wait in `layers`' flights and the origin ran `started`
/// executions.
async fn until_waiting(layers: &[CoalesceLayer], waiting: usize, origin: &Origin, started: usize) {
    support::eventually("the requests wait", || async {
        let now: usize = layers.iter().map(CoalesceLayer::waiting).sum();
        (now >= waiting && origin.executions() >= started).then_some(())
    })
    .await;
}
