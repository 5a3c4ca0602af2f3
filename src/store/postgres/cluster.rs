//! The cluster side of the PostgreSQL store: [`PgCoordinator`] (nodes, partition leases,
//! wake-ups over `LISTEN chela_pending`) and the fence the store's own writes check
//! ([`check_lease`]).
//!
//! The coordinator has a connection of its own, driven on the caller's runtime, because
//! `LISTEN` needs a connection whose notifications are read as they come; the store's
//! worker connections never see them. A lost connection is made again at the next call (and
//! listens again); meanwhile the calls fail and the node's leases run out, which is what
//! must happen to a node that cannot reach the database.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::conn::Conn;
use super::node_lock::{self, connected, dead, live_cte};
use super::{error_text, parse_config, pg_err, unbig};
use crate::store::error::StoreError;
use crate::store::ports::{
    Coordinator, Lease, NodeInfo, NodeVersion, PARTITIONS, StoreFuture, partition_of,
};

/// The channel `enqueue_unique` notifies with the partition of the turn it queued.
pub(super) const WAKE_CHANNEL: &str = "chela_pending";
/// The channel of [`Coordinator::publish_events`], followed by `.` and the store's schema
/// (channels are per database: the schema keeps two clusters in one database apart).
const EVENTS_CHANNEL: &str = "chela_events";

/// Fails with [`StoreError::NotOwner`] unless `node` holds the unexpired lease of
/// `session`'s partition. Inside a transaction the lease row stays share-locked until it
/// ends, so a takeover waits for the write that checked it.
pub(super) async fn check_lease(c: &Conn, node: &str, session: &str) -> Result<(), StoreError> {
    let partition = partition_of(session);
    let row = c
        .query_opt(
            "SELECT 1 FROM leases WHERE partition = $1 AND node = $2 AND expires > now() FOR SHARE",
            &[&(partition as i32), &node],
        )
        .await
        .map_err(pg_err)?;
    match row {
        Some(_) => Ok(()),
        None => Err(StoreError::NotOwner {
            session: session.to_owned(),
            partition,
        }),
    }
}

