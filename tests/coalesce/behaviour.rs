//! On every backend: identical requests over two layers of one backend (two processes, as
//! the backend sees them) run the handler once, a large response as a small one; different
//! keys run apart; responses that say "try again" or "private" are not shared.

use axum::http::StatusCode;

use super::support::suite::{backend_suite, BackendUnderTest};
use super::{
    app, get_with, private, report, two_layers, unavailable, until_waiting, Answer, Origin,
};

/// Sends `count` requests to `uri` spread over `apps`, at once; their answers in order.
fn spread(
    apps: &[axum::Router; 2],
    count: usize,
    uri: impl Fn(usize) -> String,
) -> Vec<tokio::task::JoinHandle<Answer>> {
    (0..count)
        .map(|n| {
            let (app, uri) = (apps[n % 2].clone(), uri(n));
            tokio::spawn(async move { get_with(&app, &uri, &[]).await })
        })
        .collect()
}

async fn answers(requests: Vec<tokio::task::JoinHandle<Answer>>) -> Vec<Answer> {
    let mut answers = Vec::new();
    for request in requests {
        answers.push(request.await.unwrap());
    }
    answers
}

/// `count` GETs of `uri(n)` over two layers of `backend` on an origin answering with
/// `answer`, held in the handler until `waiting` requests wait and `started` executions
/// began; the origin and the answers in order (and nothing is left in flight).
async fn burst(
    backend: BackendUnderTest,
    answer: fn(usize) -> axum::response::Response,
    count: usize,
    uri: impl Fn(usize) -> String,
    (waiting, started): (usize, usize),
) -> (Origin, Vec<Answer>) {
    let origin = Origin::new(answer);
    let layers = two_layers(backend, |layer| layer).await;
    let apps = layers.clone().map(|layer| app(layer, &origin));
    let requests = spread(&apps, count, uri);
    until_waiting(&layers, waiting, &origin, started).await;
    origin.open();
    let answers = answers(requests).await;
    assert_eq!(layers[0].in_flight() + layers[1].in_flight(), 0);
    (origin, answers)
}

/// 64 identical GETs over two processes while the first runs: one execution, 64 identical
/// answers, 63 of them marked shared; nothing left in flight.
async fn identical_requests_run_once(backend: BackendUnderTest) {
    let (origin, answers) =
        burst(backend, report, 64, |_| "/report?day=1".to_owned(), (62, 1)).await;
    assert_eq!(origin.executions(), 1, "one execution for 64 requests");
    assert!(answers
        .iter()
        .all(|a| a.status == StatusCode::OK && a.body == answers[0].body));
    assert_eq!(answers.iter().filter(|a| a.shared).count(), 63);
}

/// A report of 64 KiB.
fn large_report(n: usize) -> axum::response::Response {
    use axum::response::IntoResponse;
    format!(
        "report, execution {n}\n{}",
        "a line of the report\n".repeat(3200)
    )
    .into_response()
}

/// A large response (longer than what a release carries to Redis unless someone waits) is
/// shared as a small one: 16 identical GETs over two processes, one execution, every
/// answer whole.
async fn a_large_response_is_shared_whole(backend: BackendUnderTest) {
    let (origin, answers) = burst(
        backend,
        large_report,
        16,
        |_| "/report?day=2".to_owned(),
        (14, 1),
    )
    .await;
    assert_eq!(origin.executions(), 1, "one execution for 16 requests");
    assert!(answers[0].body.len() > 64_000, "{}", answers[0].body.len());
    assert!(answers
        .iter()
        .all(|a| a.status == StatusCode::OK && a.body == answers[0].body));
    assert_eq!(answers.iter().filter(|a| a.shared).count(), 15);
}

/// Four different queries, eight requests each: four executions, each query's answers alike.
async fn different_keys_run_apart(backend: BackendUnderTest) {
    let (origin, answers) = burst(
        backend,
        report,
        32,
        |n| format!("/report?day={}", n % 4),
        (24, 4),
    )
    .await;
    assert_eq!(origin.executions(), 4, "one execution per query");
    for (n, answer) in answers.iter().enumerate() {
        assert_eq!(answer.body, answers[n % 4].body, "request {n}");
    }
    let mut bodies: Vec<&str> = answers[..4].iter().map(|a| a.body.as_str()).collect();
    bodies.dedup();
    assert_eq!(bodies.len(), 4, "{bodies:?}");
}

/// A `503` is not shared: the waiters run the handler one after another (the next leads),
/// never all at once, and each gets its own answer.
async fn try_again_is_not_shared_and_the_next_leads(backend: BackendUnderTest) {
    let (origin, answers) = burst(backend, unavailable, 8, |_| "/report".to_owned(), (6, 1)).await;
    assert_eq!(origin.executions(), 8);
    assert_eq!(origin.most_at_once(), 1, "one at a time");
    assert!(answers
        .iter()
        .all(|a| a.status == StatusCode::SERVICE_UNAVAILABLE && !a.shared));
}

/// A `Cache-Control: private` response is not shared: the waiters run the handler
/// themselves.
async fn private_responses_are_not_shared(backend: BackendUnderTest) {
    let (origin, answers) = burst(backend, private, 8, |_| "/report".to_owned(), (6, 1)).await;
    assert_eq!(origin.executions(), 8);
    assert!(answers
        .iter()
        .all(|a| a.status == StatusCode::OK && !a.shared));
    let mut bodies: Vec<&str> = answers.iter().map(|a| a.body.as_str()).collect();
    bodies.sort();
    bodies.dedup();
    assert_eq!(bodies.len(), 8, "each its own");
}

backend_suite!(
    [Memory, Redis, Postgres, MySql]
    identical_requests_run_once,
    a_large_response_is_shared_whole,
    different_keys_run_apart,
    try_again_is_not_shared_and_the_next_leads,
    private_responses_are_not_shared,
);
