//! Idempotent webhook handling: a lock per delivery id, plus a stored response per
//! completed delivery, following the IETF `Idempotency-Key` draft where it speaks:
//! missing key → 400, duplicate still in progress → 409 (or wait for it), same key with a
//! different payload → 422, completed → the stored response again, marked
//! `Idempotent-Replayed: true`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use fred::prelude::*;
use tokio::time::Instant;
use tower_lock::{LockLayer, LockManager};

/// What to do with a duplicate that arrives while the first delivery is still running.
#[derive(Clone, Copy, Debug)]
pub enum Duplicates {
    /// Answer 409 at once (the draft's "request in progress").
    Reject,
    /// Wait up to this long for the first to finish, then replay its response.
    Wait(Duration),
}

/// A completed delivery: its payload and the response that was sent.
#[derive(Clone, Debug)]
pub struct Record {
    pub request: Bytes,
    pub status: u16,
    pub body: String,
}

/// Where completed deliveries are remembered (for `ttl`).
#[derive(Clone)]
pub enum Store {
    Memory {
        records: Arc<Mutex<HashMap<String, (Record, Instant)>>>,
        ttl: Duration,
    },
    Redis {
        client: Client,
        ttl: Duration,
    },
}

impl Store {
    pub fn memory(ttl: Duration) -> Self {
        Store::Memory {
            records: Arc::default(),
            ttl,
        }
    }

    pub fn redis(client: Client, ttl: Duration) -> Self {
        Store::Redis { client, ttl }
    }

    async fn get(&self, key: &str) -> Result<Option<Record>, Error> {
        match self {
            Store::Memory { records, .. } => {
                let mut records = records.lock().unwrap();
                match records.get(key) {
                    Some((record, expires)) if *expires > Instant::now() => {
                        Ok(Some(record.clone()))
                    }
                    Some(_) => {
                        records.remove(key);
                        Ok(None)
                    }
                    None => Ok(None),
                }
            }
            Store::Redis { client, .. } => {
                let fields: HashMap<String, Value> = client.hgetall(record_key(key)).await?;
                let (Some(request), Some(status), Some(body)) = (
                    fields.get("request"),
                    fields.get("status"),
                    fields.get("body"),
                ) else {
                    return Ok(None);
                };
                Ok(Some(Record {
                    request: request
                        .as_bytes()
                        .map(Bytes::copy_from_slice)
                        .unwrap_or_default(),
                    status: status.as_u64().unwrap_or(500) as u16,
                    body: body.as_string().unwrap_or_default(),
                }))
            }
        }
    }

    async fn put(&self, key: &str, record: Record) -> Result<(), Error> {
        match self {
            Store::Memory { records, ttl } => {
                records
                    .lock()
                    .unwrap()
                    .insert(key.to_owned(), (record, Instant::now() + *ttl));
                Ok(())
            }
            Store::Redis { client, ttl } => {
                let key = record_key(key);
                let fields: Vec<(&str, Value)> = vec![
                    ("request", Value::Bytes(record.request)),
                    ("status", Value::Integer(record.status.into())),
                    ("body", record.body.into()),
                ];
                let pipeline = client.pipeline();
                let _: () = pipeline.hset(&key, fields).await?;
                let _: () = pipeline.pexpire(&key, ttl.as_millis() as i64, None).await?;
                let _: Vec<Value> = pipeline.all().await?;
                Ok(())
            }
        }
    }
}

/// Where a completed delivery's record lives. Locks live under [`LOCK_PREFIX`]: the two
/// prefixes differ before any delivery id begins, so no id can make a lock key equal a
/// record key (with one shared `webhook:` prefix, delivery `done:X` locked the key of
/// delivery `X`'s record, and its release deleted that record).
fn record_key(key: &str) -> String {
    format!("{RECORD_PREFIX}{key}")
}

/// The namespace of the delivery locks.
pub const LOCK_PREFIX: &str = "webhook:lock:";
/// The namespace of the completed deliveries' records.
pub const RECORD_PREFIX: &str = "webhook:done:";

/// Counts deliveries actually processed (not replayed).
#[derive(Clone, Default)]
pub struct Processed(pub Arc<AtomicUsize>);

/// The webhook app: `POST /webhooks` with the delivery id in `key_header`.
pub fn app(
    locks: LockManager,
    store: Store,
    duplicates: Duplicates,
    key_header: &'static str,
) -> (Router, Processed) {
    let processed = Processed::default();
    let wait = match duplicates {
        Duplicates::Reject => Duration::ZERO,
        Duplicates::Wait(wait) => wait,
    };
    let router = Router::new()
        .route(
            "/webhooks",
            post(
                move |headers: HeaderMap,
                      store: Extension<Store>,
                      processed: Extension<Processed>,
                      body: Bytes| {
                    receive(key_header, headers, store, processed, body)
                },
            ),
        )
        .route_layer(
            LockLayer::by_header(key_header)
                .key_prefix(LOCK_PREFIX)
                .wait(wait)
                .manager(locks),
        )
        .layer(Extension(store))
        .layer(Extension(processed.clone()));
    (router, processed)
}

/// Runs under the delivery's lock: at most one delivery with this key is here at a time.
async fn receive(
    key_header: &'static str,
    headers: HeaderMap,
    Extension(store): Extension<Store>,
    Extension(processed): Extension<Processed>,
    payload: Bytes,
) -> Response {
    // The layer already rejected requests without a usable key.
    let Some(key) = headers.get(key_header).and_then(|v| v.to_str().ok()) else {
        return (
            StatusCode::BAD_REQUEST,
            format!("missing {key_header} header\n"),
        )
            .into_response();
    };
    let unavailable = |e: Error| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store unavailable: {e}\n"),
        )
            .into_response()
    };
    match store.get(key).await {
        Err(e) => return unavailable(e),
        Ok(Some(record)) if record.request != payload => {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("{key_header} `{key}` was already used with a different payload\n"),
            )
                .into_response();
        }
        Ok(Some(record)) => {
            let status = StatusCode::from_u16(record.status).unwrap_or(StatusCode::OK);
            let mut response = (status, record.body).into_response();
            response
                .headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            return response;
        }
        Ok(None) => {}
    }
    // The real work: handle the event exactly once.
    processed.0.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let record = Record {
        request: payload,
        status: 200,
        body: format!("processed delivery {key}\n"),
    };
    if let Err(e) = store.put(key, record.clone()).await {
        return unavailable(e);
    }
    (StatusCode::OK, record.body).into_response()
}
