//! Inspection, listing and force-unlock on Redis: one script call to read a name
//! (`inspect.lua`), one to free it (`force_unlock.lua`), SCAN on every master to list.

use std::time::Duration;

use fred::prelude::*;
use fred::types::scripts::Script;

use crate::backend::redis::commands::eval_script;
use crate::backend::redis::{names, scripts, RedisBackend};
use crate::backend::BoxFuture;
use crate::backend::PermitUsage;
use crate::backend::{
    ForceUnlocked, HolderInfo, HolderSide, InspectedKind, LockInfo, QueuedWaiter, LISTED_MAX,
};
use crate::error::BackendError;
use crate::key::LockKey;

/// The inspection script.
pub(in crate::backend) fn inspect_script() -> String {
    include_str!("inspect.lua").to_owned()
}

/// The force-unlock script, with PUBLISH or SPUBLISH.
pub(in crate::backend) fn force_unlock_script(sharded: bool) -> String {
    scripts::publishing(include_str!("force_unlock.lua"), sharded)
}

/// Runs `script` on `key` with `keys` and `args` (all in `key`'s slot).
async fn run(
    backend: &RedisBackend,
    script: &Script,
    key: &LockKey,
    keys: Vec<String>,
    args: Vec<Value>,
) -> Result<Value, BackendError> {
    let inner = &backend.inner;
    let arguments = || {
        let mut values = Vec::with_capacity(2 + keys.len() + args.len());
        values.push(Value::String(script.sha1().clone()));
        values.push(Value::from(keys.len() as i64));
        values.extend(keys.iter().map(|key| Value::from(key.as_str())));
        values.extend(args.iter().cloned());
        values
    };
    eval_script(inner.next_client(), &inner.options, script, key, arguments).await
}

impl RedisBackend {
    /// [`Backend::inspect`](crate::backend::Backend::inspect).
    pub(in crate::backend) fn inspect_name(
        &self,
        key: LockKey,
    ) -> BoxFuture<Result<LockInfo, BackendError>> {
        let backend = self.clone();
        Box::pin(async move {
            let keys = vec![
                key.as_str().to_owned(),
                names::fair_queue(&key),
                names::fair_deadlines(&key),
                names::fencing_tokens(&key),
                names::semaphore_deadlines(&key),
            ];
            let args = vec![
                Value::from(names::read_write_key_prefix(&key)),
                Value::from(LISTED_MAX as i64),
            ];
            let reply = run(&backend, &backend.inner.inspect, &key, keys, args).await?;
            decode_inspection(key.clone(), reply).map_err(|detail| {
                BackendError::new(format!(
                    "Redis answered the inspection of `{key}` oddly: {detail}"
                ))
            })
        })
    }

    /// [`Backend::force_unlock`](crate::backend::Backend::force_unlock).
    pub(in crate::backend) fn force_unlock_name(
        &self,
        key: LockKey,
    ) -> BoxFuture<Result<ForceUnlocked, BackendError>> {
        let backend = self.clone();
        Box::pin(async move {
            let keys = vec![
                key.as_str().to_owned(),
                names::fair_queue(&key),
                names::unlock_channel(&key),
                names::read_write_channel(&key),
                names::semaphore_deadlines(&key),
                names::semaphore_channel(&key),
            ];
            let args = vec![Value::from(names::read_write_key_prefix(&key))];
            let reply = run(&backend, &backend.inner.force_unlock, &key, keys, args).await?;
            let parts = match reply {
                Value::Array(parts) if parts.len() == 3 => parts,
                other => {
                    return Err(BackendError::new(format!(
                        "Redis answered the force-unlock of `{key}` with {other:?}"
                    )))
                }
            };
            let text = |at: usize| parts[at].as_string().unwrap_or_default();
            let freed = u32::try_from(parts[1].as_i64().unwrap_or(0)).unwrap_or(u32::MAX);
            let kind = match text(0).as_str() {
                "lock" => Some(InspectedKind::Lock),
                "read_write" => Some(InspectedKind::ReadWrite),
                "semaphore" => Some(InspectedKind::Semaphore),
                "none" => None,
                _ => {
                    return Ok(ForceUnlocked {
                        kind: None,
                        freed: 0,
                        left_alone: Some(text(2)),
                    })
                }
            };
            Ok(ForceUnlocked {
                kind,
                freed,
                left_alone: None,
            })
        })
    }

    /// [`Backend::list_names`](crate::backend::Backend::list_names): SCAN on every master
    /// (one server, or each primary of a cluster), until `limit` names or the end.
    pub(in crate::backend) fn scan_names(
        &self,
        pattern: String,
        limit: usize,
    ) -> BoxFuture<Result<Vec<LockKey>, BackendError>> {
        let client = self.inner.commands.first().clone();
        Box::pin(async move {
            let failed = |e: Error| BackendError::with_source("Redis SCAN failed", e);
            let nodes: Vec<Option<fred::types::config::Server>> = if client.is_clustered() {
                match client.cached_cluster_state() {
                    Some(routing) => routing
                        .unique_primary_nodes()
                        .into_iter()
                        .map(Some)
                        .collect(),
                    None => return Err(BackendError::new("the cluster's layout is not known yet")),
                }
            } else {
                vec![None]
            };
            let mut found = Vec::new();
            for node in nodes {
                let mut cursor = "0".to_owned();
                loop {
                    let args: Vec<Value> = vec![
                        cursor.clone().into(),
                        "MATCH".into(),
                        pattern.clone().into(),
                        "COUNT".into(),
                        1000.into(),
                    ];
                    let reply: Value = match &node {
                        Some(server) => client
                            .with_cluster_node(server)
                            .custom(fred::cmd!("SCAN"), args)
                            .await
                            .map_err(failed)?,
                        None => client
                            .custom(fred::cmd!("SCAN"), args)
                            .await
                            .map_err(failed)?,
                    };
                    let Value::Array(mut parts) = reply else {
                        return Err(BackendError::new("Redis answered SCAN oddly"));
                    };
                    let keys = parts.pop();
                    cursor = parts.pop().and_then(|c| c.as_string()).unwrap_or_default();
                    if let Some(Value::Array(keys)) = keys {
                        for key in keys {
                            if let Some(text) = key.as_string().filter(|key| is_lock_key(key)) {
                                found.push(LockKey::from_stored(&text));
                            }
                            if found.len() > limit {
                                return Ok(found);
                            }
                        }
                    }
                    if cursor == "0" || cursor.is_empty() {
                        break;
                    }
                }
            }
            Ok(found)
        })
    }
}

