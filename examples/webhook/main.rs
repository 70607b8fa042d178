//! Idempotent webhook receiver, on `IdempotencyLayer`.
//!
//! ```text
//! cargo run --example webhook                # in memory; REDIS_URL=redis://… for Redis
//! ```
//! Listens on 127.0.0.1:3001 (`PORT` overrides; `0` picks a free port). Handling an event
//! takes `WORK_MS` (50); `DUPLICATES=reject` answers 409 to a delivery that arrives while the
//! first with its id is handled, instead of waiting for it; `LEASE_MS` sets the lease of
//! the delivery locks (a crashed receiver's deliveries are handled again after it).

mod app;

use std::time::Duration;

use tower_lock::LockManager;

fn millis(name: &str, default: u64) -> Result<Duration, String> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .map(Duration::from_millis)
            .map_err(|_| format!("{name} must be a number of milliseconds, not `{value}`")),
        Err(_) => Ok(Duration::from_millis(default)),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let work = millis("WORK_MS", 50)?;
    let lease = millis("LEASE_MS", 30_000)?;
    let builder = LockManager::builder().lease(lease);
    let (locks, redis) = match std::env::var("REDIS_URL") {
        Ok(url) if !url.is_empty() => {
            let config = fred::prelude::Config::from_url(&url)?;
            let redis = fred::prelude::Builder::from_config(config).build()?;
            fred::interfaces::ClientLike::init(&redis).await?;
            (builder.redis(&url).await?, Some(redis))
        }
        _ => (builder.memory(), None),
    };
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port
            .parse()
            .map_err(|_| format!("PORT must be a port number, not `{port}`"))?,
        Err(_) => 3001,
    };
    let duplicates = match std::env::var("DUPLICATES").as_deref() {
        Ok("reject") => app::Duplicates::Reject,
        _ => app::Duplicates::Wait(Duration::from_secs(10)),
    };
    let app = app::app(locks, app::Work::new(redis, work), duplicates);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let base = format!("http://{}", listener.local_addr()?);
    println!("webhook receiver on {base}");
    println!("try:");
    println!("  curl -i -X POST {base}/webhooks -H 'Idempotency-Key: \"evt-1\"' -d '{{\"paid\":1}}'  # handled");
    println!("  curl -i -X POST {base}/webhooks -H 'Idempotency-Key: \"evt-1\"' -d '{{\"paid\":1}}'  # replayed");
    println!("  curl -i -X POST {base}/webhooks -H 'Idempotency-Key: \"evt-1\"' -d '{{\"paid\":2}}'  # 422");
    println!("  curl -i -X POST {base}/webhooks -d '{{}}'                                            # 400");
    println!("  curl -i -X POST {base}/webhooks/github -H 'X-GitHub-Delivery: 72d3162e' -d '{{}}'");
    println!("  curl -i -X POST {base}/webhooks/stripe -d '{{\"id\":\"evt_1\",\"type\":\"charge.succeeded\"}}'");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
