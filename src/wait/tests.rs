//! Wait-queue unit tests: wake-ups, offers and hand-overs without a backend.

use std::time::Duration;

use super::*;

/// The offer a last release of `key` makes, if it hands the lock over.
fn offer_next(queues: &WaitQueues, key: &LockKey, limit: u32) -> Option<Offer> {
    match queues.next_holder(key, LockKind::Plain, limit) {
        Handing::Over(offer) => Some(offer),
        Handing::Free { .. } => None,
    }
}

/// The head tries once its subscription is in place, when a release of this process ends,
/// and when another process's unlock arrives. (Echoes of this process's own releases are
/// told apart by the backend: see the Redis backend's `echoes`.)
#[tokio::test]
async fn a_release_here_and_an_unlock_elsewhere_wake_the_head() {
    let queues = WaitQueues::new(false);
    let key = LockKey::new("", "order", 64).unwrap();
    let lease = Some(Duration::from_secs(30));
    let holder = queues.claim(&key, LockKind::Plain);
    let ticket = waiting(&queues, &key, "a:1");
    queues.subscribed(std::slice::from_ref(&key));
    assert!(
        matches!(ticket.turn(), Turn::Try),
        "first try once subscribed"
    );
    ticket.busy(lease);
    assert!(matches!(ticket.turn(), Turn::Wait(_)));
    holder.end(Wake::Now);
    assert!(
        matches!(ticket.turn(), Turn::Try),
        "our release wakes the head"
    );

    // Another process took the lock first, then released it.
    ticket.busy(lease);
    queues.unlocked(&key, 1);
    assert!(
        matches!(ticket.turn(), Turn::Try),
        "the other process's unlock wakes the head"
    );
}

fn waiting(queues: &WaitQueues, key: &LockKey, owner: &str) -> Ticket {
    let owner = OwnerId::from_raw(owner);
    queues.join(
        key,
        (LockKind::Plain, false),
        Found::Nothing,
        &owner,
        Duration::from_secs(30),
    )
}

/// A release offers the lock to an idle head only, and at most `limit` times in a row.
#[tokio::test]
async fn offers_go_to_an_idle_head_a_limited_number_of_times_in_a_row() {
    let queues = WaitQueues::new(true);
    let key = LockKey::new("", "order", 64).unwrap();
    assert!(offer_next(&queues, &key, 8).is_none(), "no queue, no offer");
    let first = waiting(&queues, &key, "a:1");
    let _second = waiting(&queues, &key, "a:2");

    // The head's own attempt is on its way: no offer.
    assert!(matches!(first.turn(), Turn::Try));
    assert!(offer_next(&queues, &key, 8).is_none());
    first.busy(None);

    // Idle: offered, to the head and not to the one behind it.
    let Some(offer) = offer_next(&queues, &key, 8) else {
        panic!("an idle head")
    };
    assert_eq!(offer.successor().0.as_str(), "a:1");
    assert!(
        offer_next(&queues, &key, 8).is_none(),
        "one offer at a time"
    );
    assert!(
        matches!(first.turn(), Turn::Wait(None)),
        "waits for the outcome"
    );
    drop(offer);
    assert!(
        matches!(first.turn(), Turn::Try),
        "an offer not handed over: the head tries itself"
    );
    first.busy(None);

    // The limit: after two in a row, one release frees the lock; then it starts over.
    for _ in 0..2 {
        let Some(offer) = offer_next(&queues, &key, 2) else {
            panic!("within the limit")
        };
        drop(offer);
        first.busy(None);
    }
    assert!(
        offer_next(&queues, &key, 2).is_none(),
        "limit reached: this release frees the lock"
    );
    assert!(offer_next(&queues, &key, 2).is_some(), "a new run");
    assert!(offer_next(&queues, &key, 0).is_none(), "0: never");
}

/// A handed-over head takes the lock without an attempt; one that left meanwhile makes
/// the release's `handed` say so, and one that leaves after it without taking the lock
/// is reported by `leave` (the caller releases for it).
#[tokio::test]
async fn a_hand_over_reaches_the_waiter_or_says_it_left() {
    let queues = WaitQueues::new(true);
    let key = LockKey::new("", "order", 64).unwrap();
    let sent = Instant::now();

    let first = waiting(&queues, &key, "a:1");
    let Some(offer) = offer_next(&queues, &key, 8) else {
        panic!("an idle head")
    };
    assert!(offer.handed(sent));
    assert!(matches!(first.turn(), Turn::Handed(at) if at == sent));
    first.acquired(Duration::from_secs(30));

    let mut second = waiting(&queues, &key, "a:2");
    let Some(offer) = offer_next(&queues, &key, 8) else {
        panic!("an idle head")
    };
    assert!(
        second.leave().is_none(),
        "left before the outcome: nothing to release yet"
    );
    assert!(!offer.handed(sent), "the release learns the waiter left");

    let mut third = waiting(&queues, &key, "a:3");
    let Some(offer) = offer_next(&queues, &key, 8) else {
        panic!("an idle head")
    };
    assert!(offer.handed(sent));
    assert!(
        third.leave().is_some(),
        "handed the lock, left without it: release it for it"
    );
    assert_eq!(queues.counts(), (0, 0, 0, 0));
}

