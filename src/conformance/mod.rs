//! The conformance suite: one set of checks that every [`Backend`] passes, the backends of
//! this crate and yours (feature `conformance`).
//!
//! A check drives real managers on the backend under test (several of them stand for
//! several processes) and the backend directly: mutual exclusion, reentry, operations applied
//! once, leases, the watchdog and the loss signal, waiting and wake-ups, cancellation at every
//! await, each kind's rules (read-write, fair, fenced, semaphores, multi-locks), locks with a
//! record, inspection and force-unlock, bad names, and every count of the manager back to
//! zero. A check that needs what the backend does not have (see
//! [`Capabilities`](crate::backend::Capabilities)) passes at once, saying so on stderr.
//!
//! To run it on a backend of yours, describe how a process reaches it ([`Subject`]) and let
//! [`conformance_suite!`](crate::conformance_suite) write one `#[tokio::test]` per check
//! (your dev-dependencies need `tokio` with the `macros` and `rt-multi-thread` features):
//!
//! ```
//! # // The memory backend, as a backend of yours would be described.
//! use tower_lock::backend::{Backend, BoxFuture, MemoryBackend};
//! use tower_lock::conformance::Subject;
//! use tower_lock::manager::LockManagerBuilder;
//! use tower_lock::LockManager;
//!
//! /// One store that several processes share: here one table in memory.
//! struct MyStore(MemoryBackend);
//!
//! impl Subject for MyStore {
//!     fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager> {
//!         let backend = self.0.clone(); // a process connecting to the store
//!         Box::pin(async move { builder.backend(backend) })
//!     }
//!     fn backend(&self) -> BoxFuture<std::sync::Arc<dyn Backend>> {
//!         let backend = self.0.clone();
//!         Box::pin(async move { std::sync::Arc::new(backend) as std::sync::Arc<dyn Backend> })
//!     }
//! }
//!
//! // In tests/conformance.rs:
//! // tower_lock::conformance_suite!(MyStore(MemoryBackend::new()));
//! ```
//!
//! Names are made unique per check ([`unique`]), so that checks running at once on one
//! store never meet.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::{Backend, BoxFuture, MemoryBackend};
use crate::engine::LockManager;
use crate::manager::LockManagerBuilder;

mod backend_lock;
pub use backend_lock::BackendLock;
mod ctx;
pub mod exclusion;
pub mod fair;
pub mod fenced;
pub mod holds;
pub mod leases;
pub mod multi;
pub mod operator;
pub mod read_write;
pub mod read_write_rules;
pub mod records;
pub mod semaphore;
pub mod semaphore_holds;
pub mod store_queue;
pub mod waiting;

/// How the processes of a test reach the backend under test.
pub trait Subject: Send + Sync {
    /// A manager built by `builder` on the store under test, as another process would
    /// connect to it (a new connection; for an in-process store, the same store).
    fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager>;

    /// The backend itself, on a connection of its own, to send operations directly.
    fn backend(&self) -> BoxFuture<Arc<dyn Backend>>;
}

/// The in-memory backend as a [`Subject`]: its managers share one table.
#[derive(Clone, Debug, Default)]
pub struct Memory(pub MemoryBackend);

impl Memory {
    /// A new, empty table.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Subject for Memory {
    fn manager(&self, builder: LockManagerBuilder) -> BoxFuture<LockManager> {
        let backend = self.0.clone();
        Box::pin(async move { builder.backend(backend) })
    }

    fn backend(&self) -> BoxFuture<Arc<dyn Backend>> {
        let backend = self.0.clone();
        Box::pin(async move { Arc::new(backend) as Arc<dyn Backend> })
    }
}