/// Wakes the owner of `session`'s partition (delivered when the surrounding transaction,
/// if any, commits).
pub(super) async fn wake(c: &Conn, session: &str) -> Result<(), StoreError> {
    let payload = partition_of(session).to_string();
    c.execute("SELECT pg_notify($1, $2)", &[&WAKE_CHANNEL, &payload])
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// One node's coordinator over PostgreSQL.
pub struct PgCoordinator {
    node: String,
    /// What this node runs (written again by a heartbeat that finds its row gone).
    version: NodeVersion,
    config: tokio_postgres::Config,
    client: tokio::sync::Mutex<Option<Client>>,
    /// A connection of its own for [`Coordinator::publish_events`]: a busy node relays an
    /// event per streamed piece of text, and renewals queued behind them on one connection
    /// came late enough under load for the leases to lapse.
    publisher: tokio::sync::Mutex<Option<Client>>,
    wake_tx: mpsc::UnboundedSender<u32>,
    wake_rx: Mutex<Option<mpsc::UnboundedReceiver<u32>>>,
    events_tx: mpsc::UnboundedSender<String>,
    events_rx: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// [`EVENTS_CHANNEL`] of this store's schema (known once connected).
    events_channel: Mutex<String>,
    /// The backend pids of this process's coordinator sessions, newest last (at most 8): one
    /// of them may still hold the node lock after its connection was lost.
    lock_pids: Mutex<Vec<i32>>,
    /// Bumped each time the coordinator's connection (and with it the node lock) ends.
    lock_epoch: Arc<AtomicU64>,
    /// Woken when it ends.
    lock_lost: Arc<tokio::sync::Notify>,
    /// Another process took this node's id while its connection was down.
    usurped: AtomicBool,
    /// At the last heartbeat, a node without its lock still held leases.
    dying: AtomicBool,
}

impl PgCoordinator {
    /// Connects as node `joining.node`, listens for wake-ups and records the node as started
    /// now with its version, unless a live node speaks another cluster protocol
    /// ([`StoreError::ProtocolMismatch`]). `setting` names where the URL came from, for the
    /// error.
    pub async fn connect(
        url: &str,
        setting: &str,
        joining: Joining<'_>,
    ) -> Result<Self, StoreError> {
        let config = parse_config(url, setting)?;
        let (wake_tx, wake_rx) = mpsc::unbounded_channel();
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let coordinator = PgCoordinator {
            node: joining.node.to_owned(),
            version: joining.version.clone(),
            config,
            client: tokio::sync::Mutex::new(None),
            publisher: tokio::sync::Mutex::new(None),
            wake_tx,
            wake_rx: Mutex::new(Some(wake_rx)),
            events_tx,
            events_rx: Mutex::new(Some(events_rx)),
            events_channel: Mutex::new(EVENTS_CHANNEL.to_owned()),
            lock_pids: Mutex::new(Vec::new()),
            lock_epoch: Arc::new(AtomicU64::new(0)),
            lock_lost: Arc::new(tokio::sync::Notify::new()),
            usurped: AtomicBool::new(false),
            dying: AtomicBool::new(false),
        };
        {
            let mut slot = coordinator.client.lock().await;
            let client = coordinator.connected(&mut slot).await?;
            client.batch_execute("BEGIN").await.map_err(pg_err)?;
            let joined = join(client, &joining).await;
            let end = if joined.is_ok() { "COMMIT" } else { "ROLLBACK" };
            client.batch_execute(end).await.map_err(pg_err)?;
            joined?;
        }
        Ok(coordinator)
    }

    /// The connection, made (and listening) first if there is none or it was lost.
    async fn connected<'a>(&self, slot: &'a mut Option<Client>) -> Result<&'a Client, StoreError> {
        if slot.as_ref().is_none_or(|c| c.is_closed()) {
            *slot = None;
            let (client, mut connection) = self
                .config
                .connect(NoTls)
                .await
                .map_err(|e| StoreError::Db(error_text(&e)))?;
            let wake = self.wake_tx.clone();
            let events = self.events_tx.clone();
            let lost = LockLost(self.lock_epoch.clone(), self.lock_lost.clone());
            tokio::spawn(async move {
                // However the connection ends, the node lock went with it.
                let _lost = lost;
                let mut messages = futures_util::stream::poll_fn(|cx| connection.poll_message(cx));
                while let Some(message) = messages.next().await {
                    match message {
                        // Only this schema's events channel is listened to.
                        Ok(AsyncMessage::Notification(n))
                            if n.channel().starts_with(EVENTS_CHANNEL) =>
                        {
                            let _ = events.send(n.payload().to_owned());
                        }
                        Ok(AsyncMessage::Notification(n)) => {
                            if let Ok(partition) = n.payload().parse::<u32>() {
                                let _ = wake.send(partition);
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(error = %error_text(&e), "cluster: the coordinator's PostgreSQL connection ended");
                            return;
                        }
                    }
                }
            });
            // (The connection is driven by the task above from here on.)
            self.lock_node(&client).await?;
            let channel = self.events_channel_of(&client).await?;
            client
                .batch_execute(&format!(
                    "LISTEN {WAKE_CHANNEL}; LISTEN \"{}\"",
                    channel.replace('"', "\"\"")
                ))
                .await
                .map_err(pg_err)?;
            *slot = Some(client);
        }
        slot.as_ref()
            .ok_or_else(|| StoreError::Db("no coordinator connection".into()))
    }

    /// Takes this node's lock on the coordinator's new connection `client`, ending this
    /// node's own previous lock session if the server still keeps it. At the first
    /// connection it waits up to 10 s for a previous run of this node to be noticed gone.
    async fn lock_node(&self, client: &Client) -> Result<(), StoreError> {
        let row = client
            .query_one("SELECT pg_backend_pid()", &[])
            .await
            .map_err(pg_err)?;
        // Noted before the lock is asked for: a connection lost right after the lock was
        // granted leaves a session this process ends at its next try.
        let stale = match self.lock_pids.lock() {
            Ok(mut pids) => {
                let stale = pids.clone();
                pids.push(row.get(0));
                let over = pids.len().saturating_sub(8);
                pids.drain(..over);
                stale
            }
            Err(_) => Vec::new(),
        };
        let tries = if stale.is_empty() { 10 } else { 3 };
        node_lock::take(client, &self.node, &stale, tries)
            .await
            .inspect_err(|e| {
                if !stale.is_empty() && matches!(e, StoreError::NodeIdInUse { .. }) {
                    self.usurped.store(true, Ordering::SeqCst);
                }
            })
    }

    /// The publishing connection, made first if there is none or it was lost (it listens to
    /// nothing).
    async fn publishing<'a>(&self, slot: &'a mut Option<Client>) -> Result<&'a Client, StoreError> {
        if slot.as_ref().is_none_or(|c| c.is_closed()) {
            let (client, connection) = self
                .config
                .connect(NoTls)
                .await
                .map_err(|e| StoreError::Db(error_text(&e)))?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %error_text(&e), "cluster: the event publishing connection ended");
                }
            });
            *slot = Some(client);
        }
        slot.as_ref()
            .ok_or_else(|| StoreError::Db("no publishing connection".into()))
    }

    /// [`EVENTS_CHANNEL`] of `client`'s schema (at most 63 bytes, PostgreSQL's limit), noted
    /// for [`Coordinator::publish_events`].
    async fn events_channel_of(&self, client: &Client) -> Result<String, StoreError> {
        let row = client
            .query_one("SELECT coalesce(current_schema(), '')", &[])
            .await
            .map_err(pg_err)?;
        let channel = channel_name(&row.get::<_, String>(0));
        if let Ok(mut slot) = self.events_channel.lock() {
            slot.clone_from(&channel);
        }
        Ok(channel)
    }

    /// Runs `sql` with `params` and returns its rows.
    async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>, StoreError> {
        let mut slot = self.client.lock().await;
        let client = self.connected(&mut slot).await?;
        let rows = client.query(sql, params).await;
        if rows.is_err() && client.is_closed() {
            *slot = None;
        }
        rows.map_err(pg_err)
    }
}

