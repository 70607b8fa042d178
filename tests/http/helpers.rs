//! What the HTTP tests share: a manager per test, a one-shot request, a concurrency gauge.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::Router;
use http::{Request, StatusCode};
use tower::ServiceExt;
use tower_lock::LockManager;

use crate::support::suite::BackendUnderTest;

/// A manager on `backend` with a key prefix of its own.
pub async fn manager(backend: BackendUnderTest) -> LockManager {
    backend.prefixed_manager("http").await
}

/// Sends a request with no body and no headers.
pub async fn oneshot(app: &Router, method: &str, uri: &str) -> (StatusCode, String) {
    let request = Request::builder().method(method).uri(uri);
    respond(app, request.body(Body::empty()).unwrap()).await
}

/// Sends `request`: the status and the body as text.
pub async fn respond(app: &Router, request: Request<Body>) -> (StatusCode, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = axum::body::to_bytes(Body::new(response.into_body()), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Tracks how many handlers run at once.
#[derive(Clone, Default)]
pub struct Inside {
    pub now: Arc<AtomicUsize>,
    pub max: Arc<AtomicUsize>,
}

impl Inside {
    pub fn enter(&self) -> impl Drop + '_ {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        struct Leave<'a>(&'a AtomicUsize);
        impl Drop for Leave<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        Leave(&self.now)
    }
}
