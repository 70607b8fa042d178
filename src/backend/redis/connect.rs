//! Building the command and subscriber clients.

use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::types::config::ReconnectError;

use super::DEFAULT_COMMAND_TIMEOUT;
use crate::backend::Notices;
use crate::error::BackendError;

/// The command client and the subscriber, with tower-lock's connection settings.
pub(in crate::backend) fn build(
    config: Config,
) -> Result<(Client, SubscriberClient), BackendError> {
    let mut builder = Builder::from_config(config);
    // Reconnect forever with backoff (1, 4, 16 … ms, at most 2 s, plus up to 20 ms of
    // jitter); commands fail fast meanwhile. The first attempt comes at once: fred's
    // client says it is connected until that attempt starts, and an operation sent until
    // then waits behind the reconnect (see `outage`).
    let mut policy = ReconnectPolicy::new_exponential(0, 1, 2_000, 4);
    policy.set_jitter(20);
    builder
        .set_policy(policy)
        .with_connection_config(|c| {
            c.connection_timeout = Duration::from_secs(5);
            c.internal_command_timeout = Duration::from_secs(5);
            // A master demoted by a failover answers READONLY without closing the
            // connection: reconnect (and so find the new master).
            c.reconnect_errors = vec![
                ReconnectError::ReadOnly,
                ReconnectError::MasterDown,
                ReconnectError::ClusterDown,
                ReconnectError::Loading,
            ];
        })
        .with_performance_config(|p| {
            p.default_command_timeout = DEFAULT_COMMAND_TIMEOUT;
            // Unlock messages of many names arrive on one connection.
            p.broadcast_channel_capacity = 4096;
        });
    let build_error = |e| BackendError::with_source("cannot build the Redis client", e);
    let client = builder.build().map_err(build_error)?;
    let subscriber = builder.build_subscriber_client().map_err(build_error)?;
    Ok((client, subscriber))
}

/// `host:port` of the configured servers, for messages (never the credentials).
pub(in crate::backend) fn servers(config: &Config) -> String {
    let hosts: Vec<String> = config
        .server
        .hosts()
        .iter()
        .map(|s| s.to_string())
        .collect();
    hosts.join(", ")
}

/// Tells the manager when `client` loses its connection, and when it has it back. fred
/// reports the loss (its error broadcast) before it says so in its state, which changes
/// only when its first reconnect attempt starts (at once: see `build`): operations pending
/// on the lost connection are told once the state has changed, so that they find the
/// backend unavailable (see `Notices::connection_lost`). Once it is connected again, every
/// waiting head tries at once (`Notices::resync`): one that failed during the outage would
/// otherwise sleep out its back-off while the lock may be free.
pub(in crate::backend) async fn notice_outages(client: Client, notices: Notices) {
    use tokio::sync::broadcast::error::RecvError;
    let mut errors = client.error_rx();
    let mut reconnects = client.reconnect_rx();
    loop {
        tokio::select! {
            error = errors.recv() => match error {
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => return,
            },
            reconnect = reconnects.recv() => {
                match reconnect {
                    Ok(_) | Err(RecvError::Lagged(_)) => notices.resync(),
                    Err(RecvError::Closed) => return,
                }
                continue;
            }
        }
        for _ in 0..100 {
            if !client.is_connected() {
                notices.connection_lost();
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}
