//! The node lock: how the other nodes learn within a tick that a node died.
//!
//! Each node holds a session-level advisory lock named after its id on its coordinator's
//! connection. PostgreSQL releases it the moment that connection ends: a node killed with
//! kill -9 closes its sockets and its backend exits at once; a host that vanishes is dropped
//! after the keepalives below (about 30 s) or its leases running out, whichever comes first.
//! The first heartbeat that finds a node without its lock notes since when
//! (`nodes.down_since`, on the database's clock; cleared as soon as the node has its lock
//! again); once that is a second old and the lock still missing, the node's leases are
//! as good as expired and any node may take them ([`live_cte!`], [`connected!`],
//! [`dead!`]). The grace lets a node whose connection blipped (or a restarted PostgreSQL)
//! take its lock back before anything moves. Leases stay the fence: a node that lost its
//! lock for longer but lives on is refused at settle and delivery like one whose lease
//! expired.

use std::time::Duration;

use tokio_postgres::Client;

use super::lock::KEEPALIVES;
use super::{error_text, pg_err};
use crate::store::error::StoreError;

/// The node locks' first key ("chln"); the second is the hash of the schema and the node id.
pub(super) const NODE_CLASS: i32 = 0x6368_6c6e;

/// A `WITH` item `live`: the second keys of the node locks held in this database now.
macro_rules! live_cte {
    () => {
        "live AS (SELECT l.objid FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted \
         AND l.classid = 1667787886::oid AND l.objsubid = 2 \
         AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
    };
}
pub(super) use live_cte;

/// Whether the node named by SQL expression `$node` holds its node lock (needs
/// [`live_cte!`] in the statement).
macro_rules! connected {
    ($node:literal) => {
        concat!(
            "(hashtext(coalesce(current_schema(), '') || '/' || ",
            $node,
            ")::oid IN (SELECT objid FROM live))"
        )
    };
}
pub(super) use connected;

/// Whether the node named by SQL expression `$node` has been without its node lock for a
/// second, the grace before the others take its leases (needs [`live_cte!`] in the
/// statement).
macro_rules! dead {
    ($node:literal) => {
        concat!(
            "(",
            $node,
            " IN (SELECT d.id FROM nodes d WHERE d.down_since <= now() - interval '1 second' \
             AND NOT ",
            connected!("d.id"),
            "))"
        )
    };
}
pub(super) use dead;

/// Takes node `node`'s lock on `client`. `stale`: the backends of this process's earlier
/// coordinator connections: one that still holds the lock (the server has not noticed it is
/// gone) is ended first. Asks `tries` times, a
/// second apart, while another session holds it (a restarted node's previous session may
/// take a moment to be noticed gone); then [`StoreError::NodeIdInUse`].
pub(super) async fn take(
    client: &Client,
    node: &str,
    stale: &[i32],
    tries: u32,
) -> Result<(), StoreError> {
    for setting in KEEPALIVES {
        if let Err(e) = client.batch_execute(setting).await {
            tracing::debug!(error = %error_text(&e), setting, "cluster: keepalive setting refused");
        }
    }
    if !stale.is_empty() {
        end_stale(client, node, stale).await?;
    }
    for attempt in 1..=tries.max(1) {
        let row = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, hashtext(coalesce(current_schema(), '') || '/' || $2))",
                &[&NODE_CLASS, &node],
            )
            .await
            .map_err(pg_err)?;
        if row.get::<_, bool>(0) {
            // Up again: whatever a blip made the others note is forgotten, and the lock's
            // session is the one on record.
            client
                .execute(
                    "UPDATE nodes SET down_since = NULL, backend_pid = pg_backend_pid() \
                     WHERE id = $1",
                    &[&node],
                )
                .await
                .map_err(pg_err)?;
            return Ok(());
        }
        if attempt < tries {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Err(StoreError::NodeIdInUse {
        node: node.to_owned(),
    })
}

/// Ends the one of backends `stale` that still holds node `node`'s lock, if any (they were
/// this process's own).
async fn end_stale(client: &Client, node: &str, stale: &[i32]) -> Result<(), StoreError> {
    let row = client
        .query_one(
            "SELECT coalesce(bool_or(pg_terminate_backend(l.pid)), false) FROM pg_locks l \
             WHERE l.pid = ANY($1) AND l.locktype = 'advisory' AND l.granted \
             AND l.classid = $2::bigint::oid AND l.objsubid = 2 \
             AND l.objid = hashtext(coalesce(current_schema(), '') || '/' || $3)::oid",
            &[&stale, &i64::from(NODE_CLASS), &node],
        )
        .await
        .map_err(pg_err)?;
    if row.get::<_, bool>(0) {
        tracing::info!("cluster: ended this node's own stale coordinator session");
        // Its lock goes when the ended backend exits.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
