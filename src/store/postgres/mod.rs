//! The PostgreSQL backend: [`PgStore`] implements the store traits (`../ports/`) over one
//! PostgreSQL database, one table per record kind (`migrations/0001_init.sql`), so several
//! chela processes can later share it.
//!
//! Files follow the concerns: `sessions.rs` and `jsonl.rs` ([`SessionStore`]), `queue.rs`
//! ([`QueueStore`]), `delivery.rs` ([`DeliveryStore`]), `links.rs` ([`BindingStore`]),
//! `pairing.rs` ([`PairingStore`], [`CursorStore`]); `schema.rs` applies the migrations.
//!
//! **Threading.** The store owns one OS thread with its own current-thread tokio runtime and
//! a small pool of [`CONNECTIONS`] connections (tokio-postgres), each served by a lane (a
//! local task). Every store method sends a job over a channel; the next free lane runs it on
//! its connection: an async method awaits a oneshot reply, a sync method blocks on a std
//! channel. This is why: the traits' sync methods are called from async tasks on any
//! runtime, also a current-thread one (tests), where `block_in_place` panics and blocking on
//! a future of the caller's own runtime would deadlock; the worker's runtime is never the
//! caller's, so blocking on it is safe, and the sync methods are short point queries. On a
//! multi-thread runtime (the gateway's) the wait runs in `block_in_place`, so callers stuck
//! while the database is away do not take the runtime's worker threads with them. A lane
//! runs one job at a time, so a multi-statement transaction (`BEGIN` .. `COMMIT`) owns its
//! connection, and no lock is held across an await; jobs of different callers run
//! concurrently on different connections, kept apart by PostgreSQL (unique keys with
//! `ON CONFLICT`, row locks, advisory locks), as jobs of different processes will be.
//! Statements are prepared once per connection (`conn.rs`).
//!
//! **Durability.** Every write commits before its method returns (PostgreSQL's default
//! `synchronous_commit`), so "buffered" writes are durable too and [`BaseStore::flush`]
//! returns at once.
//!
//! **One process per database** unless clustered: `lock.rs` holds an advisory lock on a
//! connection of its own (exclusive, or shared by cluster nodes), so a second lone process
//! is refused with [`StoreError::Locked`] as sled's folder lock refuses it.
//!
//! **Faults.** When the connection is lost, the job that was running fails (its caller sees
//! the error and does not acknowledge what it could not store) and the next jobs wait while
//! the worker reconnects, once a second, logging the loss once and the return: intake and
//! delivery pause and resume. No TLS: the connection is plain TCP or a Unix socket.
//!
//! [`SessionStore`]: crate::store::ports::SessionStore
//! [`QueueStore`]: crate::store::ports::QueueStore
//! [`DeliveryStore`]: crate::store::ports::DeliveryStore
//! [`BindingStore`]: crate::store::ports::BindingStore
//! [`PairingStore`]: crate::store::ports::PairingStore
//! [`CursorStore`]: crate::store::ports::CursorStore

mod cluster;
mod conn;
mod cron;
mod delivery;
mod jsonl;
mod links;
mod lock;
mod node_lock;
mod pairing;
mod queue;
mod schema;
mod sessions;

#[cfg(test)]
pub(crate) mod testing;

use std::cell::Cell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use futures_util::future::LocalBoxFuture;
use tokio::sync::mpsc;
use tokio_postgres::NoTls;

use conn::Conn;

use crate::store::error::StoreError;
use crate::store::ports::{BaseStore, StoreFuture};

pub use cluster::{Joining, PgCoordinator};
pub use lock::Tenancy;
pub use schema::SCHEMA_VERSION;

/// How long connecting may take before the open fails (unless the URL sets
/// `connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How many connections the store keeps, each running one job at a time.
pub const CONNECTIONS: usize = 4;
/// How long the worker waits between reconnection attempts.
const RECONNECT_EVERY: Duration = Duration::from_secs(1);

/// One unit of work for the worker thread: it gets the connection and runs to completion.
/// It gets the store's lock refusal instead when another process took the lock.
type Job = Box<dyn FnOnce(Result<Rc<Conn>, StoreError>) -> LocalBoxFuture<'static, ()> + Send>;

