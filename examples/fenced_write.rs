//! A fenced lock protecting a write to PostgreSQL: the store itself refuses the late write
//! of a holder whose lock ran out while it was paused.
//!
//! ```text
//! DATABASE_URL=postgres://user@localhost/db cargo run --example fenced_write
//! ```
//!
//! Locks are taken in memory, or on Redis when `REDIS_URL` is set. The example creates the
//! table `fenced_accounts` if it is absent and works on the row `ACCOUNT_ID` (default 1).
//!
//! What happens: holder A takes the lock with a short fixed lease and "pauses" (a GC pause,
//! a stalled VM) past it; holder B takes the lock and writes with its token; A wakes up and
//! writes with its older token. The `UPDATE … WHERE fence < $token` lands B's write and
//! refuses A's: without the token, A would overwrite B's work.

use std::time::Duration;

use tokio_postgres::{Client, NoTls};
use tower_lock::LockManager;

/// Writes `balance` to `account` under `token`: lands only if no greater or equal token
/// wrote before (the row keeps the highest token that wrote it in `fence`). Returns whether
/// it landed.
async fn fenced_write(
    db: &Client,
    account: i64,
    balance: i64,
    token: u64,
) -> Result<bool, tokio_postgres::Error> {
    // PostgreSQL's bigint is signed: tokens stay far below 2^63 (one per acquisition).
    let token = i64::try_from(token).expect("a token below 2^63");
    let updated = db
        .execute(
            "UPDATE fenced_accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence < $2",
            &[&balance, &token, &account],
        )
        .await?;
    Ok(updated == 1)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Ok(database_url) = std::env::var("DATABASE_URL") else {
        eprintln!(
            "Set DATABASE_URL to a PostgreSQL database, e.g.\n  \
             DATABASE_URL=postgres://postgres@localhost/postgres cargo run --example fenced_write"
        );
        std::process::exit(2);
    };
    let account: i64 = match std::env::var("ACCOUNT_ID") {
        Ok(id) => id
            .parse()
            .map_err(|_| format!("ACCOUNT_ID `{id}` is not a number"))?,
        Err(_) => 1,
    };
    let locks = match std::env::var("REDIS_URL") {
        Ok(url) => LockManager::redis(&url).await?,
        Err(_) => LockManager::memory(),
    };
    let (db, connection) = tokio_postgres::connect(&database_url, NoTls).await?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("PostgreSQL connection ended: {error}");
        }
    });
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS fenced_accounts (
             id bigint PRIMARY KEY,
             balance bigint NOT NULL,
             fence bigint NOT NULL DEFAULT 0
         )",
    )
    .await?;
    db.execute(
        "INSERT INTO fenced_accounts (id, balance) VALUES ($1, 0) ON CONFLICT (id) DO NOTHING",
        &[&account],
    )
    .await?;
    let name = format!("account:{account}");

    // A takes the lock with a short fixed lease, then pauses past it (waiting here for the
    // loss signal stands in for a pause A itself would not notice).
    let a = locks
        .fenced_lock(&name)
        .fixed_lease(Duration::from_millis(300))
        .acquire()
        .await?;
    let a_token = a.fencing_token().expect("a fenced lock has a token");
    println!("A holds {name} with token {a_token}, and pauses");
    a.lost().await;

    // B gets the lock once A's lease ran out, and writes.
    let b = locks
        .fenced_lock(&name)
        .wait(Duration::from_secs(10))
        .acquire()
        .await?;
    let b_token = b.fencing_token().expect("a fenced lock has a token");
    let landed = fenced_write(&db, account, 200, b_token).await?;
    println!("B holds {name} with token {b_token}; its write landed: {landed}");

    // A wakes up, unaware, and writes with its old token: refused by the store.
    let landed_late = fenced_write(&db, account, 100, a_token).await?;
    println!("A's late write with token {a_token} landed: {landed_late}");
    let _ = b.release().await?;
    let _ = a.release().await; // NotHeld: its lease ended long ago

    let row = db
        .query_one(
            "SELECT balance, fence FROM fenced_accounts WHERE id = $1",
            &[&account],
        )
        .await?;
    let (balance, fence): (i64, i64) = (row.get(0), row.get(1));
    println!("account {account}: balance {balance}, fence {fence}");
    if !landed || landed_late {
        return Err("the fence did not hold".into());
    }
    Ok(())
}
