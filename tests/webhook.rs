//! The webhook example: duplicate deliveries on both backends, GitHub's and Stripe's keys,
//! and two receiver processes on one Redis — duplicates spread over both are handled once,
//! and a receiver SIGKILLed mid-delivery has the delivery handled again by the other once
//! its lock's lease ends, never while it still holds it.

mod support;

#[path = "../examples/webhook/app.rs"]
#[allow(dead_code)]
mod webhook_app;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use fred::prelude::*;
use http::{Request, StatusCode};
use support::suite::{backend_suite, BackendUnderTest};
use support::RedisServer;
use tower::ServiceExt;
use tower_lock::LockManager;
use webhook_app::{Duplicates, Work};

async fn app(backend: BackendUnderTest, duplicates: Duplicates) -> (Router, Work) {
    let locks = backend.manager(LockManager::builder()).await;
    let redis = match backend.url() {
        None => None,
        Some(url) => Some(support::client(&url).await),
    };
    let work = Work::new(redis, Duration::from_millis(50));
    (webhook_app::app(locks, work.clone(), duplicates), work)
}

async fn deliver(
    app: &Router,
    path: &str,
    header: Option<(&str, &str)>,
    payload: &str,
) -> (StatusCode, bool, String) {
    let mut request = Request::post(path);
    if let Some((name, value)) = header {
        request = request.header(name, value);
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::from(payload.to_owned())).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let replayed = response.headers().get("idempotent-replayed").is_some();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    (
        status,
        replayed,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

fn key(value: &str) -> Option<(&'static str, &str)> {
    Some(("Idempotency-Key", value))
}

async fn concurrent_duplicates_are_processed_once(backend: BackendUnderTest) {
    let (app, work) = app(backend, Duplicates::Wait(Duration::from_secs(20))).await;
    let id = support::unique("evt");
    let deliveries: Vec<_> = (0..8)
        .map(|_| {
            let (app, id) = (app.clone(), id.clone());
            tokio::spawn(async move { deliver(&app, "/webhooks", key(&id), r#"{"paid":1}"#).await })
        })
        .collect();
    let mut replays = 0;
    for delivery in deliveries {
        let (status, replayed, body) = delivery.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body, format!("processed delivery {id} (run 1)\n"));
        replays += usize::from(replayed);
    }
    assert_eq!(work.handled.load(Ordering::SeqCst), 1, "handled once");
    assert_eq!(replays, 7, "every duplicate got the stored response");

    // A redelivery after completion: replayed, not handled again.
    let (status, replayed, _) = deliver(&app, "/webhooks", key(&id), r#"{"paid":1}"#).await;
    assert_eq!((status, replayed), (StatusCode::OK, true));
    assert_eq!(work.handled.load(Ordering::SeqCst), 1);

    // The same id with another payload: 422.
    let (status, _, body) = deliver(&app, "/webhooks", key(&id), r#"{"paid":2}"#).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(work.handled.load(Ordering::SeqCst), 1);

    // No id: 400.
    let (status, _, body) = deliver(&app, "/webhooks", None, "{}").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

async fn duplicates_in_progress_get_409_when_rejecting(backend: BackendUnderTest) {
    let (app, work) = app(backend, Duplicates::Reject).await;
    let id = support::unique("evt");
    let deliveries: Vec<_> = (0..8)
        .map(|_| {
            let (app, id) = (app.clone(), id.clone());
            tokio::spawn(async move { deliver(&app, "/webhooks", key(&id), "{}").await })
        })
        .collect();
    let mut in_progress = 0;
    for delivery in deliveries {
        let (status, replayed, body) = delivery.await.unwrap();
        match status {
            StatusCode::CONFLICT => in_progress += 1,
            StatusCode::OK => assert!(body.starts_with("processed"), "{body} {replayed}"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(work.handled.load(Ordering::SeqCst), 1);
    assert!(
        in_progress >= 1,
        "a duplicate arrived while the first was handled"
    );
}

/// Delivery ids built to reach into other names (`done:X`, `lock:X`; a key of another
/// layer) are ids of their own: each is handled once and replayed.
async fn ids_built_to_collide_are_kept_apart(backend: BackendUnderTest) {
    let (app, work) = app(backend, Duplicates::Wait(Duration::from_secs(20))).await;
    let id = support::unique("evt");
    let ids = [
        id.clone(),
        format!("done:{id}"),
        format!("lock:{id}"),
        format!("{{{id}}}"),
        format!("idempotency:{{{id}}}"),
    ];
    let deliveries: Vec<_> = ids
        .iter()
        .cloned()
        .map(|id| {
            let app = app.clone();
            tokio::spawn(async move { deliver(&app, "/webhooks", key(&id), "{}").await })
        })
        .collect();
    for delivery in deliveries {
        let (status, replayed, body) = delivery.await.unwrap();
        assert_eq!((status, replayed), (StatusCode::OK, false), "{body}");
    }
    assert_eq!(work.handled.load(Ordering::SeqCst), ids.len());
    for id in &ids {
        let (status, replayed, body) = deliver(&app, "/webhooks", key(id), "{}").await;
        assert_eq!(
            (status, replayed),
            (StatusCode::OK, true),
            "`{id}` is replayed: {body}"
        );
    }
    assert_eq!(
        work.handled.load(Ordering::SeqCst),
        ids.len(),
        "none ran twice"
    );
}

/// GitHub's delivery header and Stripe's event id in the body are the keys of their routes;
/// a Stripe event without an id is a 400.
async fn github_and_stripe_keys(backend: BackendUnderTest) {
    let (app, work) = app(backend, Duplicates::Wait(Duration::from_secs(20))).await;
    let delivery = support::unique("72d3162e");
    let github = Some(("X-GitHub-Delivery", delivery.as_str()));
    let first = deliver(&app, "/webhooks/github", github, "{}").await;
    let again = deliver(&app, "/webhooks/github", github, "{}").await;
    assert_eq!((first.0, first.1), (StatusCode::OK, false), "{}", first.2);
    assert_eq!((again.0, again.1, again.2), (StatusCode::OK, true, first.2));
    let event = format!(
        r#"{{"id":"{}","type":"charge.succeeded"}}"#,
        support::unique("evt")
    );
    let first = deliver(&app, "/webhooks/stripe", None, &event).await;
    let again = deliver(&app, "/webhooks/stripe", None, &event).await;
    assert_eq!((first.0, first.1), (StatusCode::OK, false), "{}", first.2);
    assert_eq!((again.0, again.1, again.2), (StatusCode::OK, true, first.2));
    let (status, _, body) = deliver(&app, "/webhooks/stripe", None, r#"{"type":"x"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(work.handled.load(Ordering::SeqCst), 2);
}

backend_suite!(
    [Memory, Redis, Postgres, MySql]
    concurrent_duplicates_are_processed_once,
    duplicates_in_progress_get_409_when_rejecting,
    ids_built_to_collide_are_kept_apart,
    github_and_stripe_keys,
);

/// A receiver process (the example) on a free port; its address.
fn receiver(url: &str, work_ms: &str, lease_ms: &str) -> (Child, String) {
    let mut child = Command::new(support::example("webhook"))
        .env("REDIS_URL", url)
        .env("PORT", "0")
        .env("WORK_MS", work_ms)
        .env("LEASE_MS", lease_ms)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the webhook example (cargo build --examples)");
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let first = lines
        .next()
        .expect("the receiver says where it listens")
        .unwrap();
    let base = first
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .expect("an address")
        .to_owned();
    std::thread::spawn(move || for _ in lines {});
    (child, base)
}

/// `POST base + /webhooks` with delivery `id`, over real TCP.
async fn post(base: &str, id: &str) -> (u16, String) {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<axum::body::Bytes>>();
    let request = Request::post(format!("{base}/webhooks"))
        .header("Idempotency-Key", format!("\"{id}\""))
        .body(http_body_util::Full::new(axum::body::Bytes::from_static(
            b"{}",
        )))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let status = response.status().as_u16();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// 64 duplicates of one delivery, spread over two receiver processes at once: handled once
/// (the runs counted in Redis), and all 64 get that one answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_over_two_processes_are_handled_once() {
    let server = RedisServer::start();
    let redis = support::client(&server.url()).await;
    let (mut one, base_one) = receiver(&server.url(), "200", "30000");
    let (mut two, base_two) = receiver(&server.url(), "200", "30000");
    let id = "evt-two-processes";
    let deliveries: Vec<_> = (0..64)
        .map(|n| {
            let base = if n % 2 == 0 {
                base_one.clone()
            } else {
                base_two.clone()
            };
            tokio::spawn(async move { post(&base, id).await })
        })
        .collect();
    let mut answers = Vec::new();
    for delivery in deliveries {
        answers.push(delivery.await.unwrap());
    }
    let runs: i64 = redis.get(format!("webhook:runs:{id}")).await.unwrap();
    assert_eq!(runs, 1, "handled once across both processes");
    for answer in &answers {
        assert_eq!(answer, &(200, format!("processed delivery {id} (run 1)\n")));
    }
    let _ = (one.kill(), two.kill(), one.wait(), two.wait());
}

/// The receiver handling a delivery is SIGKILLed: its claim ends with its lease (1 s here),
/// and then the other receiver, where the retry waits, handles the delivery again — never
/// while the first still held it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_killed_mid_delivery_has_it_handled_again_after_the_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let (mut dying, dying_base) = receiver(&url, "60000", "1000");
    let (mut other, other_base) = receiver(&url, "50", "1000");
    let id = "evt-killed";
    let first = tokio::spawn(async move { post(&dying_base, id).await });
    let runs_key = format!("webhook:runs:{id}");
    support::eventually("the first receiver handles the delivery", || async {
        let runs: Option<i64> = redis.get(&runs_key).await.unwrap();
        (runs == Some(1)).then_some(())
    })
    .await;
    // The retry goes to the other receiver, which waits for the first's lock.
    let retry = tokio::spawn(async move { post(&other_base, id).await });
    let claim: Vec<String> = redis
        .custom(fred::cmd!("KEYS"), vec!["idempotency:*"])
        .await
        .unwrap();
    assert_eq!(claim.len(), 1, "{claim:?}");
    let channel = format!("redisson_lock__channel:{}", claim[0]);
    support::eventually("the retry waits for the first receiver's lock", || async {
        (support::numsub(&redis, &channel).await >= 1).then_some(())
    })
    .await;
    let runs: i64 = redis.get(&runs_key).await.unwrap();
    assert_eq!(runs, 1, "not handled again while the first holds the lock");
    dying.kill().unwrap(); // SIGKILL mid-delivery
    let _ = dying.wait();
    assert!(
        first.await.is_err(),
        "the first delivery got no answer: its receiver died"
    );
    let (status, body) = retry.await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        format!("processed delivery {id} (run 2)\n"),
        "handled again"
    );
    let _ = (other.kill(), other.wait());
}
