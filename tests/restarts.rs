//! Redis restarts (without persistence) while many waiters queue: a waiter already queued
//! keeps waiting while its wait lasts, whatever it meets during the outage (an attempt
//! lost with the connection, a resync that makes it try before the command connection is
//! back, a release that failed and left its hand-over unknown), and gets the lock once
//! Redis is back. Only holders whose lock the restart wiped out overlap with the next
//! holder, and they are told (their release finds the lock gone).

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::RedisServer;
use tower_lock::lock::{LockKind, Permits, Released};
use tower_lock::LockManager;

/// Waiters per round, over two managers (processes) and two names.
const WAITERS: usize = 200;
const NAMES: usize = 2;
/// Rounds per outage length.
const ROUNDS: usize = 20;
/// Each holder keeps the lock this long: 100 holds per name last about a second, so most
/// waiters are queued when Redis goes away.
const HOLD: Duration = Duration::from_millis(10);
/// Every waiter's wait: far longer than a round, so none may end in one.
const WAIT: Duration = Duration::from_secs(20);
/// Acquisitions made before Redis is stopped in a round.
const BEFORE_RESTART: usize = 20;

/// One hold: which name, when it began and ended, and what its release found.
struct HoldRecord {
    name: usize,
    began: Instant,
    ended: Instant,
    released: Result<Released, String>,
}

/// The holds of one round and the errors of the waiters that did not get the lock.
struct Round {
    holds: Vec<HoldRecord>,
    failures: Vec<String>,
}

/// What the waiters of a round ask for.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// One lock of this kind, on one of two names.
    Single(LockKind),
    /// A multi-lock of two of three names (any two of them share a name).
    Multi,
}

impl Shape {
    fn names(self) -> usize {
        match self {
            Shape::Single(_) => NAMES,
            Shape::Multi => 3,
        }
    }
}

/// Waiter `i` of a round: waits for its lock(s), holds them for [`HOLD`], releases them.
async fn one_waiter(
    locks: LockManager,
    shape: Shape,
    names: Vec<String>,
    i: usize,
    acquired: Arc<AtomicUsize>,
) -> Result<Vec<HoldRecord>, String> {
    let at = match shape {
        Shape::Single(_) => vec![i % NAMES],
        Shape::Multi => vec![i % 3, (i + 1) % 3],
    };
    let failed = |e: tower_lock::LockError| format!("{e:?}");
    let release = match shape {
        Shape::Single(kind) => {
            let name = &names[at[0]];
            let request = match kind {
                LockKind::Fair => locks.fair_lock(name),
                LockKind::Write => locks.write_lock(name),
                LockKind::Fenced => locks.fenced_lock(name),
                LockKind::Semaphore(permits) => locks.semaphore(name, permits.limit()),
                _ => locks.lock(name),
            };
            let guard = request.wait(WAIT).acquire().await.map_err(failed)?;
            acquired.fetch_add(1, Ordering::SeqCst);
            let began = Instant::now();
            tokio::time::sleep(HOLD).await;
            (began, Instant::now(), guard.release().await)
        }
        Shape::Multi => {
            let parts = at.iter().map(|&n| names[n].clone());
            let guard = locks
                .multi_lock(parts)
                .wait(WAIT)
                .acquire()
                .await
                .map_err(failed)?;
            acquired.fetch_add(1, Ordering::SeqCst);
            let began = Instant::now();
            tokio::time::sleep(HOLD).await;
            (began, Instant::now(), guard.release().await)
        }
    };
    let (began, ended, released) = release;
    let released = released.map_err(|e| e.to_string());
    Ok(at
        .into_iter()
        .map(|name| HoldRecord {
            name,
            began,
            ended,
            released: released.clone(),
        })
        .collect())
}

async fn one_round(
    server: &mut RedisServer,
    managers: &[LockManager],
    shape: Shape,
    down: Duration,
    round: usize,
) -> Round {
    let names: Vec<String> = (0..shape.names())
        .map(|n| support::unique(&format!("restart:{}ms:{round}:{n}", down.as_millis())))
        .collect();
    let acquired = Arc::new(AtomicUsize::new(0));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|i| {
            let locks = managers[i % managers.len()].clone();
            tokio::spawn(one_waiter(locks, shape, names.clone(), i, acquired.clone()))
        })
        .collect();
    support::eventually("the first holds of the round", || async {
        (acquired.load(Ordering::SeqCst) >= BEFORE_RESTART).then_some(())
    })
    .await;
    tokio::task::block_in_place(|| {
        server.stop();
        // The outage's length is the fault under test, not a wait for an event.
        std::thread::sleep(down);
        server.resume();
    });
    let mut result = Round {
        holds: Vec::new(),
        failures: Vec::new(),
    };
    for waiter in waiters {
        match waiter.await.expect("waiter task") {
            Ok(holds) => result.holds.extend(holds),
            Err(error) => result.failures.push(error),
        }
    }
    result
}

