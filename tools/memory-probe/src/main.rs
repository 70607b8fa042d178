//! `memory-probe <n>`: `n` uncontended acquire + release of one name on the in-memory
//! backend, with a default manager on the multi-thread runtime. Under callgrind, the count
//! for 11,000 minus the count for 1,000, divided by 10,000, is the cost of one.

use tower_lock::LockManager;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("usage: memory-probe <count>");
    let memory = LockManager::memory();
    for _ in 0..n {
        let guard = memory.lock("bench:s1").acquire().await.expect("acquire");
        guard.release().await.expect("release");
    }
}
