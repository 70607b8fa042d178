//! Faults: Redis restarts, slow or paused Redis, Redis down at start, crashed processes.
//! Every loop is bounded in count and time.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fred::prelude::*;
use support::RedisServer;
use tower_lock::backend::RedisBackend;
use tower_lock::lock::Released;
use tower_lock::{LockError, LockManager};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_at_start_is_a_clear_error() {
    let port = support::free_port();
    let error = LockManager::redis(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains(&format!("cannot connect to Redis at 127.0.0.1:{port}")),
        "{message}"
    );
    let error = LockManager::redis("not a url").await.unwrap_err();
    assert!(error.to_string().contains("invalid Redis URL"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lazy_start_is_unavailable_until_redis_comes_up() {
    let port = support::free_port();
    let locks = LockManager::builder()
        .redis_lazy(&format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap();
    match locks
        .lock("lazy")
        .wait(Duration::from_millis(200))
        .acquire()
        .await
    {
        Err(LockError::Unavailable(_)) => {}
        other => panic!("expected Unavailable before Redis is up, got {other:?}"),
    }
    let _server = RedisServer::start_on(port);
    let guard = support::eventually("acquire once Redis is up", || async {
        locks
            .lock("lazy")
            .wait(Duration::from_millis(200))
            .acquire()
            .await
            .ok()
    })
    .await;
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_while_waiting_and_holding() {
    let mut server = RedisServer::start();
    let lease = Duration::from_millis(600);
    let holder_side = LockManager::builder()
        .lease(lease)
        .redis(&server.url())
        .await
        .unwrap();
    let waiter_side = LockManager::builder()
        .lease(lease)
        .redis(&server.url())
        .await
        .unwrap();
    let holder = holder_side.lock("order:7").acquire().await.unwrap();
    let waiters: Vec<_> = (0..10)
        .map(|_| {
            let locks = waiter_side.clone();
            tokio::spawn(async move {
                let guard = locks
                    .lock("order:7")
                    .wait(Duration::from_secs(30))
                    .acquire()
                    .await?;
                let _ = guard.release().await.map_err(LockError::Unavailable)?;
                Ok::<_, LockError>(())
            })
        })
        .collect();
    while waiter_side.waiting("order:7") < 10 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Restart without persistence: the lock is gone.
    server.stop();
    server.resume();
    tokio::time::timeout(Duration::from_secs(10), holder.lost())
        .await
        .expect("the holder learns that its lock is gone");
    // Every waiter rides the restart out and acquires: a queued waiter gives up only when
    // its own wait ends (an attempt on its way as Redis went away is answered once Redis is
    // back, or fails and is tried again).
    for waiter in waiters {
        if let Err(error) = waiter.await.unwrap() {
            panic!("a queued waiter failed across the restart: {error}");
        }
    }
    assert_eq!(holder.release().await.unwrap(), Released::NotHeld);
    support::nothing_left_behind(&waiter_side).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_redis_honours_the_wait_deadline() {
    let server = RedisServer::start();
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let admin = support::client(&server.url()).await;
    let _: () = admin
        .custom(fred::cmd!("CLIENT"), vec!["PAUSE", "3000", "ALL"])
        .await
        .unwrap();
    let started = Instant::now();
    let result = locks
        .lock("slow")
        .wait(Duration::from_millis(300))
        .acquire()
        .await;
    let took = started.elapsed();
    assert!(
        matches!(result, Err(LockError::Unavailable(_))),
        "{result:?}"
    );
    assert!(
        took < Duration::from_secs(3),
        "waited {took:?} for a 300 ms wait: the pause, not the deadline, ended it"
    );
    let _: () = admin
        .custom(fred::cmd!("CLIENT"), vec!["UNPAUSE"])
        .await
        .unwrap();
    // Nothing was left behind by the abandoned attempt.
    let guard = support::eventually("acquire after the pause", || async {
        locks
            .lock("slow")
            .wait(Duration::from_secs(2))
            .acquire()
            .await
            .ok()
    })
    .await;
    let _ = guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_that_time_out_are_retried_while_the_lease_runs() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let backend = RedisBackend::connect(&server.url())
        .await
        .unwrap()
        .command_timeout(Duration::from_millis(100));
    let lease = Duration::from_millis(1500);
    let locks = LockManager::builder().lease(lease).backend(backend);
    let guard = locks.lock("renewed").acquire().await.unwrap();
    // Block writes for 700 ms: renewals due meanwhile time out (100 ms) and are retried;
    // the lease (1.5 s from the last renewal) outlives the pause.
    tokio::time::sleep(lease / 3).await;
    let _: () = admin
        .custom(fred::cmd!("CLIENT"), vec!["PAUSE", "700", "WRITE"])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700) + lease / 3).await;
    assert!(
        !guard.is_lost(),
        "the lock was given up while its lease could still run"
    );
    let ttl: i64 = admin.pttl("renewed").await.unwrap();
    assert!(
        ttl > 0,
        "the lease was renewed after the pause (pttl {ttl})"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connection_mid_command_keeps_reentry_counts_exact() {
    let server = RedisServer::start();
    let admin = support::client(&server.url()).await;
    let locks = LockManager::redis(&server.url()).await.unwrap();
    let guard = locks.lock("exact").acquire().await.unwrap();
    let owner = guard.owner().to_string();
    let _: () = admin
        .custom(fred::cmd!("CLIENT"), vec!["PAUSE", "500", "WRITE"])
        .await
        .unwrap();
    let reentry = tokio::spawn(async move {
        let result = guard.reenter().await;
        (guard, result)
    });
    // Wait until the reentry is blocked in Redis by the pause, then cut its connection.
    support::eventually("the reentry queued behind the pause", || async {
        let clients: String = admin
            .custom(fred::cmd!("CLIENT"), vec!["LIST", "TYPE", "normal"])
            .await
            .unwrap();
        clients
            .lines()
            .any(|client| client.contains(" flags=b ") && client.contains(" cmd=evalsha "))
            .then_some(())
    })
    .await;
    let _: i64 = admin
        .custom(
            fred::cmd!("CLIENT"),
            vec!["KILL", "TYPE", "normal", "SKIPME", "yes"],
        )
        .await
        .unwrap();
    let (guard, result) = reentry.await.unwrap();
    let admin = support::client(&server.url()).await;
    let count: Option<i64> = admin.hget("exact", &owner).await.unwrap();
    let expected = 1 + i64::from(result.is_ok());
    assert_eq!(
        count,
        Some(expected),
        "reentry {result:?} left count {count:?}"
    );
    if let Ok(inner) = result {
        assert_eq!(inner.release().await.unwrap(), Released::StillHeld);
    }
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
}

fn checker(args: &[&str]) -> Command {
    let mut command = Command::new(support::example("lock_checker"));
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_never_share_a_lock_even_when_one_is_killed() {
    let server = RedisServer::start();
    let url = server.url();
    // A fifth process takes one of the names and is killed while holding it: the others
    // wait at most its lease (1 s) for that name.
    let mut holder = checker(&[&url, "hold", "checker:0", "1000"])
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "held");
    let checkers: Vec<_> = (0..4)
        .map(|_| checker(&[&url, "3", "8", "10", "1000"]).spawn().unwrap())
        .collect();
    holder.kill().unwrap(); // SIGKILL while it holds checker:0
    let _ = holder.wait();
    let mut total = 0u64;
    for child in checkers {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "a checker failed: {stdout}");
        let field = |name: &str| -> u64 {
            stdout
                .split_whitespace()
                .find_map(|f| f.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {stdout}"))
        };
        assert_eq!(field("violations"), 0, "{stdout}");
        assert_eq!(field("timeouts"), 0, "{stdout}");
        // wait (30 s) + lease (1 s) bounds every wait; with the crash it is the lease.
        assert!(field("max_wait_ms") <= 31_000, "{stdout}");
        total += field("acquisitions");
    }
    assert!(
        total > 100,
        "the checkers made progress ({total} acquisitions)"
    );
}

/// Reader processes SIGKILLed while they hold a read lock: nobody releases their holds, which
/// end with their leases (1 s, no longer renewed); a writer waiting meanwhile then gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_readers_holds_expire_and_a_writer_gets_in() {
    let server = RedisServer::start();
    let url = server.url();
    let mut readers: Vec<_> = (0..3)
        .map(|_| {
            checker(&[&url, "hold", "rw:crash", "1000", "read"])
                .spawn()
                .unwrap()
        })
        .collect();
    for reader in &mut readers {
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(reader.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "held", "three readers hold at once");
    }
    let locks = LockManager::redis(&url).await.unwrap();
    assert!(matches!(
        locks.write_lock("rw:crash").try_acquire().await,
        Err(LockError::TimedOut { .. })
    ));
    let writer = {
        let locks = locks.clone();
        tokio::spawn(async move {
            locks
                .write_lock("rw:crash")
                .wait(Duration::from_secs(20))
                .acquire()
                .await
        })
    };
    for mut reader in readers {
        reader.kill().unwrap(); // SIGKILL while it reads
        let _ = reader.wait();
    }
    let writer = writer
        .await
        .unwrap()
        .expect("the writer gets in once the leases end");
    assert_eq!(writer.release().await.unwrap(), Released::Unlocked);
}

/// The test support itself: a server whose port another listener took fails to start with
/// a message saying so, and `start` moves on to another port (it used to wait for ever for
/// the server's ready line: the shell around the exited server kept the pipe open).
#[test]
fn a_redis_server_whose_port_is_taken_says_so() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    match RedisServer::try_start_with(port, &[]) {
        Err(support::StartFailure::PortTaken(why)) => assert!(why.contains("taken"), "{why}"),
        Err(other) => panic!("expected the port taken, got: {other}"),
        Ok(_) => panic!("a server started on a port another listener holds"),
    }
    let server = RedisServer::start();
    assert_ne!(server.port(), port);
}
