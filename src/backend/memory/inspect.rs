//! Inspection, listing and force-unlock on the memory backend, by the same rules as on
//! Redis.

use crate::backend::memory::{Entry, Locks};
use crate::backend::{ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, LISTED_MAX};
use crate::key::{KeySet, LockKey};

/// What `key` holds now.
pub(in crate::backend) fn inspect(
    locks: &mut Locks,
    key: &LockKey,
    now: tokio::time::Instant,
) -> LockInfo {
    let mut info = LockInfo::free(key.clone());
    match locks.live(key, now) {
        Some(Entry::Plain(holder)) => {
            info.kind = Some(InspectedKind::Lock);
            info.holders.push(HolderInfo {
                owner: holder.owner.as_str().to_owned(),
                side: HolderSide::Exclusive,
                holds: holder.count,
                lease: Some(holder.expires.saturating_duration_since(now)),
            });
        }
        Some(Entry::Shared(shared)) => {
            info.kind = Some(InspectedKind::ReadWrite);
            info.holders = shared.inspected(now);
        }
        None => {}
    }
    if let Some(queue) = locks.fair.get(key) {
        info.queue = queue.inspected(now, LISTED_MAX);
        info.queued = queue.len();
    }
    info.fencing_token = locks.tokens.get(key).copied();
    if let Some(semaphore) = locks.semaphores.get_mut(key) {
        let (usage, permits) = semaphore.inspected(now);
        info.kind = info.kind.or(Some(InspectedKind::Semaphore));
        info.permits = Some(usage);
        info.holders.extend(permits.into_iter().take(LISTED_MAX));
    }
    info
}

/// Frees `key` whatever holds it; `None` when it needs waking nobody (nothing was held).
pub(in crate::backend) fn force_unlock(
    locks: &mut Locks,
    key: &LockKey,
    now: tokio::time::Instant,
) -> ForceUnlocked {
    let held = match locks.live(key, now) {
        Some(Entry::Plain(holder)) => Some((InspectedKind::Lock, holder.count)),
        Some(Entry::Shared(shared)) => Some((
            InspectedKind::ReadWrite,
            shared.inspected(now).iter().map(|h| h.holds).sum(),
        )),
        None => None,
    };
    if let Some((kind, freed)) = held {
        locks.held.remove(key);
        return ForceUnlocked {
            kind: Some(kind),
            freed,
            left_alone: None,
        };
    }
    match locks.semaphores.get_mut(key) {
        Some(semaphore) => ForceUnlocked {
            kind: Some(InspectedKind::Semaphore),
            freed: semaphore.free_all(now),
            left_alone: None,
        },
        None => ForceUnlocked {
            kind: None,
            freed: 0,
            left_alone: None,
        },
    }
}

/// Adds to `found` the names of the table that match `pattern` (Redis's glob syntax), until
/// it holds `limit + 1`.
pub(in crate::backend) fn list(locks: &Locks, pattern: &str, limit: usize, found: &mut KeySet) {
    let names = locks
        .held
        .keys()
        .chain(locks.semaphores.keys())
        .chain(locks.fair.keys());
    for key in names {
        if found.len() > limit {
            return;
        }
        if glob(pattern.as_bytes(), key.as_str().as_bytes()) {
            found.insert(key.clone());
        }
    }
}

/// Redis's glob match (`*`, `?`, `[abc]`, `[^a]`, `[a-z]`, `\x`), as `SCAN MATCH` applies it;
/// in time linear in the pattern times the text (a `*` that failed is retried from the
/// last one only, never as a tree of choices).
pub(crate) fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to resume after the last `*`: (pattern after it, text position it covers to).
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                resume = Some((p + 1, t));
                p += 1;
                continue;
            }
            Some(b'?') => Some(1),
            Some(b'[') => class(&pattern[p..], text[t]),
            Some(b'\\') if p + 1 < pattern.len() => (pattern[p + 1] == text[t]).then_some(2),
            Some(&c) => (c == text[t]).then_some(1),
            None => None,
        };
        match (step, resume) {
            (Some(width), _) => {
                p += width;
                t += 1;
            }
            (None, Some((after_star, covered))) => {
                // The last `*` takes one more character.
                p = after_star;
                t = covered + 1;
                resume = Some((after_star, covered + 1));
            }
            (None, None) => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Whether the class at the start of `pattern` (`[…]`) matches `c`: the pattern's width
/// when it does.
fn class(pattern: &[u8], c: u8) -> Option<usize> {
    let end = pattern.iter().skip(1).position(|&b| b == b']')? + 1;
    let set = &pattern[1..end];
    let (negate, set) = match set.first() {
        Some(b'^') => (true, &set[1..]),
        _ => (false, set),
    };
    let mut hit = false;
    let mut i = 0;
    while i < set.len() {
        if i + 2 < set.len() && set[i + 1] == b'-' {
            hit |= set[i] <= c && c <= set[i + 2];
            i += 3;
        } else {
            hit |= set[i] == c;
            i += 1;
        }
    }
    (hit != negate).then_some(end + 1)
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs_match_as_redis_does() {
        let cases: [(&str, &str, bool); 12] = [
            ("order:*", "order:42", true),
            ("order:*", "orders:1", false),
            ("order:?", "order:4", true),
            ("order:?", "order:42", false),
            ("order:[0-9]", "order:7", true),
            ("order:[^0-9]", "order:7", false),
            ("order:[ab]*", "order:b12", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("*", "", true),
            ("*a*a*a*a*a*a*a*a*b", &"a".repeat(200), false),
            ("*:*:*", "a:b:c", true),
        ];
        for (pattern, text, matches) in cases {
            assert_eq!(
                glob(pattern.as_bytes(), text.as_bytes()),
                matches,
                "{pattern} {text}"
            );
        }
    }
}
