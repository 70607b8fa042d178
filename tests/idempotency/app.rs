//! The app under test: handlers that count their runs, can be held until released, and
//! answer in the ways the layer must tell apart; and a client over real TCP.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing;
use axum::Router;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;
use tower_lock::idempotency::{DoNotStore, IdempotencyKey, IdempotencyLayer};

/// What the handlers share: how many times they ran, and a gate that holds them.
#[derive(Clone)]
pub struct Handlers {
    pub runs: Arc<AtomicUsize>,
    pub started: Arc<AtomicUsize>,
    gate: watch::Receiver<bool>,
}

/// Opens the gate of the handlers it was made with.
pub struct Gate(watch::Sender<bool>);

impl Gate {
    pub fn open(&self) {
        self.0.send_replace(true);
    }
}

impl Handlers {
    /// Handlers that run at once (`gated: false`), or wait until the gate opens.
    pub fn new(gated: bool) -> (Handlers, Gate) {
        let (open, gate) = watch::channel(!gated);
        let handlers = Handlers {
            runs: Arc::default(),
            started: Arc::default(),
            gate,
        };
        (handlers, Gate(open))
    }

    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// Returns once `n` handlers have started (they may be held at the gate).
    pub async fn until_started(&self, n: usize) {
        crate::support::eventually("the handler runs", || async {
            (self.started.load(Ordering::SeqCst) >= n).then_some(())
        })
        .await;
    }

    async fn run(&self) -> usize {
        self.started.fetch_add(1, Ordering::SeqCst);
        let mut gate = self.gate.clone();
        let _ = gate.wait_for(|open| *open).await;
        self.runs.fetch_add(1, Ordering::SeqCst) + 1
    }
}

async fn order(
    State(h): State<Handlers>,
    key: Option<axum::Extension<IdempotencyKey>>,
    body: Bytes,
) -> Response {
    let run = h.run().await;
    let key = key.map(|k| k.0 .0).unwrap_or_default();
    let mut response = (
        StatusCode::CREATED,
        format!(
            "{{\"run\":{run},\"key\":\"{key}\",\"body\":{}}}",
            body.len()
        ),
    )
        .into_response();
    response
        .headers_mut()
        .insert("x-run", HeaderValue::from(run));
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    response
}

async fn fail(State(h): State<Handlers>) -> Response {
    let run = h.run().await;
    (StatusCode::INTERNAL_SERVER_ERROR, format!("failed {run}")).into_response()
}

async fn no_store(State(h): State<Handlers>) -> Response {
    let run = h.run().await;
    let mut response = format!("run {run}").into_response();
    response.headers_mut().insert(
        "cache-control",
        HeaderValue::from_static("private, no-store"),
    );
    response
}

async fn do_not_store(State(h): State<Handlers>) -> Response {
    let run = h.run().await;
    let mut response = format!("run {run}").into_response();
    response.extensions_mut().insert(DoNotStore);
    response
}

/// 2 MiB: over the default store limit.
async fn big(State(h): State<Handlers>) -> Response {
    let run = h.run().await;
    let mut body = vec![b'x'; 2 * 1024 * 1024];
    body[0] = b'0' + (run % 10) as u8;
    body.into_response()
}

/// Panics on its first run (the connection closes without a response); answers after.
async fn panics_once(State(h): State<Handlers>) -> Response {
    let run = h.run().await;
    if run == 1 {
        panic!("the handler panics (as a test asks)");
    }
    (StatusCode::CREATED, format!("run {run}")).into_response()
}

async fn binary(State(h): State<Handlers>) -> Response {
    h.run().await;
    let body: Vec<u8> = (0..=255u8).chain(0..=255u8).collect();
    (StatusCode::OK, body).into_response()
}

/// The app: every route behind `layer`.
pub fn app(handlers: &Handlers, layer: IdempotencyLayer) -> Router {
    Router::new()
        .route("/orders", routing::post(order).patch(order).put(order))
        .route("/fail", routing::post(fail))
        .route("/no-store", routing::post(no_store))
        .route("/do-not-store", routing::post(do_not_store))
        .route("/big", routing::post(big))
        .route("/binary", routing::post(binary))
        .route("/panics-once", routing::post(panics_once))
        .route_layer(layer)
        .with_state(handlers.clone())
}

/// Serves `app` on a free loopback port.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// An answer, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn replayed(&self) -> bool {
        self.headers
            .get("idempotent-replayed")
            .is_some_and(|v| v == "true")
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The answer as the client sees it apart from the replay marker and the date.
    pub fn same_as(&self, other: &Answer) -> bool {
        let strip = |h: &HeaderMap| {
            let mut h = h.clone();
            h.remove("idempotent-replayed");
            h.remove("date");
            h
        };
        self.status == other.status
            && self.body == other.body
            && strip(&self.headers) == strip(&other.headers)
    }
}

/// Sends `method path` with `headers` and `body` over a new connection.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: impl Into<Bytes>,
) -> Answer {
    try_request(addr, method, path, headers, body)
        .await
        .expect("an answer")
}

/// [`request`], or the client's error when no answer came (the connection closed).
pub async fn try_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: impl Into<Bytes>,
) -> Result<Answer, String> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, HeaderValue::from_bytes(value).unwrap());
    }
    let response = client
        .request(request.body(Full::new(body.into())).unwrap())
        .await
        .map_err(|error| format!("{error:?}"))?;
    let (head, body) = response.into_parts();
    Ok(Answer {
        status: head.status,
        headers: head.headers,
        body: body
            .collect()
            .await
            .map_err(|error| format!("{error:?}"))?
            .to_bytes(),
    })
}

/// `POST path` with the `Idempotency-Key` header (quoted, as the draft has it).
pub async fn post(addr: SocketAddr, path: &str, key: &str, body: &str) -> Answer {
    let key = format!("\"{key}\"");
    request(
        addr,
        "POST",
        path,
        &[("idempotency-key", key.as_bytes())],
        body.to_owned(),
    )
    .await
}
