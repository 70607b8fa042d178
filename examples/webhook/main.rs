//! Idempotent webhook receiver.
//!
//! ```text
//! cargo run --example webhook                # in memory; REDIS_URL=redis://… for Redis
//! ```
//! Listens on 127.0.0.1:3001 (`PORT` overrides). The delivery id comes from the
//! `Idempotency-Key` header (`KEY_HEADER=X-GitHub-Delivery` for GitHub's, say). Duplicates
//! that arrive while the first runs wait for it and get its response again
//! (`DUPLICATES=reject`: 409 instead).

mod replay;

use std::time::Duration;

use fred::prelude::*;
use tower_lock::LockManager;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ttl = Duration::from_secs(24 * 3600);
    let (locks, store) = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => {
            let client = Builder::from_config(Config::from_url(&url)?).build()?;
            client.init().await?;
            (
                LockManager::redis(&url).await?,
                replay::Store::redis(client, ttl),
            )
        }
        _ => (LockManager::memory(), replay::Store::memory(ttl)),
    };
    let header: &'static str = Box::leak(
        std::env::var("KEY_HEADER")
            .unwrap_or_else(|_| "Idempotency-Key".into())
            .into_boxed_str(),
    );
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port
            .parse()
            .map_err(|_| format!("PORT must be a port number, not `{port}`"))?,
        Err(_) => 3001,
    };
    // DUPLICATES=reject answers 409 to a duplicate while the first is still running.
    let duplicates = match std::env::var("DUPLICATES").as_deref() {
        Ok("reject") => replay::Duplicates::Reject,
        _ => replay::Duplicates::Wait(Duration::from_secs(10)),
    };
    let (app, _processed) = replay::app(locks, store, duplicates, header);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let base = format!("http://{}/webhooks", listener.local_addr()?);
    println!("webhook receiver on {base}; delivery id header: {header}");
    println!("try:");
    println!("  curl -i -X POST {base} -H '{header}: evt-1' -d '{{\"paid\":1}}'   # processed");
    println!("  curl -i -X POST {base} -H '{header}: evt-1' -d '{{\"paid\":1}}'   # replayed");
    println!("  curl -i -X POST {base} -H '{header}: evt-1' -d '{{\"paid\":2}}'   # 422");
    println!("  curl -i -X POST {base} -d '{{}}'                                   # 400");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
