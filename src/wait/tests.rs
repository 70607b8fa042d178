//! Wait-queue unit tests: echoes, offers and hand-overs without a backend.

use std::time::Duration;

use super::*;

/// Our release's unlock notification can come back before the release's own reply; the
/// next process's notification must still wake the head (it used to be taken for our
/// echo, leaving the head asleep until the holder's lease ended).
#[tokio::test]
async fn an_early_echo_does_not_swallow_the_next_unlock() {
    let queues = WaitQueues::new(false);
    let key = LockKey::new("", "order", 64).unwrap();
    let lease = Some(Duration::from_secs(30));
    let holder = queues.claim(&key);
    let owner = OwnerId::from_raw("a:1");
    let ticket = queues.join(&key, lease, &owner, Duration::from_secs(30), true);
    queues.subscribed(std::slice::from_ref(&key));
    assert!(
        matches!(ticket.turn(), Turn::Try),
        "first try once subscribed"
    );
    ticket.busy(lease);

    // Our release: counted before it is sent; its echo arrives before its reply.
    assert!(queues.expect_unlock(&key));
    queues.unlocked(&key);
    assert!(
        matches!(ticket.turn(), Turn::Wait(_)),
        "our own echo wakes nobody"
    );
    queues.unlock_settled(&key, true);
    holder.end(true);
    assert!(
        matches!(ticket.turn(), Turn::Try),
        "our reply wakes the head"
    );

    // Another process took the lock first, then released it.
    ticket.busy(lease);
    queues.unlocked(&key);
    assert!(
        matches!(ticket.turn(), Turn::Try),
        "the other process's unlock wakes the head"
    );
}

#[tokio::test]
async fn a_release_that_did_not_unlock_takes_its_count_back() {
    let queues = WaitQueues::new(false);
    let key = LockKey::new("", "order", 64).unwrap();
    let owner = OwnerId::from_raw("a:1");
    let ticket = queues.join(&key, None, &owner, Duration::from_secs(30), true);
    queues.subscribed(std::slice::from_ref(&key));
    assert!(matches!(ticket.turn(), Turn::Try));
    assert!(queues.expect_unlock(&key));
    queues.unlock_settled(&key, false);
    queues.unlocked(&key);
    assert!(matches!(ticket.turn(), Turn::Try), "no echo was owed");
}

fn waiting(queues: &WaitQueues, key: &LockKey, owner: &str) -> Ticket {
    let owner = OwnerId::from_raw(owner);
    queues.join(key, None, &owner, Duration::from_secs(30), true)
}

/// A release offers the lock to an idle head only, and at most `limit` times in a row.
#[tokio::test]
async fn offers_go_to_an_idle_head_a_limited_number_of_times_in_a_row() {
    let queues = WaitQueues::new(true);
    let key = LockKey::new("", "order", 64).unwrap();
    assert!(
        matches!(queues.offer_next(&key, 8), Next::Nobody),
        "no queue, no offer"
    );
    let first = waiting(&queues, &key, "a:1");
    let _second = waiting(&queues, &key, "a:2");

    // The head's own attempt is on its way: no offer.
    assert!(matches!(first.turn(), Turn::Try));
    assert!(matches!(queues.offer_next(&key, 8), Next::Nobody));
    first.busy(None);

    // Idle: offered, to the head and not to the one behind it.
    let Next::Offered(offer) = queues.offer_next(&key, 8) else {
        panic!("an idle head")
    };
    assert_eq!(offer.successor().owner.as_str(), "a:1");
    assert!(
        matches!(queues.offer_next(&key, 8), Next::Nobody),
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
        let Next::Offered(offer) = queues.offer_next(&key, 2) else {
            panic!("within the limit")
        };
        drop(offer);
        first.busy(None);
    }
    assert!(
        matches!(queues.offer_next(&key, 2), Next::Yield),
        "limit reached: this release frees the lock, the head waits for its unlock message"
    );
    assert!(
        matches!(queues.offer_next(&key, 2), Next::Offered(_)),
        "a new run"
    );
    assert!(
        matches!(queues.offer_next(&key, 0), Next::Nobody),
        "0: never"
    );
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
    let Next::Offered(offer) = queues.offer_next(&key, 8) else {
        panic!("an idle head")
    };
    assert!(offer.handed(sent));
    assert!(matches!(first.turn(), Turn::Handed(at, None) if at == sent));
    first.acquired(Duration::from_secs(30));

    let mut second = waiting(&queues, &key, "a:2");
    let Next::Offered(offer) = queues.offer_next(&key, 8) else {
        panic!("an idle head")
    };
    assert!(
        second.leave().is_none(),
        "left before the outcome: nothing to release yet"
    );
    assert!(!offer.handed(sent), "the release learns the waiter left");

    let mut third = waiting(&queues, &key, "a:3");
    let Next::Offered(offer) = queues.offer_next(&key, 8) else {
        panic!("an idle head")
    };
    assert!(offer.handed(sent));
    assert!(
        third.leave().is_some(),
        "handed the lock, left without it: release it for it"
    );
    assert_eq!(queues.counts(), (0, 0, 0));
}
