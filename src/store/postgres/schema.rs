//! The schema: migrations embedded in the binary, applied at open in one transaction, with
//! the version recorded in `chela_schema`. A database whose version is newer than this
//! binary's is refused.

use super::conn::Conn;

use super::{pg_err, transaction};
use crate::store::StoreError;

/// The migrations, in order: migration `n` (1-based) brings the schema to version `n`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_cluster.sql"),
];

/// The schema version this binary writes and reads.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// An arbitrary advisory-lock key that serialises migrations of several processes.
const MIGRATION_LOCK: i64 = 0x6368_656c_615f_7367;

/// Brings the database to [`SCHEMA_VERSION`]; refuses a newer one.
pub(super) async fn migrate(client: &Conn) -> Result<(), StoreError> {
    transaction(client, async |c: &Conn| {
        c.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(pg_err)?;
        c.batch_execute("CREATE TABLE IF NOT EXISTS chela_schema (version integer NOT NULL)")
            .await
            .map_err(pg_err)?;
        let row = c
            .query_one("SELECT max(version) FROM chela_schema", &[])
            .await
            .map_err(pg_err)?;
        let found: i32 = row.get::<_, Option<i32>>(0).unwrap_or(0);
        if found > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found,
                supported: SCHEMA_VERSION,
            });
        }
        for (n, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
            c.batch_execute(sql).await.map_err(pg_err)?;
            tracing::info!(version = n + 1, "store: PostgreSQL schema migrated");
        }
        if found < SCHEMA_VERSION {
            c.execute("DELETE FROM chela_schema", &[])
                .await
                .map_err(pg_err)?;
            c.execute(
                "INSERT INTO chela_schema (version) VALUES ($1)",
                &[&SCHEMA_VERSION],
            )
            .await
            .map_err(pg_err)?;
        }
        Ok(())
    })
    .await
}
