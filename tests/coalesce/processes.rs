//! Real processes (the `reports` example) on one real Redis: identical requests over two
//! of them run once; a leader SIGKILLed lets a waiter lead once its lease ends; a Redis that
//! is down leaves requests uncoalesced, or answered `503` when told.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tower_lock::coalesce::{CoalesceLayer, OnUnavailable};
use tower_lock::LockManager;

use super::support::http::request;
use super::support::{self, RedisServer};
use super::{app, get_with, report, Origin};

/// A `reports` process on a free port, with `env`; its address.
fn reports(url: &str, env: &[(&str, &str)]) -> (Child, SocketAddr) {
    let mut child = Command::new(support::example("reports"));
    child.env("REDIS_URL", url).env("PORT", "0");
    for (name, value) in env {
        child.env(name, value);
    }
    let mut child = child
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the reports example (cargo build --examples)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().expect("it says where it listens").unwrap();
    let addr = first
        .split_whitespace()
        .find_map(|word| word.strip_prefix("http://"))
        .expect("an address")
        .parse()
        .unwrap();
    std::thread::spawn(move || for _ in lines {});
    (child, addr)
}

/// How many reports a process computed.
async fn computed(addr: SocketAddr) -> u64 {
    request(addr, "GET", "/computed", &[])
        .await
        .body
        .trim()
        .parse()
        .unwrap()
}

/// 64 identical GETs over two processes while the first computes: one computation, and 64
/// identical answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_requests_over_two_processes_run_once() {
    let server = RedisServer::start();
    let (mut one, addr_one) = reports(&server.url(), &[("WORK_MS", "1500")]);
    let (mut two, addr_two) = reports(&server.url(), &[("WORK_MS", "1500")]);
    let first = tokio::spawn(async move { request(addr_one, "GET", "/reports/daily", &[]).await });
    support::eventually("the first computes", || async {
        (computed(addr_one).await == 1).then_some(())
    })
    .await;
    let rest: Vec<_> = (1..64)
        .map(|n| {
            let addr = [addr_one, addr_two][n % 2];
            tokio::spawn(async move { request(addr, "GET", "/reports/daily", &[]).await })
        })
        .collect();
    let first = first.await.unwrap();
    assert_eq!(first.status, 200);
    for reply in rest {
        let reply = reply.await.unwrap();
        assert_eq!((reply.status, &reply.body), (200, &first.body));
        assert_eq!(
            reply.header("cache-status"),
            Some("tower-lock; fwd=miss; collapsed")
        );
    }
    assert_eq!(computed(addr_one).await + computed(addr_two).await, 1);
    one.kill().unwrap();
    two.kill().unwrap();
    let _ = (one.wait(), two.wait());
}

/// A leader SIGKILLed while it computes: its lock lives on until its lease ends, then a
/// request of the other process leads and computes the report itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_lets_a_waiter_lead_after_its_lease() {
    let server = RedisServer::start();
    let slow = [("WORK_MS", "600000"), ("LEASE_MS", "1000")];
    let (mut leader, addr_leader) = reports(&server.url(), &slow);
    let waiting = [("WORK_MS", "10"), ("WAIT_MS", "60000")];
    let (mut other, addr_other) = reports(&server.url(), &waiting);
    let _doomed =
        tokio::spawn(async move { request(addr_leader, "GET", "/reports/q3", &[]).await });
    support::eventually("the leader computes", || async {
        (computed(addr_leader).await == 1).then_some(())
    })
    .await;
    let waiter = tokio::spawn(async move { request(addr_other, "GET", "/reports/q3", &[]).await });
    leader.kill().unwrap();
    let _ = leader.wait();
    let reply = waiter.await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("cache-status"), None, "its own computation");
    assert_eq!(computed(addr_other).await, 1);
    other.kill().unwrap();
    let _ = other.wait();
}

/// Redis down: requests run uncoalesced by default, or are answered `503` when told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_that_is_down_leaves_requests_uncoalesced_or_refused() {
    let mut server = RedisServer::start();
    let locks = LockManager::builder()
        .redis(&server.url())
        .await
        .expect("connect to the test Redis");
    server.stop();
    let origin = Origin::new(report);
    origin.open();
    let open = app(CoalesceLayer::new().manager(locks.clone()), &origin);
    let answer = get_with(&open, "/report", &[]).await;
    assert_eq!(answer.status, 200);
    assert_eq!(origin.executions(), 1);
    let closed = CoalesceLayer::new()
        .manager(locks)
        .on_unavailable(OnUnavailable::Reject)
        .retry_after(Duration::from_secs(2));
    let answer = get_with(&app(closed, &origin), "/report", &[]).await;
    assert_eq!(answer.status, 503);
    assert!(
        answer.body.contains("\"code\":\"unavailable\""),
        "{}",
        answer.body
    );
    assert_eq!(origin.executions(), 1, "not run");
}