/// Bumps the node's lock epoch and wakes who waits for it when dropped (the coordinator's
/// connection task ended).
struct LockLost(Arc<AtomicU64>, Arc<tokio::sync::Notify>);

impl Drop for LockLost {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
        self.1.notify_waiters();
    }
}

/// Who joins the cluster: the node's id and what it runs, refused while a node seen within
/// `alive_s` seconds speaks another protocol.
#[derive(Debug, Clone)]
pub struct Joining<'a> {
    /// The node's id.
    pub node: &'a str,
    /// What it runs.
    pub version: NodeVersion,
    /// How recent another node's heartbeat must be for it to count as live.
    pub alive_s: u64,
}

/// Inside a transaction: refuses `joining` when a live other node speaks another protocol,
/// else records it (the nodes table locked meanwhile, so two nodes of different protocols
/// starting together cannot both get in).
async fn join(client: &Client, joining: &Joining<'_>) -> Result<(), StoreError> {
    client
        .batch_execute("LOCK TABLE nodes IN SHARE ROW EXCLUSIVE MODE")
        .await
        .map_err(pg_err)?;
    let protocol = i32::try_from(joining.version.protocol).unwrap_or(i32::MAX);
    let other = client
        .query_opt(
            concat!(
                "WITH ",
                live_cte!(),
                " SELECT id, version, protocol FROM nodes WHERE id <> $1 AND protocol <> $2 \
                 AND last_seen > now() - make_interval(secs => $3) AND ",
                connected!("id"),
                " ORDER BY last_seen DESC LIMIT 1"
            ),
            &[&joining.node, &protocol, &secs(joining.alive_s)],
        )
        .await
        .map_err(pg_err)?;
    if let Some(row) = other {
        return Err(StoreError::ProtocolMismatch {
            node: row.get(0),
            theirs: NodeVersion {
                version: row.get(1),
                protocol: u32::try_from(row.get::<_, i32>(2)).unwrap_or(0),
            },
            ours: joining.version.clone(),
        });
    }
    client
        .execute(
            "INSERT INTO nodes (id, started, last_seen, version, protocol) \
             VALUES ($1, now(), now(), $2, $3) ON CONFLICT (id) DO UPDATE SET started = now(), \
             last_seen = now(), version = excluded.version, protocol = excluded.protocol",
            &[&joining.node, &joining.version.version, &protocol],
        )
        .await
        .map_err(pg_err)?;
    Ok(())
}

