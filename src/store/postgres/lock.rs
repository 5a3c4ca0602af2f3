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

use std::cell::Cell;
use std::rc::Rc;
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
/// The lock session's TCP settings: the server probes a silent client after 10 s, every 5 s,
/// and drops it after 3 lost probes or 30 s of unacknowledged data.
pub(super) const KEEPALIVES: [&str; 4] = [
    "SET tcp_keepalives_idle = 10",
    "SET tcp_keepalives_interval = 5",
    "SET tcp_keepalives_count = 3",
    "SET tcp_user_timeout = 30000",
];
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
                "SELECT pg_try_advisory_lock($1, hashtext(coalesce(current_schema(), ''))), pg_backend_pid()"
            }
            Tenancy::Shared => {
                "SELECT pg_try_advisory_lock_shared($1, hashtext(coalesce(current_schema(), ''))), \
                 pg_backend_pid()"
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
    /// The backend pid of its session.
    pid: i32,
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
        match take_once(config, tenancy, None)
            .await
            .map_err(Refused::Connect)?
        {
            Some(held) => return Ok(held),
            None if attempt < TRIES => tokio::time::sleep(RETRY).await,
            None => {}
        }
    }
    Err(Refused::Taken)
}

/// One try: connects and asks for the lock; `None` when another process holds it. With
/// `stale`, the backend pid of this process's own lost lock session: if that session still
/// holds the lock (the server has not noticed it is gone), it is ended and the lock asked
/// for again.
async fn take_once(
    config: &tokio_postgres::Config,
    tenancy: Tenancy,
    stale: Option<i32>,
) -> Result<Option<Held>, String> {
    let (client, connection) = config.connect(NoTls).await.map_err(|e| error_text(&e))?;
    let (end_tx, ended) = oneshot::channel();
    tokio::spawn(async move {
        let _ = connection.await;
        let _ = end_tx.send(());
    });
    // If this host dies (power, network), the server must notice that the lock's session
    // is gone soon, not after the system's two-hour keepalive: at most about 30 s. Best
    // effort (ignored over a Unix socket; `tcp_user_timeout` needs PostgreSQL 12).
    for setting in KEEPALIVES {
        if let Err(e) = client.batch_execute(setting).await {
            tracing::debug!(error = %error_text(&e), setting, "store: keepalive setting refused");
        }
    }
    let ask = async || -> Result<(bool, i32), String> {
        let row = client
            .query_one(tenancy.try_sql(), &[&LOCK_CLASS])
            .await
            .map_err(|e| error_text(&e))?;
        let taken = row.try_get(0).map_err(|e| error_text(&e))?;
        let pid = row.try_get(1).map_err(|e| error_text(&e))?;
        Ok((taken, pid))
    };
    let (mut taken, pid) = ask().await?;
    if !taken && let Some(stale) = stale {
        let row = client
            .query_one(END_STALE, &[&stale, &i64::from(LOCK_CLASS)])
            .await
            .map_err(|e| error_text(&e))?;
        if row.try_get::<_, bool>(0).unwrap_or(false) {
            tracing::info!(
                pid = stale,
                "store: ended this process's own stale lock session"
            );
            // The lock goes when the ended backend exits: ask a few times.
            for _ in 0..TRIES {
                tokio::time::sleep(RETRY).await;
                taken = ask().await?.0;
                if taken {
                    break;
                }
            }
        }
    }
    Ok(taken.then_some(Held {
        client,
        ended,
        tenancy,
        pid,
    }))
}

/// Ends backend `$1` if it holds chela's store lock of this schema (class `$2`); returns
/// whether it did.
const END_STALE: &str = "SELECT coalesce(bool_or(pg_terminate_backend(l.pid)), false) \
     FROM pg_locks l WHERE l.pid = $1 AND l.locktype = 'advisory' AND l.granted \
     AND l.classid = $2::bigint::oid AND l.objsubid = 2 \
     AND l.objid = (hashtext(coalesce(current_schema(), ''))::bigint & 4294967295)::oid";

/// Whether this process holds the store's lock, as the worker's lanes see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LockState {
    /// Held: jobs run.
    Held,
    /// Its connection was lost and it is being taken again: jobs wait.
    Retaking,
    /// Another process took it meanwhile: jobs fail with `StoreError::Locked`, so this
    /// process stops writing to a database another one now owns.
    Lost,
}

/// Holds `held` until `stop` fires, then unlocks it. When its connection is lost (the
/// lock with it), takes it again once PostgreSQL is back; `state` tells the lanes.
pub(super) async fn hold(
    config: tokio_postgres::Config,
    mut held: Held,
    mut stop: oneshot::Receiver<()>,
    state: Rc<Cell<LockState>>,
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
                state.set(LockState::Retaking);
                held = tokio::select! {
                    _ = &mut stop => return,
                    again = retake(&config, held.tenancy, held.pid, &state) => again,
                };
                state.set(LockState::Held);
            }
        }
    }
}

/// Takes the lock again after its connection (backend `stale`) was lost, once a second
/// until it works.
async fn retake(
    config: &tokio_postgres::Config,
    tenancy: Tenancy,
    stale: i32,
    state: &Cell<LockState>,
) -> Held {
    loop {
        match take_once(config, tenancy, Some(stale)).await {
            Ok(Some(held)) => {
                tracing::info!("store: the store's lock is held again; store operations resume");
                return held;
            }
            Ok(None) => {
                if state.replace(LockState::Lost) != LockState::Lost {
                    tracing::error!(
                        "store: another chela process took this database while the lock's \
                         connection was lost; this process's store operations now fail until \
                         it can take the lock again: stop one of them"
                    );
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "store: PostgreSQL still unreachable for the lock");
            }
        }
        tokio::time::sleep(RECONNECT_EVERY).await;
    }
}
