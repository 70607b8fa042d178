//! `examples/fenced_write.rs` against a real, throwaway PostgreSQL and a real Redis: a
//! paused holder's late write is refused by the store while the new holder's write lands.
//! The test support starts PostgreSQL (`support::postgres`); `./scripts/test.sh` installs
//! Debian's `postgresql` package when it is absent.

#[path = "support/mod.rs"]
mod support;

use std::process::Command;

use support::postgres::Postgres;
use tokio_postgres::NoTls;

/// The token on the line of the example's output that starts with `who` (`B holds
/// account:7 with token 12; …`).
fn token_of(output: &str, who: &str) -> i64 {
    let line = output
        .lines()
        .find(|line| line.starts_with(who))
        .unwrap_or_else(|| panic!("a line starting `{who}` in:\n{output}"));
    let after = &line[line.find("token ").expect("a token") + "token ".len()..];
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("a token number")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_late_write_of_a_paused_holder_is_refused() {
    let postgres = Postgres::start();
    let redis = support::shared_redis_url();
    let account = std::process::id().to_string();
    let mut last_fence = 0;
    // Twice on one row: the second run's tokens are above the first's, so the row's fence
    // (the first run's B) lets the second run's B write and still refuses its A.
    for run in 0..2 {
        let output = Command::new(support::example("fenced_write"))
            .env("DATABASE_URL", postgres.url())
            .env("REDIS_URL", &redis)
            .env("ACCOUNT_ID", &account)
            .output()
            .expect("run the example");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "run {run}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("its write landed: true"), "{stdout}");
        assert!(stdout.contains("late write with token"), "{stdout}");
        assert!(stdout.contains("landed: false"), "{stdout}");
        let (a_token, b_token) = (token_of(&stdout, "A holds"), token_of(&stdout, "B holds"));
        assert_eq!(token_of(&stdout, "A's late write"), a_token);
        assert!(a_token > last_fence, "run {run}: tokens only grow");
        assert!(
            b_token > a_token,
            "run {run}: B's token {b_token} > A's {a_token}"
        );

        // What the store holds: B's balance and B's token, whatever A did after.
        let (db, connection) = tokio_postgres::connect(&postgres.url(), NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let row = db
            .query_one(
                "SELECT balance, fence FROM fenced_accounts WHERE id = $1",
                &[&account.parse::<i64>().unwrap()],
            )
            .await
            .unwrap();
        let (balance, fence): (i64, i64) = (row.get(0), row.get(1));
        assert_eq!((balance, fence), (200, b_token), "run {run}");
        last_fence = fence;
    }
}
