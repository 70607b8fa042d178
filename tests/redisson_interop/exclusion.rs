//! Exclusion both ways: Redisson's threads and tower-lock's tasks take one name in turns, and
//! a witness counter in Redis, INCRed on entry by whichever side holds, never reads above 1.

use std::time::Duration;
use tower_lock::lock::Released;

use fred::prelude::*;

use crate::support::redisson_java::Witness;
use crate::{support, Target};

const PER_SIDE: usize = 4;
const ROUNDS: u32 = 40;
const HOLD: Duration = Duration::from_micros(500);

async fn exclusion_both_ways(target: Target) {
    let sides = target.sides().await;
    let name = support::unique("interop-exclusion");
    let witness = |mark: &str| Witness {
        rounds: ROUNDS,
        hold: HOLD,
        counter: format!("{name}:inside"),
        log: format!("{name}:log"),
        mark: mark.to_owned(),
    };

    let java = async {
        let holders: Vec<_> = (0..PER_SIDE)
            .map(|i| {
                let (java, name, witness) = (sides.java.clone(), name.clone(), witness("j"));
                tokio::spawn(async move {
                    java.witness(&format!("w{i}"), "lock", &name, &witness)
                        .await
                })
            })
            .collect();
        let mut violations = 0;
        for holder in holders {
            violations += holder.await.unwrap();
        }
        violations
    };
    let rust = async {
        let tasks: Vec<_> = (0..PER_SIDE)
            .map(|_| {
                let locks = sides.locks.clone();
                let admin = sides.admin.clone();
                let (name, witness) = (name.clone(), witness("r"));
                tokio::spawn(async move {
                    let mut violations = 0;
                    for _ in 0..witness.rounds {
                        let guard = locks
                            .lock(&name)
                            .wait(Duration::from_secs(60))
                            .acquire()
                            .await
                            .expect("tower-lock gets its turn");
                        let inside: i64 = admin.incr(&witness.counter).await.unwrap();
                        if inside != 1 {
                            violations += 1;
                        }
                        let _: i64 = admin.rpush(&witness.log, "r").await.unwrap();
                        tokio::time::sleep(witness.hold).await;
                        let _: i64 = admin.decr(&witness.counter).await.unwrap();
                        assert_ne!(guard.release().await.expect("release"), Released::NotHeld);
                    }
                    violations
                })
            })
            .collect();
        let mut violations = 0;
        for task in tasks {
            violations += task.await.unwrap();
        }
        violations
    };
    let (java_violations, rust_violations) = tokio::join!(java, rust);

    assert_eq!(java_violations, 0, "Redisson saw another holder inside");
    assert_eq!(rust_violations, 0, "tower-lock saw another holder inside");
    let inside: i64 = sides.admin.get(format!("{name}:inside")).await.unwrap();
    assert_eq!(inside, 0);
    let log: Vec<String> = sides
        .admin
        .lrange(format!("{name}:log"), 0, -1)
        .await
        .unwrap();
    assert_eq!(log.len(), 2 * PER_SIDE * ROUNDS as usize);
    // The lock passed between the sides both ways, not once at the end of one side's run.
    let switches = log.windows(2).filter(|w| w[0] != w[1]).count();
    println!(
        "{target:?}: {} holds, {switches} hand-overs between the sides",
        log.len()
    );
    assert!(switches >= 2, "the sides never took turns: {log:?}");
    assert!(!sides.java.is_locked("lock", &name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_server() {
    exclusion_both_ways(Target::Single).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster() {
    exclusion_both_ways(Target::Cluster).await;
}