/// A release that offered the lock and got no answer may have handed it over: the waiter
/// tries itself, and a waiter that leaves without the lock (or had left) has it released
/// in its name, so that a landed hand-over does not stay held until its lease ends.
#[tokio::test]
async fn an_unanswered_hand_over_is_released_by_a_waiter_that_leaves() {
    let queues = WaitQueues::new(true);
    let key = LockKey::new("", "order", 64).unwrap();
    // A head that tried, found the lock busy and waits: a release may offer it the lock.
    let idle_head = |owner: &str| {
        let ticket = waiting(&queues, &key, owner);
        assert!(matches!(ticket.turn(), Turn::Try));
        ticket.busy(None);
        let Some(offer) = offer_next(&queues, &key, 8) else {
            panic!("an idle head")
        };
        (ticket, offer)
    };

    let (mut first, offer) = idle_head("a:1");
    assert!(offer.unknown(), "the waiter is still there");
    assert!(matches!(first.turn(), Turn::Try), "it tries itself at once");
    first.busy(None);
    assert!(
        first.leave().is_none(),
        "its own attempt found the lock busy: nothing of its to release"
    );

    let (mut second, offer) = idle_head("a:2");
    assert!(offer.unknown());
    assert_eq!(
        second.leave().map(|owner| owner.as_str().to_owned()),
        Some("a:2".to_owned()),
        "left before trying: release what may be in its name"
    );

    let (mut third, offer) = idle_head("a:3");
    assert!(third.leave().is_none(), "left before the outcome");
    assert!(!offer.unknown(), "the release learns the waiter left");
    assert_eq!(queues.counts(), (0, 0, 0, 0));
}

/// After a release that freed the lock while other processes listen, the head holds back
/// for the courtesy delay; an unlock from another process ends it early.
#[tokio::test(start_paused = true)]
async fn a_courtesy_delay_holds_the_head_back_until_it_ends_or_another_unlock_comes() {
    let queues = WaitQueues::new(false);
    let key = LockKey::new("", "order", 64).unwrap();
    let holder = queues.claim(&key, LockKind::Plain);
    let ticket = waiting(&queues, &key, "a:1");
    queues.subscribed(std::slice::from_ref(&key));
    assert!(matches!(ticket.turn(), Turn::Try));
    ticket.busy(Some(Duration::from_secs(30)));

    let delay = Duration::from_millis(2);
    holder.end(Wake::After(delay));
    let Turn::Wait(Some(until)) = ticket.turn() else {
        panic!("the head holds back")
    };
    assert_eq!(until, Instant::now() + delay);
    tokio::time::advance(delay).await;
    assert!(matches!(ticket.turn(), Turn::Try), "then tries");

    ticket.busy(Some(Duration::from_secs(30)));
    queues.released_locally(&key, Wake::After(delay));
    queues.unlocked(&key, 1);
    assert!(
        matches!(ticket.turn(), Turn::Try),
        "another process's unlock: the lock went round, try now"
    );
}

/// A backend with no subscriptions (in-process) records no subscription changes: nobody
/// would take them, and they would pile up with every name ever waited on.
#[tokio::test]
async fn queues_ready_at_once_keep_no_changes() {
    let queues = WaitQueues::new(true);
    for i in 0..100 {
        let key = LockKey::new("", &format!("order:{i}"), 64).unwrap();
        drop(waiting(&queues, &key, "a:1"));
    }
    assert!(queues.take_changes().is_empty());
    assert_eq!(queues.counts(), (0, 0, 0, 0));
}

fn waiting_for(queues: &WaitQueues, key: &LockKey, kind: LockKind, owner: &str) -> Ticket {
    let owner = OwnerId::from_raw(owner);
    queues.join(
        key,
        (kind, false),
        Found::Nothing,
        &owner,
        Duration::from_secs(30),
    )
}

