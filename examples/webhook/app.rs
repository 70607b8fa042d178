//! The webhook receiver's routes, on `IdempotencyLayer` (also built by its tests).
//!
//! - `POST /webhooks`: the key from `Idempotency-Key` (the IETF draft's header);
//! - `POST /webhooks/github`: from `X-GitHub-Delivery`, a GUID per delivery, the same on
//!   redelivery;
//! - `POST /webhooks/stripe`: from the event id in the JSON body (`"id": "evt_…"`).
//!
//! Each delivery is handled once; a redelivery gets the first answer again, marked
//! `Idempotent-Replayed: true`, and one that arrives while the first is handled waits for it
//! (or, with `Duplicates::Reject`, is a 409).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::{Extension, Router};
use tower_lock::idempotency::{IdempotencyKey, IdempotencyLayer, OnConcurrent};
use tower_lock::LockManager;

/// What to do with a delivery that arrives while the first with its id is handled.
#[derive(Clone, Copy, Debug)]
pub enum Duplicates {
    /// Answer 409 at once (the draft's "request in progress").
    Reject,
    /// Wait up to this long for the first, then answer its response.
    Wait(Duration),
}

/// The work of handling an event: here, counting it (in Redis when one is given, so that
/// several receivers share the count) and taking `work` to do it.
#[derive(Clone)]
pub struct Work {
    pub handled: Arc<AtomicUsize>,
    pub redis: Option<fred::clients::Client>,
    pub work: Duration,
}

impl Work {
    pub fn new(redis: Option<fred::clients::Client>, work: Duration) -> Self {
        Work {
            handled: Arc::default(),
            redis,
            work,
        }
    }

    /// Handles the delivery `id`: its run number (1 unless it ran before).
    async fn handle(&self, id: &str) -> u64 {
        use fred::interfaces::KeysInterface;
        self.handled.fetch_add(1, Ordering::SeqCst);
        let run = match &self.redis {
            Some(redis) => redis.incr(format!("webhook:runs:{id}")).await.unwrap_or(0),
            None => 1,
        };
        tokio::time::sleep(self.work).await;
        run
    }
}

async fn receive(
    State(work): State<Work>,
    Extension(IdempotencyKey(id)): Extension<IdempotencyKey>,
    _payload: Bytes,
) -> String {
    let run = work.handle(&id).await;
    format!("processed delivery {id} (run {run})\n")
}

/// The Stripe event id of a JSON body (`"id"`).
fn stripe_event_id(body: &Bytes) -> Option<String> {
    let event: serde_json::Value = serde_json::from_slice(body).ok()?;
    event.get("id")?.as_str().map(str::to_owned)
}

/// The receiver: the three routes, each with its own namespace of delivery ids.
pub fn app(locks: LockManager, work: Work, duplicates: Duplicates) -> Router {
    let layer = |layer: IdempotencyLayer, namespace: &str| {
        let layer = layer.namespace(namespace).manager(locks.clone());
        match duplicates {
            Duplicates::Reject => layer.on_concurrent(OnConcurrent::Conflict),
            Duplicates::Wait(wait) => layer.wait(wait),
        }
    };
    Router::new()
        .route("/webhooks", post(receive))
        .route_layer(layer(IdempotencyLayer::new(), "webhooks"))
        .merge(
            Router::new()
                .route("/webhooks/github", post(receive))
                .route_layer(layer(
                    IdempotencyLayer::header("x-github-delivery"),
                    "github",
                )),
        )
        .merge(
            Router::new()
                .route("/webhooks/stripe", post(receive))
                .route_layer(layer(
                    IdempotencyLayer::by_body_fn(|_, body| stripe_event_id(body)),
                    "stripe",
                )),
        )
        .with_state(work)
}
