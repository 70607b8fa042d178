//! The opt-in admin router: list, inspect and force-unlock over HTTP, as JSON.

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

use super::{ForceUnlocked, HolderInfo, LockInfo, NameList};
use crate::error::LockError;
use crate::LockManager;

/// How many names `GET /locks` lists unless `limit` says otherwise.
pub const DEFAULT_LISTED_NAMES: usize = 100;

/// Who asked for an admin operation, for the warning a force-unlock logs: put it in the
/// request's extensions from your authentication layer (the router reads it from there).
#[derive(Debug, Clone)]
pub struct Operator(pub String);

/// An admin router for `manager`, to mount under a path of your own **behind your own
/// authentication** (never mounted by default; anyone who reaches it can free any lock):
///
/// | route | answer |
/// |---|---|
/// | `GET /locks?pattern=order:*&limit=100` | `{"names": [...], "truncated": false}` (pattern `*` and limit 100 by default, at most [`MAX_LISTED_NAMES`](super::MAX_LISTED_NAMES)) |
/// | `GET /locks/{name}` | the inspection (kind, holders, queue, token, permits); `404` when nothing is stored under the name |
/// | `GET /process` | this process's view: `{"manager": id, "holds": [{key, kind, owner, held_ms, renewed, lost, request: {method, path, started_unix_ms}}], "waiting": [{key, waiters}]}` |
/// | `POST /force-unlock/{name}` | `{"kind": "lock", "freed": 1}`; `404` when nothing was there, `409` for data that is no lock; a `GET` is `405` |
///
/// Bad names and patterns are `400`, an unreachable backend `503`; every error is
/// `{"error": "..."}`. Names may contain `/`.
///
/// ```
/// use axum::{middleware, Extension, Router};
/// use tower_lock::admin::{self, Operator};
/// use tower_lock::LockManager;
///
/// # async fn authenticate(request: axum::extract::Request, next: middleware::Next) -> axum::response::Response { next.run(request).await }
/// let locks = LockManager::memory();
/// let app: Router = Router::new().nest(
///     "/internal/locks",
///     // Your authentication first: it rejects strangers and names the operator
///     // (`request.extensions_mut().insert(Operator(user))`).
///     admin::router(locks).layer(middleware::from_fn(authenticate)),
/// );
/// ```
pub fn router(manager: LockManager) -> Router {
    Router::new()
        .route("/locks", get(list))
        .route("/locks/{*name}", get(inspect))
        .route("/force-unlock/{*name}", post(force_unlock))
        .route("/process", get(process))
        .with_state(manager)
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, message: impl std::fmt::Display) -> Response {
    json_response(status, json!({ "error": message.to_string() }))
}

fn failed(error_: LockError) -> Response {
    let status = match &error_ {
        LockError::InvalidName { .. } => StatusCode::BAD_REQUEST,
        LockError::NotALock { .. } => StatusCode::CONFLICT,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    error(status, error_)
}

/// The query's parameters, percent-decoded.
fn parameters(query: Option<&str>) -> Vec<(String, String)> {
    let decode = |text: &str| {
        let text = text.replace('+', " ");
        percent_encoding::percent_decode_str(&text)
            .decode_utf8_lossy()
            .into_owned()
    };
    query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

async fn list(State(manager): State<LockManager>, RawQuery(query): RawQuery) -> Response {
    let parameters = parameters(query.as_deref());
    let get = |name: &str| {
        parameters
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let limit = match get("limit").map(str::parse::<usize>) {
        None => DEFAULT_LISTED_NAMES,
        Some(Ok(limit)) => limit,
        Some(Err(_)) => return error(StatusCode::BAD_REQUEST, "`limit` is not a whole number"),
    };
    match manager
        .list_names(get("pattern").unwrap_or("*"), limit)
        .await
    {
        Ok(NameList { names, truncated }) => json_response(
            StatusCode::OK,
            json!({ "names": names, "truncated": truncated }),
        ),
        Err(e) => failed(e),
    }
}

fn holder_json(holder: &HolderInfo) -> Value {
    json!({
        "owner": holder.owner,
        "process": holder.process(),
        "thread": holder.thread(),
        "side": holder.side.name(),
        "holds": holder.holds,
        "lease_ms": holder.lease.map(|lease| lease.as_millis() as u64),
    })
}

/// An inspection as JSON.
pub(crate) fn info_json(info: &LockInfo) -> Value {
    json!({
        "key": info.key.as_str(),
        "kind": info.kind.map(|kind| kind.name()),
        "holders": info.holders.iter().map(holder_json).collect::<Vec<_>>(),
        "queue": info.queue.iter().map(|waiter| json!({
            "owner": waiter.owner,
            "place_lasts_ms": waiter.place_lasts.map(|d| d.as_millis() as u64),
        })).collect::<Vec<_>>(),
        "queued": info.queued,
        "fencing_token": info.fencing_token,
        "permits": info.permits.map(|usage| json!({
            "limit": usage.limit,
            "in_use": usage.in_use,
            "available": usage.available(),
        })),
    })
}

async fn process(State(manager): State<LockManager>) -> Response {
    let holds: Vec<Value> = manager
        .local_holds()
        .iter()
        .map(|hold| {
            json!({
                "key": hold.key.as_str(),
                "kind": hold.kind.name(),
                "owner": hold.owner.as_str(),
                "held_ms": hold.held_for.as_millis() as u64,
                "renewed": hold.renewed,
                "lost": hold.lost,
                "request": hold.request.as_ref().map(|request| json!({
                    "method": request.method,
                    "path": request.path,
                    "started_unix_ms": request
                        .started
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |since| since.as_millis() as u64),
                })),
            })
        })
        .collect();
    let waiting: Vec<Value> = manager
        .local_waiters()
        .iter()
        .map(|(key, waiters)| json!({ "key": key.as_str(), "waiters": waiters }))
        .collect();
    json_response(
        StatusCode::OK,
        json!({ "manager": manager.id(), "holds": holds, "waiting": waiting }),
    )
}

async fn inspect(State(manager): State<LockManager>, Path(name): Path<String>) -> Response {
    match manager.inspect(&name).await {
        Ok(info) if info.kind.is_none() && info.queued == 0 => error(
            StatusCode::NOT_FOUND,
            format!("nothing is stored under `{}`", info.key),
        ),
        Ok(info) => json_response(StatusCode::OK, info_json(&info)),
        Err(e) => failed(e),
    }
}

async fn force_unlock(
    State(manager): State<LockManager>,
    Path(name): Path<String>,
    operator: Option<axum::Extension<Operator>>,
) -> Response {
    let asked_by = operator.map_or_else(
        || "the admin router (no Operator in the request)".to_owned(),
        |axum::Extension(Operator(who))| who,
    );
    match manager.force_unlock(&name, &asked_by).await {
        Ok(ForceUnlocked { kind: None, .. }) => error(
            StatusCode::NOT_FOUND,
            format!("nothing is stored under `{name}`: nothing to free"),
        ),
        Ok(freed) => json_response(
            StatusCode::OK,
            json!({ "kind": freed.kind.map(|kind| kind.name()), "freed": freed.freed }),
        ),
        Err(e) => failed(e),
    }
}
