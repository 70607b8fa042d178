//! The order in which one script call carries a batch's operations, so that the script
//! can make some Redis calls once for several operations (see `batch.lua`).
//!
//! Operations on a key that no other operation of the call touches commute with all the
//! others, so they may move: first acquisitions of such keys go to the front (one
//! multi-key `EXISTS` checks that all are free), then claims of such keys (one multi-key
//! `EXISTS` checks that all are free and none has a record), last releases (stores of a
//! record among them) to the back (one multi-key `DEL` at the end). Operations on a shared
//! key keep their order, in the middle.

use super::operation::{OpKind, Operation};

/// A call's operation order and the script's two leading arguments.
pub(in crate::backend) struct Layout {
    /// Indexes into the operations, in the order sent (empty: a single operation).
    order: Vec<usize>,
    /// How many leading operations are first acquisitions of keys touched once.
    pub(in crate::backend) shared_exists: usize,
    /// How many operations after those are claims of keys touched once.
    pub(in crate::backend) shared_claims: usize,
    /// Position (from 1) of the first trailing last release of a key touched once, when
    /// there are at least two of them; else 0.
    pub(in crate::backend) deferred_from: usize,
}

impl Layout {
    pub(in crate::backend) fn of(operations: &[Operation]) -> Layout {
        let n = operations.len();
        if n < 2 {
            return Layout {
                order: Vec::new(),
                shared_exists: 0,
                shared_claims: 0,
                deferred_from: 0,
            };
        }
        let key = |index: usize| operations[index].key.as_str();
        let mut by_key: Vec<usize> = (0..n).collect();
        by_key.sort_unstable_by(|&a, &b| key(a).cmp(key(b)));
        let mut alone = vec![false; n];
        for (position, &index) in by_key.iter().enumerate() {
            let shares = |other: Option<&usize>| other.is_some_and(|&o| key(o) == key(index));
            alone[index] = !shares(position.checked_sub(1).and_then(|p| by_key.get(p)))
                && !shares(by_key.get(position + 1));
        }
        let front = |i: usize| {
            let operation = &operations[i];
            alone[i] && operation.kind == OpKind::Acquire && operation.expected == 0
        };
        // `expected` 0 or 1: the script's `-1`, or a store that may end the last hold.
        let back = |i: usize| {
            let operation = &operations[i];
            alone[i]
                && matches!(operation.kind, OpKind::Release | OpKind::Store)
                && operation.expected <= 1
        };
        let claim = |i: usize| alone[i] && operations[i].kind == OpKind::Claim;
        let mut order = Vec::with_capacity(n);
        order.extend((0..n).filter(|&i| front(i)));
        let shared_exists = order.len();
        order.extend((0..n).filter(|&i| claim(i)));
        let shared_claims = order.len() - shared_exists;
        order.extend((0..n).filter(|&i| !front(i) && !claim(i) && !back(i)));
        let middle_end = order.len();
        order.extend((0..n).filter(|&i| back(i)));
        let deferred = n - middle_end;
        Layout {
            order,
            shared_exists,
            shared_claims,
            deferred_from: if deferred > 1 { middle_end + 1 } else { 0 },
        }
    }

    /// Whether the call carries the three leading arguments (more than one operation).
    pub(in crate::backend) fn has_header(&self) -> bool {
        !self.order.is_empty()
    }

    /// The operations' indexes in the order sent.
    pub(in crate::backend) fn order(&self) -> impl Iterator<Item = usize> + '_ {
        let single = self.order.is_empty().then_some(0);
        single.into_iter().chain(self.order.iter().copied())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::operation::RecordPart;
    use super::*;
    use crate::key::{LockKey, OwnerId};

    fn operation(kind: OpKind, key: &str, expected: u32) -> Operation {
        Operation {
            kind,
            key: LockKey::new("", key, 100).unwrap(),
            owner: OwnerId::from_raw("owner:1"),
            lease: Duration::from_secs(30),
            expected,
            successor: None,
            announce: None,
            record: RecordPart::None,
        }
    }

    #[test]
    fn keys_touched_once_move_to_the_ends_and_shared_keys_keep_their_order() {
        use OpKind::*;
        let operations = [
            operation(Release, "a", 1), // 0: back
            operation(Acquire, "s", 0), // 1: shared key
            operation(Acquire, "b", 0), // 2: front
            operation(Release, "s", 1), // 3: shared key, after 1
            operation(Acquire, "c", 1), // 4: a reentry stays in the middle
            operation(Release, "d", 2), // 5: not the last hold: middle
            operation(Acquire, "e", 0), // 6: front
            operation(Release, "f", 1), // 7: back
            operation(Renew, "g", 1),   // 8: middle
        ];
        let layout = Layout::of(&operations);
        assert!(layout.has_header());
        assert_eq!(
            layout.order().collect::<Vec<_>>(),
            [2, 6, 1, 3, 4, 5, 8, 0, 7]
        );
        assert_eq!(layout.shared_exists, 2);
        assert_eq!(layout.deferred_from, 8);
    }

    #[test]
    fn a_single_operation_or_a_single_release_at_the_back_is_not_deferred() {
        let single = Layout::of(&[operation(OpKind::Release, "a", 1)]);
        assert!(!single.has_header());
        assert_eq!(single.order().collect::<Vec<_>>(), [0]);
        let one_release = Layout::of(&[
            operation(OpKind::Release, "a", 1),
            operation(OpKind::Acquire, "a", 0),
            operation(OpKind::Release, "b", 1),
        ]);
        assert_eq!(one_release.order().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(one_release.shared_exists, 0);
        assert_eq!(
            one_release.deferred_from, 0,
            "one trailing release: DEL as usual"
        );
    }

    #[test]
    fn stores_of_keys_touched_once_are_deleted_with_the_last_releases() {
        let layout = Layout::of(&[
            operation(OpKind::Store, "a", 1),   // 0: back
            operation(OpKind::Claim, "b", 0),   // 1: middle
            operation(OpKind::Release, "c", 1), // 2: back
            operation(OpKind::Store, "b", 1),   // 3: shared key: middle, after 1
        ]);
        assert_eq!(layout.order().collect::<Vec<_>>(), [1, 3, 0, 2]);
        assert_eq!((layout.shared_exists, layout.shared_claims), (0, 0));
        assert_eq!(layout.deferred_from, 3);
    }

    #[test]
    fn claims_of_keys_touched_once_follow_the_first_acquisitions() {
        use OpKind::*;
        let layout = Layout::of(&[
            operation(Claim, "a", 0),   // 0: a claim of its own key
            operation(Acquire, "b", 0), // 1: front
            operation(Claim, "s", 0),   // 2: shared key: middle
            operation(Store, "s", 1),   // 3: shared key: middle, after 2
            operation(Claim, "c", 0),   // 4: a claim of its own key
            operation(Store, "d", 1),   // 5: back
        ]);
        assert_eq!(layout.order().collect::<Vec<_>>(), [1, 0, 4, 2, 3, 5]);
        assert_eq!((layout.shared_exists, layout.shared_claims), (1, 2));
        assert_eq!(layout.deferred_from, 0);
    }
}
