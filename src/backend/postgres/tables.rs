//! The backend's two tables, in a schema of their own: the fencing tokens (one counter per
//! lock key) and the records of locks taken unless recorded (the idempotency layer's stored
//! responses, and the work a held lock is held for). They are made on first use (`CREATE
//! ... IF NOT EXISTS`), or beforehand with [`schema_sql`].

use sqlx::postgres::PgPool;
use tokio::sync::OnceCell;

use super::advisory_key::AdvisoryKey;
use super::sql::{identifier, key_params};
use crate::error::BackendError;

/// The default schema.
pub const DEFAULT_SCHEMA: &str = "tower_lock";

/// The statements that make the backend's schema and tables (what it runs on first use of
/// fenced locks or records; run them beforehand where the application's role may not
/// create them).
///
/// # Examples
///
/// ```
/// let statements = tower_lock::backend::postgres_schema_sql("tower_lock");
/// assert!(statements.contains("CREATE TABLE IF NOT EXISTS \"tower_lock\".records"));
/// ```
pub fn schema_sql(schema: &str) -> String {
    let s = identifier(schema);
    format!(
        "CREATE SCHEMA IF NOT EXISTS {s};\n\
         CREATE TABLE IF NOT EXISTS {s}.fencing_tokens (\n    \
             lock_key text PRIMARY KEY,\n    \
             token bigint NOT NULL\n\
         );\n\
         CREATE TABLE IF NOT EXISTS {s}.records (\n    \
             lock_key text PRIMARY KEY,\n    \
             work bytea,\n    \
             holder_pid integer,\n    \
             holder_token bigint,\n    \
             value bytea,\n    \
             expires_at timestamptz\n\
         );\n\
         CREATE INDEX IF NOT EXISTS records_expires_at ON {s}.records (expires_at);\n"
    )
}

/// The statements on the tables, made once for a schema.
pub(super) struct Tables {
    schema: String,
    made: OnceCell<()>,
    /// Per key form (a 64-bit key, a pair): take the lock now and, if taken, the next
    /// token, in one statement; no row when busy.
    fenced_try: [String; 2],
    /// The same, waiting in the server's queue under a lock timeout.
    fenced_lock: [String; 2],
    pub(super) token_of: String,
    pub(super) mark_work: String,
    pub(crate) record_of: String,
    /// The work `lock_key` is held for, if its holder still holds it (by the key's
    /// `pg_locks` columns).
    pub(super) work_of_holder: String,
    pub(super) store_record: String,
    pub(super) clear_work: String,
    pub(super) sweep: String,
    /// Records stored so far (every so many, the expired ones are swept).
    pub(super) records_stored: std::sync::atomic::AtomicU64,
    /// In a handler's transaction: its response as the key's record, unless a record is in
    /// force (another run of the key committed first: this one must roll back).
    #[cfg(feature = "idempotency")]
    pub(crate) record_in_transaction: String,
}

