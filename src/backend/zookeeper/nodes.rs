//! Curator's layout: a lock is a directory (`{root}/{name}`) of ephemeral sequential nodes
//! named `_c_<uuid>-<lock name><10-digit sequence>`; the sequence orders them. The rules of
//! Curator's recipes say which nodes hold: `InterProcessMutex` (`lock-`: the lowest),
//! `InterProcessReadWriteLock` (`__WRIT__`: the lowest of all; `__READ__`: no writer before
//! it), and whom a waiter watches (the node before it, or the first writer before a reader).
//! A directory normally holds one recipe's nodes; where both meet (a name used as a plain
//! lock and as a read-write lock), a mutex node counts as a writer, so that the two still
//! exclude each other.

use crate::kind::LockKind;

/// The lock name of a mutex node (`InterProcessMutex`; also the fair and fenced locks).
pub(super) const MUTEX: &str = "lock-";
/// The lock name of a read-write lock's read node.
pub(super) const READ: &str = "__READ__";
/// The lock name of a read-write lock's write node.
pub(super) const WRITE: &str = "__WRIT__";
/// Curator's "protected" prefix: `_c_<uuid>-` finds a node whose create reply was lost.
pub(super) const PROTECTED: &str = "_c_";
/// Digits of a sequence (ZooKeeper's `%010d`).
const SEQUENCE_DIGITS: usize = 10;

/// The side a node takes in its directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Side {
    /// `InterProcessMutex`: one holder, first come first served.
    Mutex,
    /// A read-write lock's reader.
    Read,
    /// A read-write lock's writer.
    Write,
}

impl Side {
    /// The side a kind of lock takes (`None`: a kind this backend does not have).
    pub(super) fn of(kind: LockKind) -> Option<Side> {
        match kind {
            LockKind::Plain | LockKind::Fair | LockKind::Fenced => Some(Side::Mutex),
            LockKind::Read => Some(Side::Read),
            LockKind::Write => Some(Side::Write),
            LockKind::Semaphore(_) => None,
        }
    }

    /// The lock name in its nodes' names.
    pub(super) fn lock_name(self) -> &'static str {
        match self {
            Side::Mutex => MUTEX,
            Side::Read => READ,
            Side::Write => WRITE,
        }
    }

    /// Whether it belongs to a read-write lock.
    pub(super) fn read_write(self) -> bool {
        self != Side::Mutex
    }
}

/// One child of a lock's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Node {
    /// Its name in the directory.
    pub(super) name: String,
    pub(super) side: Side,
    pub(super) sequence: u64,
}

impl Node {
    /// Parses a child's name (`None`: not a lock node: another recipe's, or a stray).
    pub(super) fn parse(name: &str) -> Option<Node> {
        let split = name.len().checked_sub(SEQUENCE_DIGITS)?;
        let (head, digits) = (name.get(..split)?, name.get(split..)?);
        if !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let side = [Side::Mutex, Side::Read, Side::Write]
            .into_iter()
            .find(|side| head.ends_with(side.lock_name()))?;
        Some(Node {
            name: name.to_owned(),
            side,
            sequence: digits.parse().ok()?,
        })
    }
}

/// The prefix a new node is created with (the server appends the sequence): protected
/// as Curator's are, by a fresh id of the attempt.
pub(super) fn new_prefix(dir: &str, side: Side, attempt: &uuid::Uuid) -> String {
    format!(
        "{dir}/{PROTECTED}{}-{}",
        attempt.hyphenated(),
        side.lock_name()
    )
}

/// The lock nodes among `children` (other recipes' nodes and strays left out), in sequence
/// order.
pub(super) fn queue(children: &[String]) -> Vec<Node> {
    let mut nodes: Vec<Node> = children
        .iter()
        .filter_map(|name| Node::parse(name))
        .collect();
    nodes.sort_by_key(|node| node.sequence);
    nodes
}

/// Whether a node excludes every other (a mutex node or a writer).
fn exclusive(node: &Node) -> bool {
    node.side != Side::Read
}