/// The notification channel of schema `schema`: [`EVENTS_CHANNEL`]`.<schema>`, or, past
/// PostgreSQL's 63 bytes, [`EVENTS_CHANNEL`]`.` and a hash of the schema's name (so two long
/// names that begin alike do not share a channel).
fn channel_name(schema: &str) -> String {
    use sha2::Digest;
    let channel = format!("{EVENTS_CHANNEL}.{schema}");
    if channel.len() <= 63 {
        return channel;
    }
    let digest = sha2::Sha256::digest(schema.as_bytes());
    let hash: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{EVENTS_CHANNEL}.{hash}")
}

/// The leases in `rows` (partition, generation).
fn leases(rows: Vec<tokio_postgres::Row>) -> Vec<Lease> {
    let mut out: Vec<Lease> = rows
        .iter()
        .map(|r| Lease {
            partition: u32::try_from(r.get::<_, i32>(0)).unwrap_or(0),
            generation: unbig(r.get(1)),
        })
        .collect();
    out.sort_by_key(|l| l.partition);
    out
}

/// Every node with its heartbeat, whether it holds its node lock, and, while it does, its
/// unexpired leases (partitions, intakes), intake layouts and the sessions running there,
/// by id. A node without its lock holds nothing any more: the others take its leases.
pub(super) const NODES_SQL: &str = concat!(
    "WITH ",
    live_cte!(),
    ", n AS (SELECT *, ",
    connected!("id"),
    " AS up FROM nodes) \
     SELECT n.id, (extract(epoch FROM n.started) * 1000)::bigint, \
     (extract(epoch FROM n.last_seen) * 1000)::bigint, \
     coalesce((SELECT array_agg(l.partition ORDER BY l.partition) FROM leases l \
     WHERE n.up AND l.node = n.id AND l.expires > now()), '{}'), \
     coalesce((SELECT array_agg(i.name::text ORDER BY i.name) FROM intake_leases i \
     WHERE n.up AND i.node = n.id AND i.expires > now()), '{}'), n.version, n.protocol, \
     coalesce((SELECT array_agg(a.layout::text ORDER BY a.layout) FROM intake_layouts a \
     WHERE n.up AND a.node = n.id AND a.expires > now()), '{}'), n.up, \
     CASE WHEN n.up THEN n.runs ELSE '{}' END \
     FROM n ORDER BY n.id"
);

/// A row of [`NODES_SQL`].
pub(super) fn node_info(r: &tokio_postgres::Row) -> NodeInfo {
    NodeInfo {
        id: r.get(0),
        started_ms: unbig(r.get(1)),
        last_seen_ms: unbig(r.get(2)),
        partitions: r
            .get::<_, Vec<i32>>(3)
            .into_iter()
            .map(|p| u32::try_from(p).unwrap_or(0))
            .collect(),
        intakes: r.get(4),
        layouts: r.get(7),
        connected: r.get(8),
        runs: r.get(9),
        version: NodeVersion {
            version: r.get(5),
            protocol: u32::try_from(r.get::<_, i32>(6)).unwrap_or(0),
        },
    }
}

/// A node not seen for this long (seconds) is forgotten: `chela status` no longer lists it.
const FORGET_NODE_S: u64 = 60 * 60;

/// Seconds as PostgreSQL's double precision (for `make_interval`).
fn secs(s: u64) -> f64 {
    s as f64
}

impl Coordinator for PgCoordinator {
    fn node(&self) -> &str {
        &self.node
    }

