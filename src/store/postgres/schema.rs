//! The schema: migrations embedded in the binary, applied at open in one transaction, with
//! the version recorded in `chela_schema`. A database whose version is newer than this
//! binary's is refused.

use super::conn::Conn;

use super::{pg_err, transaction};
use crate::store::error::StoreError;

/// The migrations, in order: migration `n` (1-based) brings the schema to version `n`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_cluster.sql"),
    include_str!("migrations/0003_intake.sql"),
    include_str!("migrations/0004_cron.sql"),
    include_str!("migrations/0005_versions.sql"),
    include_str!("migrations/0006_layouts.sql"),
    include_str!("migrations/0007_node_locks.sql"),
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
        check_schema_place(c).await?;
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
        refuse_upgrade_under_live_nodes(c, found).await?;
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

/// Refuses to migrate from `found` while nodes hold unexpired leases (a cluster of an older
/// chela still running: the new schema would change under it, and a refused node would leave
/// it migrated). The lease tables exist from schema version 2 (`intake_leases` from 3).
async fn refuse_upgrade_under_live_nodes(c: &Conn, found: i32) -> Result<(), StoreError> {
    if !(2..SCHEMA_VERSION).contains(&found) {
        return Ok(());
    }
    let intake = if found >= 3 {
        " UNION SELECT node FROM intake_leases WHERE node IS NOT NULL AND expires > now()"
    } else {
        ""
    };
    let sql = format!(
        "SELECT DISTINCT node FROM (SELECT node FROM leases WHERE node IS NOT NULL \
         AND expires > now(){intake}) AS held ORDER BY node"
    );
    let rows = c.query(&sql, &[]).await.map_err(pg_err)?;
    if rows.is_empty() {
        return Ok(());
    }
    let nodes: Vec<String> = rows.iter().map(|r| r.get::<_, String>(0)).collect();
    Err(StoreError::UpgradeUnderLiveNodes {
        nodes: nodes.join(", "),
        found,
        supported: SCHEMA_VERSION,
    })
}

/// Refuses to go on when chela's tables sit in a schema on the search path other than the
/// one new tables go to: `CREATE TABLE IF NOT EXISTS` would then start an empty store there
/// (and restart its id sequences) while the real one stays hidden behind it.
async fn check_schema_place(c: &Conn) -> Result<(), StoreError> {
    let row = c
        .query_one(
            "SELECT current_schema(), (SELECT array_agg(n.nspname::text ORDER BY n.nspname) \
             FROM pg_catalog.pg_class t JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace \
             WHERE t.relname = 'chela_schema' AND n.nspname = ANY(current_schemas(false)))",
            &[],
        )
        .await
        .map_err(pg_err)?;
    let current: Option<String> = row.get(0);
    let found: Option<Vec<String>> = row.get(1);
    let found = found.unwrap_or_default();
    match current {
        Some(current) if found.is_empty() || found.contains(&current) => Ok(()),
        Some(current) => Err(StoreError::SchemaElsewhere {
            found: found.join(", "),
            current,
        }),
        None => Err(StoreError::Db(
            "no schema of the connection's search_path exists: create one or set \
             options=-csearch_path%3D<schema> in the store URL"
                .into(),
        )),
    }
}