/// The PostgreSQL store. Callers hold it through `store::Store`.
pub struct PgStore {
    jobs: mpsc::UnboundedSender<Job>,
    /// Says when the worker has stopped and given the store's lock back (see `Drop`).
    stopped: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    /// The cluster node whose leases fence the writes of a turn (see [`BaseStore::fence`]).
    node: std::sync::OnceLock<String>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects to the database at `url` (a `postgres://` URL or key=value string) and
    /// applies the embedded migrations. `setting` names where the URL came from
    /// (`store.url`, `CHELA_STORE_URL`) for the error of a bad URL or a refused login.
    /// Fails with [`StoreError::SchemaTooNew`] when the database was migrated by a newer
    /// chela.
    pub fn open(url: &str, setting: &str) -> Result<PgStore, StoreError> {
        PgStore::open_as(url, setting, Tenancy::Sole)
    }

    /// [`PgStore::open`] for `tenancy`: with [`Tenancy::Sole`] the store holds the
    /// database's lock exclusively and fails with [`StoreError::Locked`] while another chela
    /// process has it open; with [`Tenancy::Shared`] (cluster nodes) it shares the lock
    /// with the other nodes and is refused only while a lone process holds it.
    pub fn open_as(url: &str, setting: &str, tenancy: Tenancy) -> Result<PgStore, StoreError> {
        let connect_err = |reason: String| StoreError::Connect {
            setting: setting.to_owned(),
            url: crate::config::redact::redact_url(url, false),
            reason,
        };
        let config = parse_config(url, setting)?;
        let place = crate::config::redact::redact_url(url, false);
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel(1);
        let (jobs, jobs_rx) = mpsc::unbounded_channel();
        let (stopped_tx, stopped) = std::sync::mpsc::sync_channel(1);
        std::thread::Builder::new()
            .name("chela-postgres".into())
            .spawn(move || {
                worker(config, tenancy, place, jobs_rx, ready_tx);
                let _ = stopped_tx.send(());
            })
            .map_err(|e| connect_err(format!("cannot start the store thread: {e}")))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(PgStore {
                jobs,
                stopped: std::sync::Mutex::new(stopped),
                node: std::sync::OnceLock::new(),
            }),
            Ok(Err(Opening::Connect(reason))) => Err(connect_err(reason)),
            Ok(Err(Opening::Locked)) => Err(StoreError::Locked {
                place: crate::config::redact::redact_url(url, false),
            }),
            Ok(Err(Opening::Store(e))) => Err(e),
            Err(_) => Err(connect_err("the store thread stopped".into())),
        }
    }

    /// The cluster node this store writes for, if it is one's.
    fn node(&self) -> Option<String> {
        self.node.get().cloned()
    }

    /// Sends `f` to the worker; `reply` gets its result.
    fn submit<T, F, Fut>(&self, f: F, reply: impl FnOnce(Result<T, StoreError>) + Send + 'static)
    where
        F: FnOnce(Rc<Conn>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + 'static,
        T: 'static,
    {
        let job: Job = Box::new(move |client| {
            Box::pin(async move {
                match client {
                    Ok(client) => reply(f(client).await),
                    Err(refused) => reply(Err(refused)),
                }
            })
        });
        // A stopped worker drops the job and its reply: the caller sees `gone`.
        let _ = self.jobs.send(job);
    }

    /// Runs `f` on the worker and blocks this thread until it is done (sync methods).
    fn blocking<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(Rc<Conn>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.submit(f, move |r| {
            let _ = tx.send(r);
        });
        let wait = || rx.recv().map_err(|_| gone());
        // On a multi-thread runtime, a wait that lasts (the database is away) must not take
        // a worker thread with it: hand the worker's other tasks to another thread.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        match multi_thread {
            true => tokio::task::block_in_place(wait)?,
            false => wait()?,
        }
    }

    /// Runs `f` on the worker and awaits its result (async methods).
    async fn call<T, F, Fut>(&self, f: F) -> Result<T, StoreError>
    where
        F: FnOnce(Rc<Conn>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, StoreError>> + 'static,
        T: Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(f, move |r| {
            let _ = tx.send(r);
        });
        rx.await.map_err(|_| gone())?
    }
}

