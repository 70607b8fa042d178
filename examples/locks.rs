//! A command line for operators: what a lock holds, which locks exist, and freeing one.
//!
//! ```text
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example locks -- inspect order:42
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example locks -- list 'order:*' [limit]
//! REDIS_URL=redis://127.0.0.1:6379 cargo run --example locks -- unlock order:42
//! ```
//!
//! Names are read as the services name them (no key prefix: set `LOCK_PREFIX` for one).
//! `unlock` frees the name whatever holds it (see `docs/operations.md` first) and says who
//! asked in the service logs' warning (`$USER`). Exit codes: 0 done, 1 an error, 2 bad
//! usage, 3 nothing under the name.

use std::process::ExitCode;

use tower_lock::admin::LockInfo;
use tower_lock::LockManager;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: locks inspect <name> | list <pattern> [limit] | unlock <name>  (REDIS_URL, LOCK_PREFIX)";
    let Ok(url) = std::env::var("REDIS_URL") else {
        eprintln!(
            "set REDIS_URL (redis://host:port, redis-cluster://…, redis-sentinel://…)\n{usage}"
        );
        return ExitCode::from(2);
    };
    let builder =
        LockManager::builder().key_prefix(std::env::var("LOCK_PREFIX").unwrap_or_default());
    let locks = match builder.redis(&url).await {
        Ok(locks) => locks,
        Err(error) => {
            eprintln!("cannot reach Redis at {url}: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["inspect", name] => locks.inspect(name).await.map(|info| {
            print_info(&info);
            if info.kind.is_none() && info.queued == 0 {
                ExitCode::from(3)
            } else {
                ExitCode::SUCCESS
            }
        }),
        ["list", pattern, rest @ ..] => {
            let limit = match rest.first().map(|limit| limit.parse::<usize>()) {
                None => 100,
                Some(Ok(limit)) => limit,
                Some(Err(_)) => {
                    eprintln!("the limit is a whole number\n{usage}");
                    return ExitCode::from(2);
                }
            };
            locks.list_names(pattern, limit).await.map(|list| {
                for name in &list.names {
                    println!("{name}");
                }
                if list.truncated {
                    eprintln!("(more than {limit}; give a larger limit or a narrower pattern)");
                }
                ExitCode::SUCCESS
            })
        }
        ["unlock", name] => {
            let who = format!(
                "{} (locks command line)",
                std::env::var("USER").unwrap_or_else(|_| "someone".into())
            );
            locks
                .force_unlock(name, &who)
                .await
                .map(|freed| match freed.kind {
                    Some(kind) => {
                        println!(
                            "freed {} hold(s) of the {} `{name}`",
                            freed.freed,
                            kind.name()
                        );
                        ExitCode::SUCCESS
                    }
                    None => {
                        println!("nothing is stored under `{name}`");
                        ExitCode::from(3)
                    }
                })
        }
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    result.unwrap_or_else(|error| {
        eprintln!("{error}");
        ExitCode::FAILURE
    })
}

fn print_info(info: &LockInfo) {
    let Some(kind) = info.kind else {
        println!("{}: free", info.key);
        if info.queued > 0 {
            println!("  {} waiting in its fair queue", info.queued);
        }
        return;
    };
    println!("{}: {}", info.key, kind.name());
    for holder in &info.holders {
        let lease = holder.lease.map_or_else(
            || "no expiry".to_owned(),
            |lease| format!("{} ms left", lease.as_millis()),
        );
        println!(
            "  {} {} ×{} ({lease})",
            holder.side.name(),
            holder.owner,
            holder.holds
        );
    }
    if info.queued > 0 {
        println!("  fair queue ({} waiting):", info.queued);
        for waiter in &info.queue {
            println!("    {}", waiter.owner);
        }
    }
    if let Some(token) = info.fencing_token {
        println!("  last fencing token: {token}");
    }
    if let Some(usage) = info.permits {
        let limit = usage
            .limit
            .map_or_else(|| "unset".to_owned(), |limit| limit.to_string());
        println!("  permits: {} in use of {limit}", usage.in_use);
    }
}