    fn heartbeat<'a>(&'a self, alive_s: u64, runs: &'a [String]) -> StoreFuture<'a, usize> {
        Box::pin(async move {
            let rows = self
                .rows(
                    concat!(
                        "WITH ",
                        live_cte!(),
                        ", beat AS (INSERT INTO nodes \
                         (id, started, last_seen, version, protocol, backend_pid, runs) \
                         VALUES ($1, now(), now(), $4, $5, pg_backend_pid(), $6) \
                         ON CONFLICT (id) DO UPDATE SET last_seen = now(), down_since = NULL, \
                         backend_pid = excluded.backend_pid, runs = excluded.runs RETURNING id), \
                         gone AS (DELETE FROM nodes WHERE id <> $1 \
                         AND last_seen < now() - make_interval(secs => $3)), \
                         seen AS (SELECT id, backend_pid, ",
                        connected!("id"),
                        " AS up FROM nodes WHERE id <> $1 \
                         AND last_seen >= now() - make_interval(secs => $3)), \
                         marks AS (UPDATE nodes n SET down_since = now() WHERE n.id IN \
                         (SELECT m.id FROM nodes m JOIN seen ON seen.id = m.id \
                         WHERE NOT seen.up AND m.down_since IS NULL \
                         AND m.backend_pid IS NOT DISTINCT FROM seen.backend_pid \
                         ORDER BY m.id FOR UPDATE OF m SKIP LOCKED)) \
                         SELECT (SELECT count(*) FROM nodes n JOIN seen ON seen.id = n.id \
                         WHERE seen.up AND n.last_seen > now() - make_interval(secs => $2)), \
                         (SELECT count(*) FROM seen WHERE NOT seen.up AND (\
                         EXISTS (SELECT 1 FROM leases l WHERE l.node = seen.id AND l.expires > now()) \
                         OR EXISTS (SELECT 1 FROM intake_leases i WHERE i.node = seen.id \
                         AND i.expires > now())))"
                    ),
                    &[
                        &self.node,
                        &secs(alive_s),
                        &secs(FORGET_NODE_S),
                        &self.version.version,
                        &i32::try_from(self.version.protocol).unwrap_or(i32::MAX),
                        &runs,
                    ],
                )
                .await?;
            let others: i64 = rows.first().map_or(0, |r| r.get(0));
            let dying: i64 = rows.first().map_or(0, |r| r.get(1));
            self.dying.store(dying > 0, Ordering::SeqCst);
            Ok(usize::try_from(others).unwrap_or(0) + 1)
        })
    }

