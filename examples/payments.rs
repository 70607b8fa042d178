//! A payment service on PostgreSQL: each payment runs once per idempotency key, and its
//! database writes are committed together with the response stored for the key — a crash
//! or a failed commit leaves nothing half-done, and a retry runs the payment again.
//!
//! ```text
//! DATABASE_URL=postgres://app@localhost/app cargo run --features postgres --example payments
//! ```
//! Listens on 127.0.0.1:3002 (`PORT` overrides; `0` picks a free port) and makes its tables
//! if absent. `POST /accounts/{id}/pay` with an `Idempotency-Key` header and a JSON body
//! `{"amount": 10}` takes the amount from the account's balance and records the payment,
//! in the request's transaction. `PAUSE_AFTER_WRITE_MS` makes each payment wait that long
//! after its writes and before its commit (to see what a crash there does).

use std::time::Duration;

use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use sqlx::postgres::PgPool;
use tower_lock::backend::PostgresBackend;
use tower_lock::idempotency::{
    IdempotencyKey, IdempotencyLayer, IdempotentTransaction, Transactions,
};
use tower_lock::LockManager;

/// Pays `amount` from account `id`, in the request's transaction: the payment's row and
/// the balance change are committed with the stored response, or not at all.
async fn pay(
    Path(account): Path<i64>,
    axum::Extension(key): axum::Extension<IdempotencyKey>,
    tx: IdempotentTransaction,
    Json(body): Json<Value>,
) -> Result<(StatusCode, Json<Value>), (StatusCode, String)> {
    let amount = body["amount"]
        .as_i64()
        .filter(|amount| *amount > 0)
        .ok_or((
            StatusCode::UNPROCESSABLE_ENTITY,
            "`amount` must be a positive integer".into(),
        ))?;
    let failed = |error: sqlx::Error| (StatusCode::SERVICE_UNAVAILABLE, error.to_string());
    let mut conn = tx.conn().await.map_err(failed)?;
    let balance: Option<i64> = sqlx::query_scalar(
        "UPDATE accounts SET balance = balance - $2 WHERE id = $1 AND balance >= $2 RETURNING balance",
    )
    .bind(account)
    .bind(amount)
    .fetch_optional(&mut *conn)
    .await
    .map_err(failed)?;
    let Some(balance) = balance else {
        return Ok((
            StatusCode::PAYMENT_REQUIRED,
            Json(json!({ "error": "no such account, or not enough on it" })),
        ));
    };
    let payment: i64 = sqlx::query_scalar(
        "INSERT INTO payments (account, amount, idempotency_key) VALUES ($1, $2, $3) RETURNING id",
    )
    .bind(account)
    .bind(amount)
    .bind(&key.0)
    .fetch_one(&mut *conn)
    .await
    .map_err(failed)?;
    drop(conn);
    println!("wrote payment {payment}");
    if let Some(pause) = pause_after_write() {
        tokio::time::sleep(pause).await;
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({ "payment": payment, "account": account, "balance": balance })),
    ))
}

fn pause_after_write() -> Option<Duration> {
    std::env::var("PAUSE_AFTER_WRITE_MS")
        .ok()?
        .parse()
        .ok()
        .map(Duration::from_millis)
}

/// The account's balance and payments.
async fn account(
    Path(account): Path<i64>,
    axum::Extension(pool): axum::Extension<PgPool>,
) -> Result<Json<Value>, (StatusCode, String)> {
    let failed = |error: sqlx::Error| (StatusCode::SERVICE_UNAVAILABLE, error.to_string());
    let balance: Option<i64> = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = $1")
        .bind(account)
        .fetch_optional(&pool)
        .await
        .map_err(failed)?;
    let payments: i64 = sqlx::query_scalar("SELECT count(*) FROM payments WHERE account = $1")
        .bind(account)
        .fetch_one(&pool)
        .await
        .map_err(failed)?;
    Ok(Json(json!({ "balance": balance, "payments": payments })))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")
        .map_err(|_| "set DATABASE_URL to a PostgreSQL database (postgres://user@host/db)")?;
    let pool = PgPool::connect(&url).await?;
    sqlx::raw_sql(
        "CREATE TABLE IF NOT EXISTS accounts (id bigint PRIMARY KEY, balance bigint NOT NULL);
         CREATE TABLE IF NOT EXISTS payments (id bigserial PRIMARY KEY, account bigint NOT NULL,
             amount bigint NOT NULL, idempotency_key text NOT NULL);
         INSERT INTO accounts VALUES (7, 1000) ON CONFLICT DO NOTHING;",
    )
    .execute(&pool)
    .await?;
    let backend = PostgresBackend::new(&pool);
    let locks = LockManager::builder().backend(backend.clone());
    let app = Router::new()
        .route("/accounts/{id}/pay", post(pay))
        .route_layer(
            IdempotencyLayer::new()
                .namespace("payments")
                .manager(locks)
                .transactions(Transactions::new(&backend)),
        )
        .route("/accounts/{id}", get(account))
        .layer(axum::Extension(pool));
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port
            .parse()
            .map_err(|_| format!("PORT must be a port number, not `{port}`"))?,
        Err(_) => 3002,
    };
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let base = format!("http://{}", listener.local_addr()?);
    println!("payments on {base}");
    println!("try:");
    println!("  curl -i -X POST {base}/accounts/7/pay -H 'Idempotency-Key: \"pay-1\"' -H 'content-type: application/json' -d '{{\"amount\":10}}'");
    println!("  curl -i {base}/accounts/7");
    axum::serve(listener, app).await?;
    Ok(())
}
