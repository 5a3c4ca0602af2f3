//! The store's lock on its database: one chela process per database (and schema), as sled's
//! folder lock gives, unless the processes are nodes of one cluster, which share it.
//!
//! The lock is a session-level advisory lock held by a connection of its own for as long as
//! the store is open: exclusive for a lone process ([`Tenancy::Sole`]), shared for cluster
//! nodes ([`Tenancy::Shared`]), so a lone gateway and a cluster never run on one database
//! together, and a second lone process (an overlapping restart, `chela agent` beside the
//! gateway) gets `StoreError::Locked` and falls back to the running gateway's RPC. The
//! lock goes with its connection: at a graceful close the store unlocks it; after a crash
//! PostgreSQL drops it when it sees the connection end, which [`take`] waits out briefly.

use std::time::Duration;

use tokio::sync::oneshot;
use tokio_postgres::{Client, NoTls};

use super::{RECONNECT_EVERY, error_text};

/// Who else may use the database while this store is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tenancy {
    /// No other chela process (the default: one gateway per database).
    Sole,
    /// Other nodes of the same cluster (`[cluster] enabled`), which hold it shared too.
    Shared,
}

/// The advisory lock's first key ("chla"); the second is the schema's hash, so stores in
/// different schemas of one database do not exclude each other.
const LOCK_CLASS: i32 = 0x6368_6c61;
/// How many times [`take`] tries before reporting the store locked.
const TRIES: u32 = 10;
/// The pause between tries: a crashed holder's connection may take a moment to be noticed.
const RETRY: Duration = Duration::from_millis(50);
/// The longest wait for the unlock at close.
pub(super) const RELEASE_WAIT: Duration = Duration::from_secs(1);

impl Tenancy {
    /// The statement that tries to take the lock; it returns whether it did.
    fn try_sql(self) -> &'static str {
        match self {
            Tenancy::Sole => {
                "SELECT pg_try_advisory_lock($1, hashtext(coalesce(current_schema(), '')))"
            }
            Tenancy::Shared => {
                "SELECT pg_try_advisory_lock_shared($1, hashtext(coalesce(current_schema(), '')))"
            }
        }
    }

    /// The statement that gives the lock back.
    fn unlock_sql(self) -> &'static str {
        match self {
            Tenancy::Sole => {
                "SELECT pg_advisory_unlock($1, hashtext(coalesce(current_schema(), '')))"
            }
            Tenancy::Shared => {
                "SELECT pg_advisory_unlock_shared($1, hashtext(coalesce(current_schema(), '')))"
            }
        }
    }
}

/// The lock, held by its own connection.
pub(super) struct Held {
    client: Client,
    /// Resolves when the connection ends (and with it the lock).
    ended: oneshot::Receiver<()>,
    tenancy: Tenancy,
}

/// Why the lock could not be taken.
pub(super) enum Refused {
    /// Another process holds it.
    Taken,
    /// No connection for it.
    Connect(String),
}

/// Takes the lock, trying [`TRIES`] times while another process holds it.
pub(super) async fn take(
    config: &tokio_postgres::Config,
    tenancy: Tenancy,
) -> Result<Held, Refused> {
    for attempt in 1..=TRIES {
        match take_once(config, tenancy).await.map_err(Refused::Connect)? {
            Some(held) => return Ok(held),
            None if attempt < TRIES => tokio::time::sleep(RETRY).await,
            None => {}
        }
    }
    Err(Refused::Taken)
}

/// One try: connects and asks for the lock; `None` when another process holds it.
async fn take_once(
    config: &tokio_postgres::Config,
    tenancy: Tenancy,
) -> Result<Option<Held>, String> {
    let (client, connection) = config.connect(NoTls).await.map_err(|e| error_text(&e))?;
    let (end_tx, ended) = oneshot::channel();
    tokio::spawn(async move {
        let _ = connection.await;
        let _ = end_tx.send(());
    });
    let row = client
        .query_one(tenancy.try_sql(), &[&LOCK_CLASS])
        .await
        .map_err(|e| error_text(&e))?;
    let taken: bool = row.try_get(0).map_err(|e| error_text(&e))?;
    Ok(taken.then_some(Held {
        client,
        ended,
        tenancy,
    }))
}

/// Holds `held` until `stop` fires, then unlocks it. When its connection is lost (the
/// lock with it), takes it again once PostgreSQL is back, logging loudly if another
/// process took it meanwhile.
pub(super) async fn hold(
    config: tokio_postgres::Config,
    mut held: Held,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut stop => {
                let sql = held.tenancy.unlock_sql();
                let _ = held.client.query_one(sql, &[&LOCK_CLASS]).await;
                return;
            }
            _ = &mut held.ended => {
                tracing::error!("store: the connection holding the store's lock was lost; taking the lock again");
                held = tokio::select! {
                    _ = &mut stop => return,
                    again = retake(&config, held.tenancy) => again,
                };
            }
        }
    }
}

/// Takes the lock again after its connection was lost, once a second until it works.
async fn retake(config: &tokio_postgres::Config, tenancy: Tenancy) -> Held {
    loop {
        match take_once(config, tenancy).await {
            Ok(Some(held)) => {
                tracing::info!("store: the store's lock is held again");
                return held;
            }
            Ok(None) => tracing::error!(
                "store: another chela process took this database while the connection was \
                 lost; two gateways now write to it: stop one of them"
            ),
            Err(e) => {
                tracing::debug!(error = %e, "store: PostgreSQL still unreachable for the lock");
            }
        }
        tokio::time::sleep(RECONNECT_EVERY).await;
    }
}