    fn renew(&self, lease_s: u64) -> StoreFuture<'_, Vec<Lease>> {
        Box::pin(async move {
            let rows = self
                .rows(
                    "UPDATE leases SET expires = now() + make_interval(secs => $2) \
                     WHERE node = $1 AND expires > now() RETURNING partition, generation",
                    &[&self.node, &secs(lease_s)],
                )
                .await?;
            Ok(leases(rows))
        })
    }

    fn acquire(&self, most: usize, lease_s: u64) -> StoreFuture<'_, Vec<Lease>> {
        Box::pin(async move {
            if most == 0 {
                return Ok(Vec::new());
            }
            let most = i64::try_from(most).unwrap_or(i64::from(PARTITIONS));
            let rows = self
                .rows(
                    concat!(
                        "WITH ",
                        live_cte!(),
                        " UPDATE leases SET node = $1, generation = generation + 1, \
                         expires = now() + make_interval(secs => $2) \
                         WHERE partition IN (SELECT partition FROM leases \
                         WHERE node IS NULL OR expires <= now() OR ",
                        dead!("node"),
                        " ORDER BY partition LIMIT $3 FOR UPDATE SKIP LOCKED) \
                         RETURNING partition, generation"
                    ),
                    &[&self.node, &secs(lease_s), &most],
                )
                .await?;
            Ok(leases(rows))
        })
    }

    fn release<'a>(&'a self, partitions: &'a [u32]) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let partitions: Vec<i32> = partitions.iter().map(|p| *p as i32).collect();
            self.rows(
                "UPDATE leases SET node = NULL, expires = '-infinity' \
                 WHERE node = $1 AND partition = ANY($2)",
                &[&self.node, &partitions],
            )
            .await?;
            Ok(())
        })
    }

    fn hold_intake<'a>(&'a self, name: &'a str, lease_s: u64) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let rows = self
                .rows(
                    concat!(
                        "WITH ",
                        live_cte!(),
                        " INSERT INTO intake_leases AS i (name, node, expires) \
                         VALUES ($1, $2, now() + make_interval(secs => $3)) \
                         ON CONFLICT (name) DO UPDATE SET node = excluded.node, \
                         expires = excluded.expires \
                         WHERE i.node = excluded.node OR i.node IS NULL OR i.expires <= now() \
                         OR ",
                        dead!("i.node"),
                        " RETURNING 1"
                    ),
                    &[&name, &self.node, &secs(lease_s)],
                )
                .await?;
            Ok(!rows.is_empty())
        })
    }

    fn release_intake<'a>(&'a self, name: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.rows(
                "UPDATE intake_leases SET node = NULL, expires = '-infinity' \
                 WHERE name = $1 AND node = $2",
                &[&name, &self.node],
            )
            .await?;
            Ok(())
        })
    }

    fn leave(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.rows(
                "WITH gone AS (DELETE FROM nodes WHERE id = $1), \
                 layouts AS (DELETE FROM intake_layouts WHERE node = $1), \
                 intakes AS (UPDATE intake_leases SET node = NULL, expires = '-infinity' \
                 WHERE node = $1) \
                 UPDATE leases SET node = NULL, expires = '-infinity' WHERE node = $1",
                &[&self.node],
            )
            .await?;
            Ok(())
        })
    }

    fn advertise_layout<'a>(&'a self, layout: &'a str, lease_s: u64) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            // Rows left by nodes that died are removed once they are long expired.
            self.rows(
                "WITH old AS (DELETE FROM intake_layouts \
                 WHERE expires < now() - make_interval(secs => $4)) \
                 INSERT INTO intake_layouts (layout, node, expires) \
                 VALUES ($1, $2, now() + make_interval(secs => $3)) \
                 ON CONFLICT (layout, node) DO UPDATE SET expires = excluded.expires",
                &[&layout, &self.node, &secs(lease_s), &secs(FORGET_NODE_S)],
            )
            .await?;
            Ok(())
        })
    }

    fn withdraw_layout<'a>(&'a self, layout: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            self.rows(
                "DELETE FROM intake_layouts WHERE layout = $1 AND node = $2",
                &[&layout, &self.node],
            )
            .await?;
            Ok(())
        })
    }

    fn nodes(&self) -> StoreFuture<'_, Vec<NodeInfo>> {
        Box::pin(async move {
            let rows = self.rows(NODES_SQL, &[]).await?;
            Ok(rows.iter().map(node_info).collect())
        })
    }

    fn lock_epoch(&self) -> u64 {
        self.lock_epoch.load(Ordering::SeqCst)
    }

    fn lock_lost(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            self.lock_lost.notified().await;
            Ok(())
        })
    }

    fn usurped(&self) -> bool {
        self.usurped.load(Ordering::SeqCst)
    }

    fn dying(&self) -> bool {
        self.dying.load(Ordering::SeqCst)
    }

    fn wakeups(&self) -> Option<mpsc::UnboundedReceiver<u32>> {
        self.wake_rx.lock().ok()?.take()
    }

    fn publish_events(&self, payload: String) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let channel = self
                .events_channel
                .lock()
                .map(|c| c.clone())
                .unwrap_or_else(|_| EVENTS_CHANNEL.to_owned());
            let mut slot = self.publisher.lock().await;
            let client = self.publishing(&mut slot).await?;
            let sent = client
                .execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
                .await;
            if sent.is_err() && client.is_closed() {
                *slot = None;
            }
            sent.map_err(pg_err)?;
            Ok(())
        })
    }

    fn remote_events(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.events_rx.lock().ok()?.take()
    }

    fn call_key(&self) -> StoreFuture<'_, Vec<u8>> {
        Box::pin(async move {
            let rows = self
                .rows("SELECT key FROM node_call_key LIMIT 1", &[])
                .await?;
            Ok(rows
                .first()
                .map(|row| row.get::<_, String>(0).into_bytes())
                .unwrap_or_default())
        })
    }
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "cluster_layouts_tests.rs"]
mod layouts_tests;

#[cfg(test)]
#[path = "cluster_lock_tests.rs"]
mod lock_tests;