impl Tables {
    pub(super) fn new(schema: &str) -> Tables {
        let s = identifier(schema);
        let tokens = format!("{s}.fencing_tokens");
        let records = format!("{s}.records");
        let fenced = |try_lock: bool, form: AdvisoryKey| {
            if try_lock {
                let (key, next) = key_params(form, 1);
                format!(
                    "WITH got AS (SELECT pg_try_advisory_lock({key}) AS ok) \
                     INSERT INTO {tokens} AS t (lock_key, token) SELECT ${next}, 1 FROM got WHERE ok \
                     ON CONFLICT (lock_key) DO UPDATE SET token = t.token + 1 RETURNING token"
                )
            } else {
                let (key, next) = key_params(form, 2);
                format!(
                    "WITH got AS (SELECT pg_advisory_lock({key}) \
                         WHERE set_config('lock_timeout', $1, false) IS NOT NULL) \
                     INSERT INTO {tokens} AS t (lock_key, token) SELECT ${next}, 1 FROM got \
                     ON CONFLICT (lock_key) DO UPDATE SET token = t.token + 1 RETURNING token"
                )
            }
        };
        let forms = [AdvisoryKey::Single(0), AdvisoryKey::Pair(0, 0)];
        Tables {
            schema: schema.to_owned(),
            made: OnceCell::new(),
            fenced_try: forms.map(|form| fenced(true, form)),
            fenced_lock: forms.map(|form| fenced(false, form)),
            token_of: format!("SELECT token FROM {tokens} WHERE lock_key = $1"),
            // Taken unless recorded: the record if one is in force; if none, the lock is
            // marked as held by this session for this work (a row whose record ran out is
            // reused), unless a record was stored meanwhile by a holder whose commit came
            // late (then no row is marked, and the caller reads the record).
            mark_work: format!(
                "WITH found AS (SELECT value FROM {records} \
                     WHERE lock_key = $1 AND value IS NOT NULL AND expires_at > now()), \
                 marked AS (INSERT INTO {records} AS r \
                     (lock_key, work, holder_pid, holder_token, value, expires_at) \
                     SELECT $1, $2, pg_backend_pid(), $3, NULL, NULL \
                     WHERE NOT EXISTS (SELECT 1 FROM found) \
                     ON CONFLICT (lock_key) DO UPDATE SET work = EXCLUDED.work, \
                         holder_pid = EXCLUDED.holder_pid, holder_token = EXCLUDED.holder_token, \
                         value = NULL, expires_at = NULL \
                     WHERE r.value IS NULL OR r.expires_at <= now() \
                     RETURNING 1) \
                 SELECT (SELECT value FROM found), (SELECT count(*) FROM marked)"
            ),
            record_of: format!(
                "SELECT value FROM {records} \
                 WHERE lock_key = $1 AND value IS NOT NULL AND expires_at > now()"
            ),
            work_of_holder: format!(
                "SELECT r.work FROM {records} r WHERE r.lock_key = $1 AND r.value IS NULL \
                 AND EXISTS (SELECT 1 FROM pg_catalog.pg_locks l WHERE l.locktype = 'advisory' \
                     AND l.granted AND l.pid = r.holder_pid AND l.classid = $2::int8::oid \
                     AND l.objid = $3::int8::oid AND l.objsubid = $4)"
            ),
            // Stored by the holder while it holds the lock (its session is alive), before
            // it unlocks: a later holder sees it.
            store_record: format!(
                "INSERT INTO {records} AS r (lock_key, work, holder_pid, holder_token, value, expires_at) \
                 VALUES ($1, NULL, NULL, NULL, $2, now() + $3 * interval '1 millisecond') \
                 ON CONFLICT (lock_key) DO UPDATE SET work = NULL, holder_pid = NULL, \
                     holder_token = NULL, value = EXCLUDED.value, expires_at = EXCLUDED.expires_at"
            ),
            clear_work: format!(
                "DELETE FROM {records} WHERE lock_key = $1 AND holder_token = $2 AND value IS NULL"
            ),
            #[cfg(feature = "idempotency")]
            record_in_transaction: format!(
                "INSERT INTO {records} AS r (lock_key, work, holder_pid, holder_token, value, expires_at) \
                 VALUES ($1, NULL, NULL, NULL, $2, now() + $3 * interval '1 millisecond') \
                 ON CONFLICT (lock_key) DO UPDATE SET work = NULL, holder_pid = NULL, \
                     holder_token = NULL, value = EXCLUDED.value, expires_at = EXCLUDED.expires_at \
                 WHERE r.value IS NULL OR r.expires_at <= now()"
            ),
            records_stored: std::sync::atomic::AtomicU64::new(0),
            sweep: format!(
                "DELETE FROM {records} WHERE lock_key IN \
                 (SELECT lock_key FROM {records} WHERE expires_at < now() LIMIT 100)"
            ),
        }
    }

    /// The schema's name.
    pub(super) fn schema(&self) -> &str {
        &self.schema
    }

    /// Makes the schema and tables once (if absent).
    pub(super) async fn ensure(&self, pool: &PgPool) -> Result<(), BackendError> {
        self.made
            .get_or_try_init(|| async {
                let statements = schema_sql(&self.schema);
                // Two processes creating at once may collide on the catalog; the second
                // attempt finds everything made.
                let mut last = None;
                for _ in 0..3 {
                    match sqlx::raw_sql(&statements).execute(pool).await {
                        Ok(_) => return Ok(()),
                        Err(error) => last = Some(error),
                    }
                }
                Err(BackendError::with_source(
                    format!(
                        "could not create tower-lock's tables in the PostgreSQL schema `{}` \
                         (run `tower_lock::backend::postgres_schema_sql` as a role that may)",
                        self.schema
                    ),
                    last.expect("three attempts failed"),
                ))
            })
            .await
            .map(|_| ())
    }

    /// The fenced acquisition's statement for `key`'s form (waiting or not).
    pub(super) fn fenced(&self, key: AdvisoryKey, waits: bool) -> &str {
        let form = usize::from(matches!(key, AdvisoryKey::Pair(..)));
        if waits {
            &self.fenced_lock[form]
        } else {
            &self.fenced_try[form]
        }
    }
}
