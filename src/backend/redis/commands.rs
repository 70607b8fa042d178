//! Where lock commands go: one client, or a pool of them; and the batch script's call.

use fred::clients::{Pool, WithOptions};
use fred::prelude::*;
use fred::types::scripts::Script;
use fred::types::{ClusterHash, CustomCommand};

use crate::error::BackendError;
use crate::key::LockKey;
use crate::telemetry::TARGET;

/// The connections lock commands go through.
pub(in crate::backend) enum Commands {
    Client(Client),
    /// Round robin over the pool's clients.
    Pool(Pool),
}

impl Commands {
    /// The client the next command goes through.
    pub(in crate::backend) fn next(&self) -> &Client {
        match self {
            Commands::Client(client) => client,
            Commands::Pool(pool) => pool.next(),
        }
    }

    /// The first client (the one to ask about the server, and to follow).
    pub(in crate::backend) fn first(&self) -> &Client {
        match self {
            Commands::Client(client) => client,
            Commands::Pool(pool) => &pool.clients()[0],
        }
    }

    /// Every client.
    pub(in crate::backend) fn all(&self) -> &[Client] {
        match self {
            Commands::Client(client) => std::slice::from_ref(client),
            Commands::Pool(pool) => pool.clients(),
        }
    }

    /// Whether a command sent now has a connection (fred says it is connected only once
    /// its reconnect succeeded).
    pub(in crate::backend) fn is_connected(&self) -> bool {
        self.all().iter().any(Client::is_connected)
    }
}

/// EVALSHA's arguments: the script's SHA, the number of keys, the keys, then `args`.
pub(in crate::backend) fn script_call<const N: usize>(
    script: &Script,
    keys: &[String],
    args: [Value; N],
) -> Vec<Value> {
    let mut values = Vec::with_capacity(2 + keys.len() + N);
    values.push(Value::String(script.sha1().clone()));
    values.push(Value::from(keys.len() as i64));
    values.extend(keys.iter().map(|key| Value::from(key.as_str())));
    values.extend(args);
    values
}

/// Milliseconds for a script argument: at least 1.
pub(in crate::backend) fn millis(duration: std::time::Duration) -> i64 {
    duration.as_millis().clamp(1, i64::MAX as u128) as i64
}

/// Runs `script` by EVALSHA with the arguments `args` builds, through `client` with
/// `options`; loads it and runs it again when the server does not know it (after a restart
/// or `SCRIPT FLUSH`): `args` is called twice only then. All keys of one call share the
/// slot of `key`.
///
/// Sent with `custom` rather than fred's `evalsha`: fred's `WithOptions` does not
/// implement its script interface, so `with_options(..).evalsha(..)` runs on the bare
/// client, and neither the command's time limit nor failing fast while disconnected
/// would apply.
pub(in crate::backend) async fn eval_script<A>(
    client: &Client,
    options: &Options,
    script: &Script,
    key: &LockKey,
    args: A,
) -> Result<Value, BackendError>
where
    A: Fn() -> Vec<Value>,
{
    let with_options = client.with_options(options);
    let evalsha = evalsha(key);
    let result = match with_options
        .custom::<Value, _>(evalsha.clone(), args())
        .await
    {
        Err(e) if e.details().starts_with("NOSCRIPT") => {
            // Boxed: the rare path does not weigh on every operation's future.
            Box::pin(reload_and_eval(
                client,
                &with_options,
                script,
                evalsha,
                args(),
            ))
            .await
        }
        other => other,
    };
    result.map_err(|e| {
        // A script that reads a key with `redis.call` fails as a whole on data of another
        // type: say which lock and why.
        let details = e.details();
        let hint = if details.contains("WRONGTYPE") || details.contains("not an integer") {
            " (does one of its keys hold other data?)"
        } else {
            ""
        };
        BackendError::with_source(format!("Redis command on `{key}` failed{hint}"), e)
    })
}

/// A script's reply when it is a number or a list, as the scripts answer; anything else is
/// Redis's error text from a `redis.pcall` (a key of the `kind` lock on `key` holds data of
/// another type), reported as such.
pub(in crate::backend) fn scripted_reply(
    reply: Value,
    kind: &str,
    key: &LockKey,
) -> Result<Value, BackendError> {
    match reply {
        Value::Integer(_) | Value::Array(_) => Ok(reply),
        other => Err(BackendError::new(format!(
            "Redis rejected the {kind} lock operation on `{key}`: {} (does one of its keys \
             hold other data?)",
            other.as_string().unwrap_or_default()
        ))),
    }
}

/// Loads the script again (after a restart or `SCRIPT FLUSH`) and runs it.
async fn reload_and_eval(
    client: &Client,
    with_options: &WithOptions<Client>,
    script: &Script,
    evalsha: CustomCommand,
    arguments: Vec<Value>,
) -> Result<Value, Error> {
    tracing::debug!(target: TARGET, "Redis lost the lock script (restart or SCRIPT FLUSH); reloading");
    let lua = script.lua().cloned().unwrap_or_default();
    // On a cluster, load it on every primary (the key's node may change).
    if client.is_clustered() {
        client.script_load_cluster::<(), _>(lua).await?;
    } else {
        client.script_load::<(), _>(lua).await?;
    }
    with_options.custom(evalsha, arguments).await
}

/// `EVALSHA`, routed on a cluster to the slot of `key` (fred hashes a custom command's
/// first string argument otherwise: the SHA).
fn evalsha(key: &LockKey) -> CustomCommand {
    let slot = fred::util::redis_keyslot(key.as_str().as_bytes());
    CustomCommand::new_static("EVALSHA", ClusterHash::Custom(slot), false)
}