impl Drop for PgStore {
    /// Stops the worker and waits (briefly) until it has given the database's lock back,
    /// so a store opened right after this one is dropped finds the lock free.
    fn drop(&mut self) {
        let (closed, _) = mpsc::unbounded_channel();
        drop(std::mem::replace(&mut self.jobs, closed));
        let stopped = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        let _ = stopped.recv_timeout(lock::RELEASE_WAIT * 2);
    }
}

impl BaseStore for PgStore {
    /// Every write committed before it returned: nothing to do.
    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }

    fn fence(&self, node: &str) {
        let _ = self.node.set(node.to_owned());
    }

    fn stored_bytes(&self) -> Result<Option<u64>, StoreError> {
        self.blocking(move |c| async move {
            let row = c.query_one(STORED_BYTES_SQL, &[]).await.map_err(pg_err)?;
            Ok(Some(unbig(row.get(0))))
        })
    }

    fn cluster_nodes(&self) -> Result<Vec<crate::store::ports::NodeInfo>, StoreError> {
        self.blocking(move |c| async move {
            let rows = c.query(cluster::NODES_SQL, &[]).await.map_err(pg_err)?;
            Ok(rows.iter().map(cluster::node_info).collect())
        })
    }
}

/// The bytes of every table (with its indexes and TOAST) in the schema holding chela's
/// `sessions` table.
const STORED_BYTES_SQL: &str = "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint \
     FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = \
     (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('sessions'))";

/// Parses the store URL `url` (set by `setting`), with chela's connect timeout and
/// application name unless the URL sets them.
fn parse_config(url: &str, setting: &str) -> Result<tokio_postgres::Config, StoreError> {
    let mut config: tokio_postgres::Config =
        url.parse()
            .map_err(|e: tokio_postgres::Error| StoreError::Connect {
                setting: setting.to_owned(),
                url: crate::config::redact::redact_url(url, false),
                reason: error_text(&e),
            })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("chela");
    }
    Ok(config)
}

/// Why the worker could not start.
enum Opening {
    /// Connecting or logging in failed.
    Connect(String),
    /// The database refused the migrations (or is newer).
    Store(StoreError),
    /// Another chela process holds the database's lock.
    Locked,
}

/// The worker thread: connects, migrates, reports through `ready`, then runs jobs until the
/// store is dropped.
fn worker(
    config: tokio_postgres::Config,
    tenancy: Tenancy,
    place: String,
    jobs: mpsc::UnboundedReceiver<Job>,
    ready: std::sync::mpsc::SyncSender<Result<(), Opening>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(Opening::Connect(format!("no runtime: {e}"))));
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(async move {
        let mut conns = Vec::with_capacity(CONNECTIONS);
        for _ in 0..CONNECTIONS {
            match connect(&config).await {
                Ok(conn) => conns.push(Rc::new(conn)),
                Err(e) => {
                    let _ = ready.send(Err(Opening::Connect(e)));
                    return;
                }
            }
        }
        // The lock first (its key needs none of chela's tables): a process refused must not
        // migrate the database under the one that holds it.
        let held = match lock::take(&config, tenancy).await {
            Ok(held) => held,
            Err(lock::Refused::Taken) => {
                let _ = ready.send(Err(Opening::Locked));
                return;
            }
            Err(lock::Refused::Connect(e)) => {
                let _ = ready.send(Err(Opening::Connect(e)));
                return;
            }
        };
        if let Some(first) = conns.first()
            && let Err(e) = schema::migrate(first).await
        {
            let _ = ready.send(Err(Opening::Store(e)));
            return;
        }
        if ready.send(Ok(())).is_err() {
            return;
        }
        let (stop_lock, stop) = tokio::sync::oneshot::channel();
        let lanes = Rc::new(Lanes {
            config,
            jobs: tokio::sync::Mutex::new(jobs),
            lost: Cell::new(false),
            lock: Rc::new(Cell::new(lock::LockState::Held)),
            place,
        });
        let holder = tokio::task::spawn_local(lock::hold(
            lanes.config.clone(),
            held,
            stop,
            lanes.lock.clone(),
        ));
        let lanes: Vec<_> = conns
            .into_iter()
            .map(|conn| tokio::task::spawn_local(serve(lanes.clone(), conn)))
            .collect();
        for lane in lanes {
            let _ = lane.await;
        }
        let _ = stop_lock.send(());
        let _ = tokio::time::timeout(lock::RELEASE_WAIT, holder).await;
    }));
}