/// Milliseconds left as a Redis answered them (`-1`: none, `-2`: gone).
fn left(ms: i64) -> Option<Duration> {
    (ms >= 0).then(|| Duration::from_millis(ms as u64))
}

fn decode_inspection(key: LockKey, reply: Value) -> Result<LockInfo, String> {
    let Value::Array(parts) = reply else {
        return Err(format!("{reply:?}"));
    };
    if parts.len() != 10 {
        return Err(format!("{} parts", parts.len()));
    }
    let int = |value: &Value| value.as_i64().unwrap_or(-1);
    let list = |value: &Value| match value {
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    };
    // parts[1], the name's PTTL, is each lock holder's lease (already in its field).
    let kind_text = parts[0].as_string().unwrap_or_default();
    let mut info = LockInfo::free(key);
    let fields = list(&parts[2]);
    let read_write = fields
        .chunks(3)
        .any(|f| f[0].as_string().as_deref() == Some("mode"));
    if kind_text == "hash" {
        info.kind = Some(if read_write {
            InspectedKind::ReadWrite
        } else {
            InspectedKind::Lock
        });
        for field in fields.chunks(3) {
            let [name, count, lease] = field else {
                continue;
            };
            let name = name.as_string().unwrap_or_default();
            if name == "mode" {
                continue;
            }
            let (owner, side) = match name.strip_suffix(":write") {
                Some(owner) if read_write => (owner.to_owned(), HolderSide::Write),
                _ if read_write => (name, HolderSide::Read),
                _ => (name, HolderSide::Exclusive),
            };
            let holds = u32::try_from(int(count)).unwrap_or(0);
            info.holders.push(HolderInfo {
                owner,
                side,
                holds,
                lease: left(int(lease)),
            });
        }
    }
    for place in list(&parts[3]).chunks(2) {
        let [owner, deadline] = place else { continue };
        info.queue.push(QueuedWaiter {
            owner: owner.as_string().unwrap_or_default(),
            place_lasts: left(int(deadline)),
        });
    }
    info.queued = usize::try_from(int(&parts[4])).unwrap_or(0);
    info.fencing_token = parts[5].as_string().and_then(|t| t.parse().ok());
    let count = parts[6].as_string().and_then(|v| v.parse::<i64>().ok());
    let permits = list(&parts[7]);
    let (all, live) = (int(&parts[8]).max(0), int(&parts[9]).max(0));
    if kind_text == "string" && count.is_some() || all > 0 {
        info.kind = info.kind.or(Some(InspectedKind::Semaphore));
        let limit =
            count.map(|available| u32::try_from((available + all).max(0)).unwrap_or(u32::MAX));
        info.permits = Some(PermitUsage::new(
            limit,
            u32::try_from(live).unwrap_or(u32::MAX),
        ));
        for permit in permits.chunks(2) {
            let [id, lease] = permit else { continue };
            // 16 raw bytes, shown as Redisson shows them (whether or not they read as text).
            let id = id
                .as_bytes()
                .map(|bytes| bytes.iter().map(|b| format!("{b:02x}")).collect())
                .unwrap_or_default();
            info.holders.push(HolderInfo {
                owner: id,
                side: HolderSide::Permit,
                holds: 1,
                lease: left(int(lease)),
            });
        }
    }
    Ok(info)
}

/// Key prefixes of the objects that belong to a lock's name (Redisson's and tower-lock's),
/// which a listing leaves out.
const DERIVED_PREFIXES: [&str; 4] = [
    "redisson_lock_queue:",
    "redisson_lock_timeout:",
    "redisson_lock_token:",
    "tower_lock_record:",
];

/// Whether a key names a lock rather than an object that belongs to one (a fair queue, a
/// token counter, a semaphore's permits, a read hold's timeout key): a listing counts only
/// these, so that its limit is a limit on names.
fn is_lock_key(key: &str) -> bool {
    if DERIVED_PREFIXES
        .iter()
        .any(|prefix| key.starts_with(prefix))
    {
        return false;
    }
    let belongs = key.starts_with('{')
        && (key.ends_with(":timeout")
            || key.contains(":rwlock_timeout:")
            || key.ends_with(":tower_lock:waiting_writers"));
    !belongs
}

#[cfg(test)]
mod tests {
    use super::is_lock_key;

    #[test]
    fn a_listing_counts_names_not_what_belongs_to_them() {
        assert!(is_lock_key("order:42"));
        for derived in [
            "redisson_lock_queue:{order:42}",
            "{order:42}:timeout",
            "{order:42}:abc:1:rwlock_timeout:1",
            "tower_lock_record:{job}",
        ] {
            assert!(!is_lock_key(derived), "{derived}");
        }
    }
}
