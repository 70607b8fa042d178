//! S12: tower-lock on MySQL / MariaDB named locks, against the floor of one `SELECT 1` round
//! trip and against `GET_LOCK` + `RELEASE_LOCK` sent directly on one connection.

use sqlx::mysql::MySqlPool;
use sqlx::Connection;
use tower_lock::backend::MySqlBackend;

use super::other_backends::two_processes;
use super::s2::fresh_name;
use super::*;

pub(super) async fn s12(scale: Scale, report: &mut Report) {
    eprintln!("S12 MySQL…");
    let server = match std::env::var("MYSQL_URL") {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let server = tokio::task::spawn_blocking(support::mariadb::MariaDb::start)
                .await
                .unwrap();
            (server.url(), Some(server))
        }
    };
    let url = server.0.as_str();
    let floor = uncontended(url, scale, report).await;
    two_processes(url, "mysql", "S12 MySQL", floor, scale, report).await;
    drop(server);
}

/// The floor (`SELECT 1` on one connection), an uncontended acquire + release, and the two
/// statements sent directly, taking turns; the floor's p50.
async fn uncontended(url: &str, scale: Scale, report: &mut Report) -> Duration {
    let mut conn = sqlx::mysql::MySqlConnection::connect(url).await.unwrap();
    let pool = MySqlPool::connect(url).await.unwrap();
    let locks = LockManager::builder().backend(MySqlBackend::new(&pool));
    let name = fresh_name("mysql-uncontended").to_lowercase();
    for _ in 0..50 {
        let guard = locks.lock(&name).acquire().await.unwrap();
        let _ = guard.release().await.unwrap();
        direct(&mut conn, &name).await;
    }
    let (mut floors, mut pairs, mut directs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..scale.s1_iterations {
        let t = Instant::now();
        sqlx::query("SELECT 1").execute(&mut conn).await.unwrap();
        floors.push(t.elapsed());
        let t = Instant::now();
        let guard = locks.lock(&name).acquire().await.unwrap();
        let _ = guard.release().await.unwrap();
        pairs.push(t.elapsed());
        let t = Instant::now();
        direct(&mut conn, &name).await;
        directs.push(t.elapsed());
    }
    let floor = percentile(&mut floors, 50.0);
    let pair = percentile(&mut pairs, 50.0);
    let direct = percentile(&mut directs, 50.0);
    report.add(
        "S12 MySQL",
        "SELECT 1 p50 (floor)",
        us(floor),
        floor.as_secs_f64(),
    );
    report.add(
        "S12 MySQL uncontended",
        "acquire + release p50 ÷ floor",
        format!("{} = {:.2} ×", us(pair), ratio(pair, floor)),
        ratio(pair, floor),
    );
    report.add(
        "S12 MySQL uncontended",
        "GET_LOCK + RELEASE_LOCK sent directly on one connection p50 ÷ floor",
        format!("{} = {:.2} ×", us(direct), ratio(direct, floor)),
        ratio(direct, floor),
    );
    floor
}

/// `GET_LOCK` + `RELEASE_LOCK` of `name` sent directly on `conn`.
async fn direct(conn: &mut sqlx::mysql::MySqlConnection, name: &str) {
    let _: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, 0)")
        .bind(name)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    let _: Option<i64> = sqlx::query_scalar("SELECT RELEASE_LOCK(?)")
        .bind(name)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
}
