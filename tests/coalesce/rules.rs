//! The layer's rules, in one process on the memory backend (and Redis, for what is kept
//! without a window): credentials, scopes, `vary`, methods, waits that end, a window, a
//! leader whose client goes away, no manager.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use tower::ServiceExt;
use tower_lock::coalesce::{CoalesceLayer, OnWaitEnd};
use tower_lock::LockManager;

use super::support::suite::BackendUnderTest;
use super::{answer, app, get_with, report, two_layers, until_waiting, Answer, Origin};

fn layer() -> CoalesceLayer {
    CoalesceLayer::new().manager(LockManager::memory())
}

/// `count` GETs of `/report` with the headers `headers(n)`, at once.
fn send(
    app: &axum::Router,
    count: usize,
    headers: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<tokio::task::JoinHandle<Answer>> {
    (0..count)
        .map(|n| {
            let (app, headers) = (app.clone(), headers(n));
            tokio::spawn(async move {
                let headers: Vec<(&str, &str)> =
                    headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
                get_with(&app, "/report", &headers).await
            })
        })
        .collect()
}

async fn all(requests: Vec<tokio::task::JoinHandle<Answer>>) -> Vec<Answer> {
    let mut answers = Vec::new();
    for request in requests {
        answers.push(request.await.unwrap());
    }
    answers
}

/// Requests with credentials and no scope are never coalesced: all of them are in the
/// handler at once, and none is marked shared.
#[tokio::test]
async fn credentials_without_a_scope_are_never_shared() {
    let origin = Origin::new(report);
    let app = app(layer(), &origin);
    let requests = send(&app, 4, |n| {
        let credential = if n % 2 == 0 {
            "authorization"
        } else {
            "cookie"
        };
        vec![(credential, format!("secret-{n}"))]
    });
    super::support::eventually("all four run", || async {
        (origin.executions() == 4).then_some(())
    })
    .await;
    origin.open();
    assert!(all(requests).await.iter().all(|a| !a.shared));
}

/// With a scope, requests with credentials are coalesced within their scope alone.
#[tokio::test]
async fn a_scope_shares_within_the_scope() {
    let origin = Origin::new(report);
    let layer = layer().scope(|parts| {
        let token = parts.headers.get("authorization")?.to_str().ok()?;
        Some(token.to_owned())
    });
    let app = app(layer.clone(), &origin);
    let requests = send(&app, 8, |n| {
        vec![("authorization", format!("token-{}", n % 2))]
    });
    until_waiting(&[layer], 6, &origin, 2).await;
    origin.open();
    let answers = all(requests).await;
    assert_eq!(origin.executions(), 2, "one per scope");
    for (n, answer) in answers.iter().enumerate() {
        assert_eq!(answer.body, answers[n % 2].body);
    }
    assert_ne!(answers[0].body, answers[1].body);
}

/// Opted in, requests with different credentials share one execution.
#[tokio::test]
async fn sharing_across_credentials_is_an_explicit_choice() {
    let origin = Origin::new(report);
    let layer = layer().share_across_credentials();
    let app = app(layer.clone(), &origin);
    let requests = send(&app, 4, |n| vec![("authorization", format!("token-{n}"))]);
    until_waiting(&[layer], 3, &origin, 1).await;
    origin.open();
    assert_eq!(all(requests).await.iter().filter(|a| a.shared).count(), 3);
    assert_eq!(origin.executions(), 1);
}

/// Headers named by `vary` are part of the key.
#[tokio::test]
async fn vary_headers_are_part_of_the_key() {
    let origin = Origin::new(report);
    let layer = layer().vary(["accept-language"]);
    let app = app(layer.clone(), &origin);
    let requests = send(&app, 6, |n| {
        vec![("accept-language", ["en", "fr"][n % 2].to_owned())]
    });
    until_waiting(&[layer], 4, &origin, 2).await;
    origin.open();
    all(requests).await;
    assert_eq!(origin.executions(), 2);
}

/// A response whose `Vary` names a request header the key does not hold is not shared;
/// with that header in the key, it is.
#[tokio::test]
async fn a_response_that_varies_beyond_the_key_is_not_shared() {
    fn varies(n: usize) -> axum::response::Response {
        use axum::response::IntoResponse;
        (
            [("vary", "Accept-Language")],
            format!("bonjour, execution {n}"),
        )
            .into_response()
    }
    let origin = Origin::new(varies);
    let plain = layer();
    let app = app(plain.clone(), &origin);
    let requests = send(&app, 4, |_| Vec::new());
    until_waiting(&[plain], 3, &origin, 1).await;
    origin.open();
    let answers = all(requests).await;
    assert_eq!(origin.executions(), 4, "each ran the handler itself");
    assert!(answers.iter().all(|a| !a.shared));

    let origin = Origin::new(varies);
    let varying = layer().vary(["accept-language"]);
    let app = super::app(varying.clone(), &origin);
    let requests = send(&app, 4, |_| vec![("accept-language", "fr".to_owned())]);
    until_waiting(&[varying], 3, &origin, 1).await;
    origin.open();
    assert_eq!(all(requests).await.iter().filter(|a| a.shared).count(), 3);
    assert_eq!(origin.executions(), 1);
}

/// Methods the layer does not cover pass through, all at once.
#[tokio::test]
async fn other_methods_pass_through() {
    let origin = Origin::new(report);
    let app = axum::Router::new()
        .route("/report", axum::routing::post(super::handler))
        .route_layer(layer())
        .with_state(origin.clone());
    let posts: Vec<_> = (0..3)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let request = Request::post("/report").body(Body::empty()).unwrap();
                answer(app.oneshot(request).await.unwrap()).await
            })
        })
        .collect();
    super::support::eventually("all three run", || async {
        (origin.executions() == 3).then_some(())
    })
    .await;
    origin.open();
    assert!(all(posts).await.iter().all(|a| !a.shared));
}