/// A name of its own for one check: `label` and a number no other name of this process
/// had, with the process id (checks of several processes may share one store).
pub fn unique(label: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{label}:{}:{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Retries `f` every 50 ms, 400 times at most (20 s), until it returns `Some`; panics
/// naming `what` otherwise. Waits for an event, never for time alone to pass.
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..400 {
        if let Some(value) = f().await {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: not within 20 s");
}

/// Nothing of `locks` is left behind: no waiter, claim or renewal, and no subscription
/// change pending once the manager's subscriber task has taken the last ones.
pub async fn nothing_left_behind(locks: &LockManager) {
    eventually(
        "the subscriber task takes the last subscription changes",
        || async { (locks.stats().subscription_changes == 0).then_some(()) },
    )
    .await;
    assert_eq!(locks.stats(), Default::default(), "nothing left behind");
}

/// Waits until the releases that dropped guards started in the background have ended
/// their claims.
pub async fn background_releases_done(locks: &LockManager) {
    eventually("the background releases end their claims", || async {
        (locks.stats().claimed_names == 0).then_some(())
    })
    .await;
}

/// Says on stderr that a check passed without running: the backend lacks what it needs.
fn not_applicable(check: &str, backend: &str, needs: &str) {
    eprintln!("{check}: not applicable: the {backend} backend has no {needs}");
}

/// One `#[tokio::test]` per check of the conformance suite, in a module per subject (as
/// `exclusion::mutual_exclusion`), each on the [`Subject`](crate::conformance::Subject)
/// `$subject` (an expression, evaluated in each test; `.await` may be used in it). The
/// crate that uses it needs `tokio` with the `macros` and `rt-multi-thread` features.
#[macro_export]
macro_rules! conformance_suite {
    ($subject:expr) => {
        $crate::conformance_suite!(@module $subject; exclusion:
            mutual_exclusion, one_of_many_tries_wins, other_owners_cannot_release,
            concurrent_names_stay_exclusive, resent_operations_take_effect_once);
        $crate::conformance_suite!(@module $subject; holds:
            reentrant_holds_count, dropped_guard_frees_the_lock,
            dropped_acquires_leave_nothing_held, names_are_validated_and_any_bytes_work);
        $crate::conformance_suite!(@module $subject; leases:
            explicit_lease_expires, watchdog_keeps_a_long_hold,
            loss_signal_fires_when_the_lock_disappears, huge_leases_are_capped);
        $crate::conformance_suite!(@module $subject; waiting:
            waiters_acquire_in_fifo_order, a_release_wakes_the_waiter_before_the_lease_ends,
            wait_times_out_with_a_typed_error,
            a_release_that_finds_the_lock_gone_wakes_the_next_waiter,
            dropped_waiter_leaves_the_queue);
        $crate::conformance_suite!(@module $subject; multi:
            crosswise_callers_never_deadlock_nor_overlap,
            a_partial_failure_releases_what_was_taken,
            a_waiting_multi_lock_gets_all_parts_when_freed,
            a_part_lost_mid_hold_fires_the_loss_signal,
            duplicates_once_and_bad_names_are_errors, dropped_acquisitions_leave_nothing);
        $crate::conformance_suite!(@module $subject; read_write:
            readers_share_and_a_writer_goes_before_later_readers,
            a_write_release_lets_every_queued_reader_in, downgrade_reentry_and_no_upgrade,
            leases_and_the_loss_signal, read_holds_nobody_releases_expire,
            cancelled_waiters_leave_nothing);
        $crate::conformance_suite!(@module $subject; read_write_rules:
            readers_share_and_a_writer_excludes, a_waiting_writer_holds_new_readers_back,
            a_dead_writers_mark_runs_out, the_writer_may_read_a_reader_may_not_write,
            counts_apply_at_most_once, a_silent_readers_holds_expire_alone);
        $crate::conformance_suite!(@module $subject; fair:
            arrival_order_is_acquisition_order_across_processes,
            live_waiters_keep_their_places_past_the_queue_timeout,
            a_dead_head_is_dropped_and_the_next_goes_on, dead_waiters_are_dropped_together,
            dropped_waiters_leave_the_queue, holds_reenter_and_report_loss);
        $crate::conformance_suite!(@module $subject; fenced:
            a_fenced_waiter_behind_a_plain_holder_gets_a_token,
            every_acquisition_gets_a_greater_token, fenced_and_plain_locks_exclude_each_other,
            a_resent_acquisition_keeps_its_token, tokens_grow_in_the_order_holders_run,
            a_holder_past_its_lease_has_the_lower_token);
        $crate::conformance_suite!(@module $subject; semaphore:
            at_most_the_limit_is_held, several_permits_are_taken_together,
            the_limit_is_set_on_first_use_and_changed_explicitly,
            a_resent_acquisition_takes_no_second_permit, bad_permits_are_refused);
        $crate::conformance_suite!(@module $subject; semaphore_holds:
            a_release_wakes_a_waiter_of_another_manager,
            leases_are_renewed_and_dead_holders_permits_come_back,
            a_holder_whose_permit_is_taken_away_is_told, cancelled_acquisitions_leave_no_permit,
            a_release_lets_the_next_local_waiter_in, the_backend_hands_permits_over_once,
            a_silent_release_does_not_hide_the_next_one);
        $crate::conformance_suite!(@module $subject; records:
            waiters_get_the_record_of_the_holder, a_record_for_waiters_reaches_them,
            a_record_for_waiters_outlives_a_hand_over, a_plain_release_lets_the_next_waiter_in,
            a_holder_that_lost_its_lock_stores_nothing, a_record_expires_with_its_retention,
            a_lock_held_for_other_work_is_refused_at_once, other_kinds_have_no_records);
        $crate::conformance_suite!(@module $subject; store_queue:
            a_waiter_in_the_store_gets_the_lock_when_freed,
            a_writer_waiting_in_the_store_holds_new_readers_back,
            a_waiter_that_leaves_is_taken_out_at_once, a_waiter_in_the_store_finds_the_record);
        $crate::conformance_suite!(@module $subject; operator:
            every_kind_is_inspected, force_unlock_wakes_the_waiter_and_tells_the_holder,
            names_are_listed_by_pattern_and_bounded, this_process_lists_its_holds_and_waiters);
    };
    (@module $subject:expr; $module:ident: $($check:ident),+ $(,)?) => {
        mod $module {
            $(
                #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let subject = $subject;
                    $crate::conformance::$module::$check(&subject).await
                }
            )+
        }
    };
}