/// Pairs of holds of one name that overlapped although both releases found their lock
/// held: two holders at once that nobody was told about.
fn untold_overlaps(holds: &[HoldRecord]) -> Vec<String> {
    let mut found = Vec::new();
    for name in 0..3 {
        let mut mine: Vec<&HoldRecord> = holds.iter().filter(|h| h.name == name).collect();
        mine.sort_by_key(|h| h.began);
        for (i, first) in mine.iter().enumerate() {
            for second in &mine[i + 1..] {
                if second.began >= first.ended {
                    break;
                }
                let told = |h: &HoldRecord| {
                    !matches!(h.released, Ok(Released::Unlocked | Released::HandedOver))
                };
                if !told(first) && !told(second) {
                    found.push(format!(
                        "name {name}: {:?} and {:?}",
                        first.released, second.released
                    ));
                }
            }
        }
    }
    found
}

/// `rounds` rounds of each outage length in `downs`, on a server of its own each, all at
/// once.
async fn restarts_under_queued_waiters(shape: Shape, downs: &[Duration], rounds: usize) {
    let series: Vec<_> = downs
        .iter()
        .map(|&down| tokio::spawn(restarts_of_one_length(shape, down, rounds)))
        .collect();
    for one in series {
        one.await.expect("a series of restarts");
    }
}

async fn restarts_of_one_length(shape: Shape, down: Duration, rounds: usize) {
    let mut server = RedisServer::start();
    let mut managers = Vec::new();
    for _ in 0..2 {
        managers.push(LockManager::redis(&server.url()).await.unwrap());
    }
    let (mut lost, mut holds) = (0, 0);
    for round in 0..rounds {
        let outcome = one_round(&mut server, &managers, shape, down, round).await;
        assert!(
            outcome.failures.is_empty(),
            "{shape:?}, Redis down {down:?}, round {round}: {} of {WAITERS} queued waiters \
             gave up with their wait not over: {:?}",
            outcome.failures.len(),
            outcome.failures
        );
        let per_waiter = if matches!(shape, Shape::Multi) { 2 } else { 1 };
        assert_eq!(outcome.holds.len(), WAITERS * per_waiter);
        let overlaps = untold_overlaps(&outcome.holds);
        assert!(
            overlaps.is_empty(),
            "{shape:?}, Redis down {down:?}, round {round}: two holders at once, neither \
             told: {overlaps:?}"
        );
        holds += outcome.holds.len();
        lost += outcome
            .holds
            .iter()
            .filter(|h| h.released == Ok(Released::NotHeld))
            .count();
    }
    eprintln!(
        "{shape:?}, Redis down {down:?}: {rounds} rounds, {holds} holds, {lost} wiped out by \
             the restart (told at their release)"
    );
    for locks in &managers {
        support::eventually("the managers forget every waiter", || async {
            (locks.stats().waiters == 0).then_some(())
        })
        .await;
    }
}

const DOWNS: [Duration; 3] = [
    Duration::from_millis(30),
    Duration::from_millis(100),
    Duration::from_secs(1),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_waiters_ride_out_restarts() {
    restarts_under_queued_waiters(Shape::Single(LockKind::Plain), &DOWNS, ROUNDS).await;
}

/// The other kinds wait through the same loop or, for the fair lock, their own; a
/// multi-lock waits for its parts one after another: fewer rounds each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_of_every_kind_ride_out_restarts() {
    let shapes = [
        Shape::Single(LockKind::Fair),
        Shape::Single(LockKind::Write),
        Shape::Single(LockKind::Fenced),
        // A semaphore of one permit: exclusive, so the same overlap check applies.
        Shape::Single(LockKind::Semaphore(Permits::new(1, 1).unwrap())),
        Shape::Multi,
    ];
    let series: Vec<_> = shapes
        .into_iter()
        .map(|shape| tokio::spawn(restarts_under_queued_waiters(shape, &DOWNS, 3)))
        .collect();
    for shape in series {
        shape.await.expect("restarts under waiters of one kind");
    }
}