/// Readers that a waiting writer's mark holds back do not block the queue: the writer
/// behind them tries (it may be the marking one), only the first reader watches for the
/// mark's end, and once a reader gets in the readers behind it follow.
#[tokio::test(start_paused = true)]
async fn readers_held_back_by_a_mark_let_the_writer_behind_them_try() {
    let queues = WaitQueues::new(true);
    let key = LockKey::new("", "report", 64).unwrap();
    let first = waiting_for(&queues, &key, LockKind::Read, "r:1");
    let second = waiting_for(&queues, &key, LockKind::Read, "r:2");
    let writer = waiting_for(&queues, &key, LockKind::Write, "w:1");
    queues.unlocked(&key, 1);
    assert!(matches!(first.turn(), Turn::Try), "the head tries");
    assert!(
        matches!(second.turn(), Turn::Try),
        "with the reader behind it"
    );
    assert!(matches!(writer.turn(), Turn::Wait(None)), "not the writer");

    let mark = Duration::from_millis(1500);
    first.held_back(mark);
    second.held_back(mark);
    assert!(
        matches!(writer.turn(), Turn::Try),
        "the writer past the held-back readers tries at once"
    );
    let Turn::Wait(Some(until)) = first.turn() else {
        panic!("the first reader waits for the mark's end")
    };
    assert_eq!(until, Instant::now() + mark);
    assert!(
        matches!(second.turn(), Turn::Wait(None)),
        "one reader watches the mark, not all"
    );

    // The writer is busy behind readers of another process: it retries to renew its mark.
    writer.busy(Some(mark / 3));
    assert!(matches!(writer.turn(), Turn::Wait(Some(_))));
    // They release: both the watching reader and the writer try.
    queues.unlocked(&key, 1);
    assert!(matches!(first.turn(), Turn::Try));
    assert!(matches!(writer.turn(), Turn::Try));
    first.held_back(mark);
    writer.acquired(Duration::from_secs(30));
    // The writer's release: the reader tries, gets in, and the reader behind follows.
    queues.released_locally(&key, Wake::Now);
    assert!(matches!(first.turn(), Turn::Try));
    first.acquired(Duration::from_secs(30));
    assert!(
        matches!(second.turn(), Turn::Try),
        "no mark holds readers back now: the next reader tries"
    );
}

/// A release here while the head's attempt is on its way: the attempt's answer (busy, from
/// before the release) does not put off the retry the release asked for.
#[tokio::test(start_paused = true)]
async fn a_release_while_an_attempt_is_on_its_way_still_wakes_the_waiter() {
    let queues = WaitQueues::new(true);
    let key = LockKey::new("", "order", 64).unwrap();
    let holder = queues.claim(&key, LockKind::Plain);
    let ticket = waiting(&queues, &key, "a:1");
    assert!(matches!(ticket.turn(), Turn::Try));
    let delay = Duration::from_millis(2);
    holder.end(Wake::After(delay));
    // The answer, sent before the release: the holder's lease.
    ticket.busy(Some(Duration::from_secs(30)));
    let Turn::Wait(Some(until)) = ticket.turn() else {
        panic!("the head waits for the courtesy delay")
    };
    assert_eq!(until, Instant::now() + delay, "not for the old lease");

    // The same for a reader held back by a mark that the release may have ended.
    let reader = waiting_for(
        &queues,
        &LockKey::new("", "r", 64).unwrap(),
        LockKind::Read,
        "r",
    );
    assert!(matches!(reader.turn(), Turn::Try));
    queues.released_locally(&reader.key, Wake::After(delay));
    reader.held_back(Duration::from_millis(1500));
    let Turn::Wait(Some(until)) = reader.turn() else {
        panic!("the reader waits")
    };
    assert_eq!(until, Instant::now() + delay, "not for the mark's end");
}

/// A record that another process's release sent goes to the waiters queued when it
/// arrives that take the lock unless recorded, and wakes them; a waiter that queues later
/// does not get it (it asks the backend, where the record may have expired), nor does one
/// that takes the lock whatever its record (not woken for it). A queue whose first waiter
/// takes the lock unless recorded says so, for the backend to listen for records too.
#[tokio::test]
async fn a_record_sent_to_waiters_reaches_those_queued_then() {
    let queues = WaitQueues::new(false);
    let key = LockKey::new("", "report", 64).unwrap();
    let owner = OwnerId::from_raw("a:1");
    let first = queues.join(
        &key,
        (LockKind::Plain, true),
        Found::Nothing,
        &owner,
        Duration::from_secs(30),
    );
    assert!(queues.waits_for_records(&key));
    let second = queues.join(
        &key,
        (LockKind::Plain, true),
        Found::Nothing,
        &OwnerId::from_raw("a:2"),
        Duration::from_secs(30),
    );
    let plain = waiting(&queues, &key, "a:5");
    let record = bytes::Bytes::from_static(b"the response");
    queues.record_arrived(&key, &record);
    for ticket in [&first, &second] {
        ticket.signalled().await;
        assert_eq!(ticket.take_record(), Some(record.clone()));
        assert_eq!(ticket.take_record(), None, "taken once");
    }
    assert_eq!(plain.take_record(), None, "not a waiter for records");
    let later = waiting(&queues, &key, "a:3");
    assert_eq!(later.take_record(), None);
    drop((first, second, plain, later));
    assert!(!queues.waits_for_records(&key), "no queue left");
    let plain = waiting(&queues, &key, "a:4");
    assert!(!queues.waits_for_records(&key));
    drop(plain);
}
