//! What an operator asks of a manager: what a name holds now, which names exist, and
//! freeing a name whatever holds it (see `docs/operations.md`).

use crate::backend::{ForceUnlocked, LockInfo, NameList};
use crate::engine::manager::registry::LocalHold;
use crate::engine::manager::LockManager;
use crate::error::LockError;
use crate::key::LockKey;
use crate::telemetry::TARGET;

/// The most names one listing returns.
pub const MAX_LISTED_NAMES: usize = 10_000;

impl LockManager {
    /// What the name holds now, read in one step from the backend (Redis: one script
    /// call, read only): its kind, each holder (owner id, holds, remaining lease), a fair
    /// lock's queue, the last fencing token, a semaphore's permits. Works for locks that
    /// Redisson clients hold too.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use tower_lock::admin::InspectedKind;
    ///
    /// let locks = tower_lock::LockManager::memory();
    /// let guard = locks.lock("order:42").acquire().await.unwrap();
    /// let info = locks.inspect("order:42").await.unwrap();
    /// assert_eq!(info.kind, Some(InspectedKind::Lock));
    /// assert_eq!(info.holders[0].owner, guard.owner().as_str());
    /// assert_eq!(info.holders[0].holds, 1);
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::Unavailable`].
    pub async fn inspect(&self, name: &str) -> Result<LockInfo, LockError> {
        let key = self.key(name)?;
        self.inner.store().check_inspects()?;
        Ok(self.inner.store().inspect(key).await?)
    }

    /// Frees the name whatever holds it: a lock's holders (every owner, every hold), a
    /// read-write lock's readers and writer, a semaphore's permits (its limit stays). Its
    /// waiters are woken with the kind's own message (Redis: Redisson's waiters too); the
    /// holders learn it through their loss signal at their next renewal, and their release
    /// then reports `NotHeld`. Logged as a warning naming `asked_by`. A name holding data
    /// that is no lock of tower-lock's or Redisson's is left alone
    /// ([`LockError::NotALock`] says what it holds).
    ///
    /// Only for a holder that is truly gone or stuck: the work it did under the lock may
    /// still be running (see `docs/operations.md`).
    ///
    /// # Errors
    /// [`LockError::InvalidName`], [`LockError::NotALock`], [`LockError::Unavailable`].
    pub async fn force_unlock(
        &self,
        name: &str,
        asked_by: &str,
    ) -> Result<ForceUnlocked, LockError> {
        let key = self.key(name)?;
        self.inner.store().check_inspects()?;
        let freed = self.inner.store().force_unlock(key.clone()).await?;
        if let Some(holds) = freed.left_alone {
            tracing::warn!(
                target: TARGET,
                key = %key,
                asked_by,
                holds,
                "tower-lock: force-unlock refused: the name holds data that is no lock"
            );
            return Err(LockError::NotALock { key, holds });
        }
        tracing::warn!(
            target: TARGET,
            key = %key,
            asked_by,
            kind = freed.kind.map_or("none", |kind| kind.name()),
            freed = freed.freed,
            "tower-lock: force-unlocked"
        );
        Ok(freed)
    }

    /// What this process holds now: every live hold of this manager, how long it has been
    /// held, and the request it was taken for when the HTTP layer took it (method, path,
    /// start). For a service's own debug route (see [`admin::router`](crate::admin)). Empty
    /// when the manager was built with
    /// [`track_holds(false)`](crate::manager::LockManagerBuilder::track_holds).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let locks = tower_lock::LockManager::memory();
    /// let guard = locks.lock("order:42").acquire().await.unwrap();
    /// let holds = locks.local_holds();
    /// assert_eq!(holds.len(), 1);
    /// assert_eq!(holds[0].key, *guard.key());
    /// drop(guard);
    /// # tokio::task::yield_now().await;
    /// # }
    /// ```
    pub fn local_holds(&self) -> Vec<LocalHold> {
        self.inner.registry().views()
    }

    /// Names with waiters in this process now, each with how many wait for it here.
    pub fn local_waiters(&self) -> Vec<(LockKey, usize)> {
        self.inner.queues().waiting_names()
    }

    /// The names under this manager's prefix that match `pattern` (Redis's glob syntax:
    /// `*`, `?`, `[a-z]`, `\` before a literal), at most `limit` (at most
    /// [`MAX_LISTED_NAMES`]); on Redis a SCAN of every master, so it reads the keyspace in
    /// pages and never blocks the server. The objects that belong to a name (a fair
    /// queue, a token counter, a semaphore's permits) are left out.
    ///
    /// # Errors
    /// [`LockError::InvalidName`] for an empty pattern, one over the name length limit,
    /// one with control characters or an unclosed `[`, or a limit of 0 or over
    /// [`MAX_LISTED_NAMES`]; [`LockError::Unavailable`].
    pub async fn list_names(&self, pattern: &str, limit: usize) -> Result<NameList, LockError> {
        let invalid = |reason: String| LockError::InvalidName { reason };
        let settings = self.inner.settings();
        check_pattern(pattern, settings.max_name_len).map_err(invalid)?;
        if limit == 0 || limit > MAX_LISTED_NAMES {
            return Err(invalid(format!(
                "a listing returns 1 to {MAX_LISTED_NAMES} names, not {limit}"
            )));
        }
        let prefix = settings.key_prefix.clone();
        let full = format!("{}{pattern}", escape_glob(&prefix));
        self.inner.store().check_inspects()?;
        let keys = self.inner.store().list_names(full, limit).await?;
        let mut names: Vec<String> = keys
            .iter()
            .filter_map(|key| key.as_str().strip_prefix(prefix.as_str()))
            .map(str::to_owned)
            .collect();
        names.sort();
        names.dedup();
        let truncated = names.len() > limit || keys.len() > limit;
        names.truncate(limit);
        Ok(NameList { names, truncated })
    }
}

/// Why `pattern` cannot be a listing's pattern, if it cannot.
fn check_pattern(pattern: &str, max_len: usize) -> Result<(), String> {
    if pattern.is_empty() {
        return Err("the pattern is empty (`*` lists every name)".to_owned());
    }
    if pattern.len() > max_len {
        return Err(format!(
            "the pattern is {} bytes long, over the limit of {max_len}",
            pattern.len()
        ));
    }
    if pattern.chars().any(char::is_control) {
        return Err("the pattern contains control characters".to_owned());
    }
    let mut escaped = false;
    let mut open = false;
    for c in pattern.chars() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '[') if !open => open = true,
            (false, ']') => open = false,
            _ => {}
        }
    }
    if open {
        return Err("the pattern has a `[` without its `]`".to_owned());
    }
    Ok(())
}

/// `text` with the glob's special characters escaped, to match itself.
fn escape_glob(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    // The module under test, named in full (its tests see its private items).
    use crate::engine::manager::operator::*;

    #[test]
    fn patterns_are_checked_and_prefixes_escaped() {
        assert!(check_pattern("order:*", 64).is_ok());
        assert!(check_pattern("order:[0-9]*", 64).is_ok());
        assert!(check_pattern("a\\[b", 64).is_ok());
        for (bad, says) in [
            ("", "empty"),
            ("order:[0-9", "without its"),
            ("a\nb", "control"),
            (&"x".repeat(65), "over the limit"),
        ] {
            let error = check_pattern(bad, 64).unwrap_err();
            assert!(error.contains(says), "{bad:?}: {error}");
        }
        assert_eq!(escape_glob("app*[1]:"), "app\\*\\[1\\]:");
    }
}