/// Where a node stands in its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Standing {
    /// It holds the lock.
    Holds,
    /// It waits; the node it watches (whose deletion may let it in), and whether that node
    /// holds the lock now (this waiter is next).
    Waits { watch: String, next: bool },
    /// It is not in the directory (deleted: its session ended, or someone removed it).
    Gone,
}

/// Where the node `name` stands in `queue` (see [`queue`]), by Curator's rules: a mutex
/// node or a writer holds when it is first and watches the node before it; a reader holds
/// when no writer is before it, and watches the first writer before it. `writes_here`: the
/// owner holds the write lock already (a writer may read: Curator's downgrade).
pub(super) fn standing(queue: &[Node], name: &str, writes_here: bool) -> Standing {
    let Some(at) = queue.iter().position(|node| node.name == name) else {
        return Standing::Gone;
    };
    let node = &queue[at];
    match node.side {
        Side::Read => {
            let first_writer = queue[..at].iter().position(exclusive);
            match first_writer {
                Some(writer) if !writes_here => Standing::Waits {
                    watch: queue[writer].name.clone(),
                    next: holds_at(queue, writer),
                },
                _ => Standing::Holds,
            }
        }
        Side::Mutex | Side::Write if at == 0 => Standing::Holds,
        Side::Mutex | Side::Write => Standing::Waits {
            watch: queue[at - 1].name.clone(),
            next: at == 1,
        },
    }
}

/// Whether the node at `at` holds the lock now.
fn holds_at(queue: &[Node], at: usize) -> bool {
    standing(queue, &queue[at].name, false) == Standing::Holds
}

/// The nodes of `queue` that hold the lock now.
pub(super) fn holders(queue: &[Node]) -> impl Iterator<Item = &Node> {
    queue
        .iter()
        .enumerate()
        .filter(|(at, _)| holds_at(queue, *at))
        .map(|(_, node)| node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const A: &str = "_c_d91ced62-37c1-4925-b3bc-e7962b625b43-lock-0000000002";
    const B: &str = "_c_3486558b-b234-4224-8132-ee2e7747e973-lock-0000000001";

    #[test]
    fn a_mutex_queue_is_in_sequence_order_not_name_order() {
        let queue = queue(&names(&[A, B, "leases", "x-lock-12"]));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue[0].name, B);
        assert_eq!(standing(&queue, B, false), Standing::Holds);
        let waits = Standing::Waits {
            watch: B.into(),
            next: true,
        };
        assert_eq!(standing(&queue, A, false), waits);
        assert_eq!(standing(&queue, "gone", false), Standing::Gone);
    }

    #[test]
    fn readers_share_until_a_writer_and_wait_for_the_first_writer_before_them() {
        let list = names(&[
            "_c_1-__READ__0000000000",
            "_c_2-__READ__0000000001",
            "_c_3-__WRIT__0000000002",
            "_c_4-__READ__0000000003",
            "_c_5-__WRIT__0000000004",
            "_c_6-lock-0000000005",
        ]);
        let queue = queue(&list);
        assert_eq!(queue.len(), 6);
        let held: Vec<&str> = holders(&queue).map(|n| n.name.as_str()).collect();
        assert_eq!(held, ["_c_1-__READ__0000000000", "_c_2-__READ__0000000001"]);
        let waits = |watch: &str, next| Standing::Waits {
            watch: watch.into(),
            next,
        };
        let writer = "_c_3-__WRIT__0000000002";
        assert_eq!(
            standing(&queue, writer, false),
            waits("_c_2-__READ__0000000001", false)
        );
        assert_eq!(
            standing(&queue, "_c_4-__READ__0000000003", false),
            waits(writer, false)
        );
        assert_eq!(
            standing(&queue, "_c_4-__READ__0000000003", true),
            Standing::Holds,
            "a writer's own read"
        );
    }

    #[test]
    fn names_without_a_sequence_or_lock_name_are_not_lock_nodes() {
        for name in ["lock-", "_c_x-lock-00000000a1", "_c_x-lease-0000000001", ""] {
            assert_eq!(Node::parse(name), None, "{name}");
        }
    }
}
