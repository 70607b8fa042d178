//! Read-write locks across real processes (`examples/read_write_checker.rs stream`): a writer of
//! one process gets in past a stream of overlapping readers of another, which Redis alone
//! would let read on for as long as the stream lasts; the readers read on after it.

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::RedisServer;
use tower_lock::lock::Released;
use tower_lock::LockManager;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_gets_in_past_a_stream_of_readers_of_another_process() {
    let server = RedisServer::start();
    let url = server.url();
    let redis = support::client(&url).await;
    let name = "rw:stream";
    let hold = Duration::from_millis(200);
    // 16 readers holding 200 ms each, spread over the hold: the lock is never free.
    let mut readers = Command::new(support::example("read_write_checker"))
        .args([url.as_str(), "stream", name, "16", "200"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start read_write_checker (cargo build --examples)");
    support::eventually("the readers read in turn", || async {
        (support::counter(&redis, &format!("{name}:reads")).await >= 48).then_some(())
    })
    .await;

    let locks = LockManager::redis(&url).await.unwrap();
    let reads_asked = support::counter(&redis, &format!("{name}:reads")).await;
    let asked = Instant::now();
    let guard = locks
        .write_lock(name)
        .wait(Duration::from_secs(20))
        .acquire()
        .await
        .expect("the writer gets in while the readers go on reading");
    let waited = asked.elapsed();
    eprintln!("the writer waited {waited:?}");
    let reads_before = support::counter(&redis, &format!("{name}:reads")).await;
    // The writer works a while: nobody reads meanwhile.
    tokio::time::sleep(hold).await;
    assert_eq!(
        support::counter(&redis, &format!("{name}:reads")).await,
        reads_before,
        "a reader read while the writer held the lock"
    );
    assert_eq!(guard.release().await.unwrap(), Released::Unlocked);
    // Once the writer marked its wait no new reader starts: each of the 16 readers read at
    // most once after it asked (one whose attempt was on its way), twice if the machine
    // kept the writer's first attempt back for a whole hold. Without the mark the stream
    // would read on for the whole wait and the writer would time out.
    assert!(
        reads_before - reads_asked <= 2 * 16,
        "{} reads while the writer waited ({waited:?}): new readers must hold back",
        reads_before - reads_asked
    );
    support::eventually("the readers read on after the writer", || async {
        (support::counter(&redis, &format!("{name}:reads")).await > reads_before + 16).then_some(())
    })
    .await;
    readers.kill().unwrap();
    let _ = readers.wait();
}