/// A leader slower than the wait: the waiters run the handler themselves (while it still
/// runs), or are answered `503` with `Retry-After` when told to.
#[tokio::test]
async fn waiters_whose_wait_ends_run_themselves_or_are_told_to_retry() {
    let origin = Origin::new(report);
    let app = app(layer().wait(Duration::from_millis(50)), &origin);
    let requests = send(&app, 4, |_| Vec::new());
    super::support::eventually("all four run", || async {
        (origin.executions() == 4).then_some(())
    })
    .await;
    origin.open();
    assert!(all(requests)
        .await
        .iter()
        .all(|a| a.status == StatusCode::OK));

    let origin = Origin::new(report);
    let layer = layer()
        .wait(Duration::from_millis(50))
        .on_wait_end(OnWaitEnd::Reject);
    let app = super::app(layer, &origin);
    let leader = send(&app, 1, |_| Vec::new());
    super::support::eventually("the leader runs", || async {
        (origin.executions() == 1).then_some(())
    })
    .await;
    let request = Request::get("/report").body(Body::empty()).unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["retry-after"], "1");
    assert!(answer(response).await.body.contains("wait_ended"));
    origin.open();
    assert_eq!(all(leader).await[0].status, StatusCode::OK);
    assert_eq!(origin.executions(), 1);
}

/// A window keeps the response for requests that come after it: they get it without an
/// execution. Without one, a request after the execution runs the handler.
#[tokio::test]
async fn a_window_shares_with_later_requests_and_none_runs_again() {
    let origin = Origin::new(report);
    origin.open();
    let app = app(layer().window(Duration::from_secs(60)), &origin);
    let first = get_with(&app, "/report", &[]).await;
    let later = get_with(&app, "/report", &[]).await;
    assert_eq!(origin.executions(), 1);
    assert!(!first.shared && later.shared);
    assert_eq!(first.body, later.body);
}

/// Without a window, a response that nobody waited for is not kept (memory and Redis tell
/// whether anyone waits, in the release's step): the same request right after, through
/// the other layer (another process, as the backend sees it), runs the handler again.
async fn a_response_nobody_waited_for_is_not_kept(backend: BackendUnderTest) {
    let origin = Origin::new(report);
    origin.open();
    let layers = two_layers(backend, |layer| layer).await;
    let apps = layers.map(|layer| app(layer, &origin));
    for app in [&apps[0], &apps[1], &apps[0]] {
        let answer = get_with(app, "/report?day=2", &[]).await;
        assert!(!answer.shared, "{answer:?}");
    }
    assert_eq!(origin.executions(), 3);
}

#[tokio::test]
async fn a_response_nobody_waited_for_is_not_kept_in_memory() {
    a_response_nobody_waited_for_is_not_kept(BackendUnderTest::Memory).await;
}

#[tokio::test]
async fn a_response_nobody_waited_for_is_not_kept_on_redis() {
    a_response_nobody_waited_for_is_not_kept(BackendUnderTest::Redis).await;
}

/// The leader's client goes away: its handler runs on, and the waiters get its response.
#[tokio::test]
async fn a_leader_whose_client_goes_away_still_answers_the_waiters() {
    let origin = Origin::new(report);
    let layer = layer();
    let app = app(layer.clone(), &origin);
    let leader = send(&app, 1, |_| Vec::new());
    super::support::eventually("the leader runs", || async {
        (origin.executions() == 1).then_some(())
    })
    .await;
    let waiters = send(&app, 3, |_| Vec::new());
    until_waiting(std::slice::from_ref(&layer), 3, &origin, 1).await;
    leader[0].abort();
    origin.open();
    let answers = all(waiters).await;
    assert!(answers
        .iter()
        .all(|a| a.status == StatusCode::OK && a.shared));
    assert_eq!(origin.executions(), 1);
    assert_eq!(layer.in_flight(), 0);
}

/// Without a manager the layer says so with a `500` naming the fix.
#[tokio::test]
async fn no_manager_is_a_500_that_names_the_fix() {
    let origin = Origin::new(report);
    origin.open();
    let app = app(CoalesceLayer::new(), &origin);
    let answer = get_with(&app, "/report", &[]).await;
    assert_eq!(answer.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        answer.body.contains("Extension(lock_manager)"),
        "{}",
        answer.body
    );
    assert_eq!(origin.executions(), 0);
}
