//! Redisson's own `RLock` scripts, sent as they are with an owner id of their own: a light
//! stand-in for a Redisson client inside tests that are about something else (fairness,
//! batching, hand-over). The real Redisson (Java) is driven by `redisson_java` in the
//! interop suite, `tests/redisson_interop/`.

use fred::prelude::*;

/// Redisson's `tryLockInnerAsync` script.
const LOCK: &str = r#"
if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
return redis.call('pttl', KEYS[1]);
"#;

/// Redisson's `unlockInnerAsync` script (with the unlock latch of current versions).
const UNLOCK: &str = r#"
local val = redis.call('get', KEYS[3]);
if val ~= false then return tonumber(val); end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call(ARGV[4], KEYS[2], ARGV[1]);
  redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
  return 1;
end;
"#;

pub struct RedissonScripts {
    client: Client,
    owner: String,
}

impl RedissonScripts {
    pub fn new(client: Client) -> Self {
        RedissonScripts {
            client,
            owner: "9f1c2b7e-0000-4000-8000-redisson0001:1".into(),
        }
    }

    /// `None` when acquired, else the holder's PTTL.
    pub async fn try_lock(&self, name: &str, lease_ms: i64) -> Option<i64> {
        self.client
            .eval(
                LOCK,
                vec![name],
                vec![Value::from(lease_ms), self.owner.as_str().into()],
            )
            .await
            .expect("redisson lock script")
    }

    /// `Some(1)` when freed, `Some(0)` when still held, `None` when not held.
    pub async fn unlock(&self, name: &str, request_id: &str) -> Option<i64> {
        let keys = vec![
            name.to_owned(),
            format!("redisson_lock__channel:{{{name}}}"),
            format!("redisson_unlock_latch:{{{name}}}:{request_id}"),
        ];
        let args: Vec<Value> = vec![
            "0".into(),
            Value::from(30_000i64),
            self.owner.as_str().into(),
            "publish".into(),
            Value::from(10_000i64),
        ];
        self.client
            .eval(UNLOCK, keys, args)
            .await
            .expect("redisson unlock script")
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }
}