/// What the worker's lanes share.
struct Lanes {
    config: tokio_postgres::Config,
    jobs: tokio::sync::Mutex<mpsc::UnboundedReceiver<Job>>,
    /// Whether the connection is known lost (logged once for all lanes).
    lost: Cell<bool>,
    /// Whether this process holds the store's lock (`lock.rs`).
    lock: Rc<Cell<lock::LockState>>,
    /// The database, password hidden, for the refusal.
    place: String,
}

/// How often a job waiting for the lock to be taken again looks.
const LOCK_WAIT: Duration = Duration::from_millis(50);

/// One lane: runs jobs, one at a time, on its connection until the store is dropped;
/// reconnects first when the connection was lost. While the store's lock is being taken
/// again the job waits; when another process took it, the job is refused.
async fn serve(lanes: Rc<Lanes>, mut conn: Rc<Conn>) {
    loop {
        let job = lanes.jobs.lock().await.recv().await;
        let Some(job) = job else { return };
        while lanes.lock.get() == lock::LockState::Retaking {
            tokio::time::sleep(LOCK_WAIT).await;
        }
        if lanes.lock.get() == lock::LockState::Lost {
            let place = lanes.place.clone();
            job(Err(StoreError::Locked { place })).await;
            continue;
        }
        if conn.is_closed() {
            conn = Rc::new(reconnect(&lanes.config, &lanes.lost).await);
        }
        job(Ok(conn.clone())).await;
    }
}

/// Connects again, once a second until it works, logging the loss and the return.
/// `lost` is shared by the lanes, so the loss and the return are logged once.
async fn reconnect(config: &tokio_postgres::Config, lost: &Cell<bool>) -> Conn {
    if !lost.replace(true) {
        tracing::error!(
            "store: the connection to PostgreSQL was lost; store operations (intake, delivery) wait until it returns"
        );
    }
    loop {
        match connect(config).await {
            Ok(conn) => {
                if lost.replace(false) {
                    tracing::info!("store: reconnected to PostgreSQL; resuming");
                }
                return conn;
            }
            Err(e) => {
                tracing::debug!(error = %e, "store: PostgreSQL still unreachable");
                tokio::time::sleep(RECONNECT_EVERY).await;
            }
        }
    }
}

/// Connects and spawns the connection's task on the worker's runtime.
async fn connect(config: &tokio_postgres::Config) -> Result<Conn, String> {
    let (client, connection) = config.connect(NoTls).await.map_err(|e| error_text(&e))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %error_text(&e), "store: PostgreSQL connection ended");
        }
    });
    Ok(Conn::new(client))
}

/// The error of a job whose worker stopped.
fn gone() -> StoreError {
    StoreError::Db("the PostgreSQL store thread stopped".into())
}

/// A tokio-postgres error with its causes (its own text alone is often just "db error").
fn error_text(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{}: {}", db.severity(), db.message());
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Maps a tokio-postgres error to a [`StoreError`].
fn pg_err(e: tokio_postgres::Error) -> StoreError {
    StoreError::Db(error_text(&e))
}

/// Runs `body` inside a transaction on `client`: committed when it returns `Ok`, rolled back
/// when it returns `Err`. Jobs run one at a time, so nothing else uses the connection
/// meanwhile.
async fn transaction<T>(
    client: &Conn,
    body: impl AsyncFnOnce(&Conn) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    client.batch_execute("BEGIN").await.map_err(pg_err)?;
    match body(client).await {
        Ok(value) => {
            client.batch_execute("COMMIT").await.map_err(pg_err)?;
            Ok(value)
        }
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(e)
        }
    }
}

/// A u64 (time, seq) as PostgreSQL's bigint.
fn big(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A bigint read back as u64 (negative values, which chela never writes, become 0).
fn unbig(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// Many u64 as a bigint array.
fn bigs(values: &[u64]) -> Vec<i64> {
    values.iter().map(|v| big(*v)).collect()
}
