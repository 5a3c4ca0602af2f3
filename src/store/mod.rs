//! The store: everything that must survive a restart (DESIGN 4, SPEC 6), behind traits.
//!
//! Callers hold a [`Store`], a cheap cloneable handle that derefs to `dyn` [`Backend`]: the
//! store's operations are the methods of the traits in `ports/`, one per concern, each stating
//! its contract (what is durable when it returns, what is atomic):
//!
//! - [`SessionStore`]: sessions, per-key settings, transcripts (the model window, JSONL
//!   export and import, `sessions show`).
//! - [`QueueStore`]: the durable queue of accepted turns, inbound dedupe, and the two
//!   exactly-once steps `enqueue_unique` and `settle_turn`.
//! - [`DeliveryStore`]: the outbox of finals, dead letters, the reply journal.
//! - [`BindingStore`]: coding-agent bindings, sub-agent links, reply targets.
//! - [`PairingStore`]: DM pairing codes, approved senders, owners.
//! - [`CursorStore`]: platform cursors and kept group context.
//! - [`CronStore`]: scheduled jobs and when each next runs.
//! - [`BaseStore`]: `flush`, making buffered writes durable.
//!
//! Two backends implement the traits and pass the contract tests (`contract_tests/`):
//! [`SledStore`] (`sled/`, one sled tree per record kind, the embedded default) and
//! [`PgStore`] (`postgres/`, one PostgreSQL table per record kind, chosen by `[store] url`).
//! No backend type leaves them: callers see the typed records and [`StoreError`].
//! [`Store::open_config`] chooses the backend where the store is opened; nothing above the
//! store changes.

mod engine;
mod entry;
pub mod foreign;
mod highwater;
mod import;
pub mod migrate;
pub mod pi_export;
mod ports;
mod postgres;
mod redb;
mod show;
mod sled;

#[cfg(test)]
pub(crate) mod contract_tests;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use self::postgres::{PgStore, SCHEMA_VERSION, Tenancy};
pub use self::redb::RedbStore;
pub use self::sled::{CACHE_CAPACITY, SledStore};
pub use engine::{holds_redb, holds_sled, resolve as resolve_engine};
pub use entry::{Entry, EntryKind, Item, SessionHeader, TRANSCRIPT_VERSION};
#[cfg(test)]
pub(crate) use ports::test_support;
pub use ports::{
    Backend, BaseStore, Binding, BindingStore, CODE_TTL_MS, Coordinator, CronJob, CronOrigin,
    CronStore, CursorStore, DeliveryStore, Lease, MAX_EVENT_PAYLOAD, MAX_PENDING, NodeInfo,
    NodeVersion, OutboxEntry, PARTITIONS, PROTOCOL, PairingOutcome, PairingRequest, PairingStore,
    PendingTurn, QueueStore, ReplyJournal, SUMMARY_HEADING, SessionMeta, SessionStore, StoreFuture,
    SubagentLink, SubagentState, WindowMessage, dedupe_key, partition_of,
};

/// The high-water file beside store folder `store` (`<store>.highwater`), if it has a name.
pub fn highwater_path_for(store: &Path) -> Option<PathBuf> {
    highwater::HighWater::path_for(store)
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process holds the store's lock.
    #[error("the store at {place} is in use by another chela process")]
    Locked {
        /// The store folder, or the PostgreSQL database (password hidden).
        place: String,
    },
    /// The store could not be opened.
    #[error("cannot open the store at {}: {reason}", path.display())]
    Open {
        /// The store folder.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The database failed to read or write.
    #[error("store i/o failed: {0}")]
    Db(String),
    /// A stored record could not be decoded.
    #[error("corrupt record in {collection}: {reason}")]
    Corrupt {
        /// The collection holding the record (`sessions`, `outbox`, ...).
        collection: &'static str,
        /// The decoding error.
        reason: String,
    },
    /// A record could not be encoded.
    #[error("cannot encode a record: {0}")]
    Encode(String),
    /// The session key has no session yet (see [`SessionStore::ensure_session`]).
    #[error("no session {0}")]
    UnknownSession(String),
    /// An import was asked for a key that already has a transcript.
    #[error("session {key} already has {entries} entries; import refuses to overwrite it")]
    SessionExists {
        /// The session key.
        key: String,
        /// How many entries it has.
        entries: u64,
    },
    /// An imported JSONL line was rejected.
    #[error("import line {line}: {reason}")]
    InvalidImport {
        /// 1-based line number.
        line: usize,
        /// Why it was rejected.
        reason: String,
    },
    /// The store holds less than it once made durable: its files were damaged or replaced
    /// by an older copy (see `sled/highwater.rs`).
    #[error(
        "the store at {} has rolled back: it is at generation {found}, but generation {recorded} \
         was made durable earlier (recorded in {}). Writes made since were lost (damaged or \
         restored files), and chela could answer old messages again. chela refuses to start; \
         restore the store from a backup, or run again with --accept-store-rollback to continue \
         with what is left (messages older than the last recorded write are then not answered \
         again)",
        path.display(),
        mark.display()
    )]
    RolledBack {
        /// The store folder.
        path: PathBuf,
        /// The high-water file.
        mark: PathBuf,
        /// The generation found in the store.
        found: u64,
        /// The generation the high-water file recorded.
        recorded: u64,
    },
    /// The store's file is damaged (its pages fail their checksums, or it cannot be read or
    /// written): found at open by the engine's integrity check, or by a read or write later.
    #[error(
        "the store {} is damaged: {reason}. chela does not run on a damaged store: stop every \
         chela using it, then restore the folder {} from a backup, or move {} away to start \
         with an empty store (its sessions, queue and pairings are then lost). `chela store \
         check` checks a store without starting the gateway",
        file.display(),
        path.display(),
        file.display()
    )]
    Damaged {
        /// The store folder.
        path: PathBuf,
        /// The damaged file (`chela.redb`; the folder itself for sled).
        file: PathBuf,
        /// What the engine found.
        reason: String,
    },
    /// Reading an import or writing an export failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The PostgreSQL store could not be reached or refused the login, or its URL is wrong.
    #[error("cannot open the PostgreSQL store at {url} (set by {setting}): {reason}")]
    Connect {
        /// Where the URL came from: `store.url` or `CHELA_STORE_URL`.
        setting: String,
        /// The URL, its user, password and query hidden.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A cluster node wrote for a session whose partition it does not hold (any more): its
    /// lease expired or went to another node (see [`BaseStore::fence`]).
    #[error("this node does not hold the lease of partition {partition} (session {session})")]
    NotOwner {
        /// The session written for.
        session: String,
        /// Its partition.
        partition: u32,
    },
    /// `[store] engine` (or `CHELA_STORE_ENGINE`) names an engine other than the one whose
    /// store the folder holds.
    #[error(
        "{setting} = {named}, but {} holds {found}: chela does not start an empty store beside \
         it. Stop the gateway and run `chela store migrate --to redb` to move a sled store to \
         redb, or set {setting} to the folder's engine (or leave it unset)",
        path.display()
    )]
    Engine {
        /// `store.engine` or `CHELA_STORE_ENGINE`.
        setting: &'static str,
        /// The engine it names.
        named: &'static str,
        /// The store folder.
        path: PathBuf,
        /// What the folder holds.
        found: String,
    },
    /// A live node of the cluster speaks another cluster protocol than this chela: joining
    /// would mis-handle the commands it queues (or it would mis-handle this node's).
    #[error(
        "node {node} of the cluster runs {theirs}, but this is {ours}: nodes of different \
         cluster protocols cannot share a store. Run the same chela version on every node \
         (stop {node} first, or start this node with its version)"
    )]
    ProtocolMismatch {
        /// The live node.
        node: String,
        /// What it runs.
        theirs: NodeVersion,
        /// What this node runs.
        ours: NodeVersion,
    },
    /// Nodes of an older chela still hold leases in the store: migrating it would change the
    /// schema under them.
    #[error(
        "node(s) {nodes} still run on this store (they hold leases) and would not know schema \
         version {supported}, to which this chela would migrate it from {found}: stop them \
         first (a node killed without stopping lets its leases run out after [cluster] lease_s)"
    )]
    UpgradeUnderLiveNodes {
        /// The nodes holding leases, comma-separated.
        nodes: String,
        /// The schema version found.
        found: i32,
        /// The version this chela would migrate to.
        supported: i32,
    },
    /// The database's schema was written by a newer chela.
    #[error(
        "the PostgreSQL store has schema version {found}, newer than this chela's {supported}: \
         a newer chela migrated it; run that version (or newer) instead"
    )]
    SchemaTooNew {
        /// The version found in the database.
        found: i32,
        /// The newest version this binary knows.
        supported: i32,
    },
    /// chela's PostgreSQL tables are in another schema than the one the connection's
    /// `search_path` now creates tables in (a schema was added ahead of them, such as one
    /// named after the user): going on would start an empty store beside the real one.
    #[error(
        "the PostgreSQL store's tables are in schema {found}, but the connection's search_path \
         now puts tables in schema {current}: opening would start an empty store there. Add \
         options=-csearch_path%3D{found} to the store URL (or remove schema {current})"
    )]
    SchemaElsewhere {
        /// The schema on the search path that holds chela's tables.
        found: String,
        /// The schema new tables would go to.
        current: String,
    },
}

/// A handle on the store: the backend behind `Arc<dyn Backend>`, whose trait methods it
/// derefs to. Cloning is cheap (one `Arc`).
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn Backend>,
    /// The engine's name (`redb`, `sled`, `postgresql`), for `doctor` and `status`.
    engine: &'static str,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl std::ops::Deref for Store {
    type Target = dyn Backend;

    fn deref(&self) -> &Self::Target {
        &*self.backend
    }
}

impl Store {
    /// A handle on `backend`: where the composition root chooses the backend.
    pub fn new(backend: impl Backend + 'static) -> Store {
        Store {
            backend: Arc::new(backend),
            engine: "custom",
        }
    }

    /// This handle, naming its engine `engine` (see [`Store::engine`]).
    pub fn named(self, engine: &'static str) -> Store {
        Store { engine, ..self }
    }

    /// The engine behind this handle: `redb`, `sled` or `postgresql` as opened by
    /// [`Store::open_config`] (`sled` for [`Store::open`]).
    pub fn engine(&self) -> &'static str {
        self.engine
    }

    /// Opens the sled store in folder `path` ([`SledStore::open`]).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        SledStore::open(path).map(|s| Store::new(s).named("sled"))
    }

    /// Opens the sled store in folder `path` with a page cache of `cache_bytes`, accepting a
    /// rolled-back store when `accept_rollback` ([`SledStore::open_with`]).
    pub fn open_with(
        path: &Path,
        accept_rollback: bool,
        cache_bytes: u64,
    ) -> Result<Store, StoreError> {
        SledStore::open_with(path, accept_rollback, cache_bytes)
            .map(|s| Store::new(s).named("sled"))
    }

    /// Opens the store `config` selects: PostgreSQL when `store.url` is set (see
    /// [`PgStore::open_as`]; shared with the other nodes when `[cluster] enabled`, else held
    /// by this process alone), else the embedded store in `store.path`, redb or sled as
    /// `[store] engine` says (`engine.rs`). The gateway and every CLI command open it
    /// through here.
    pub fn open_config(config: &crate::config::Config) -> Result<Store, StoreError> {
        let tenancy = match config.cluster.enabled {
            true => Tenancy::Shared,
            false => Tenancy::Sole,
        };
        let config = &config.store;
        let url = config.url.trim();
        if url.is_empty() {
            return engine::open_embedded(config);
        }
        // The local files beside `store.path` (RPC discovery, logs) need its folder, which
        // no sled store creates here.
        if let Some(parent) = config.path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        PgStore::open_as(url, config.url_setting(), tenancy)
            .map(|s| Store::new(s).named("postgresql"))
    }

    /// The cluster coordinator of node `node` on the PostgreSQL store `config` names (a
    /// connection of its own, which also listens for wake-ups); `None` for a sled store,
    /// which one process holds alone. Must be called inside a tokio runtime, which drives
    /// the connection.
    ///
    /// The node joins as [`NodeVersion::current`]; it is refused
    /// ([`StoreError::ProtocolMismatch`]) while a node seen within `alive_s` seconds speaks
    /// another cluster protocol.
    pub async fn coordinator(
        config: &crate::config::StoreConfig,
        node: &str,
        alive_s: u64,
    ) -> Result<Option<Arc<dyn Coordinator>>, StoreError> {
        if !config.is_postgres() {
            return Ok(None);
        }
        let url = config.url.trim();
        let joining = self::postgres::Joining {
            node,
            version: NodeVersion::current(),
            alive_s,
        };
        let coordinator =
            self::postgres::PgCoordinator::connect(url, config.url_setting(), joining).await?;
        Ok(Some(Arc::new(coordinator)))
    }

    /// A sled store in a temporary folder, deleted on drop (for tests).
    pub fn temporary() -> Result<Store, StoreError> {
        SledStore::temporary().map(|s| Store::new(s).named("sled"))
    }

    /// The settings stored for `key`, decoded as `T` (the caller owns the type).
    pub fn get_settings<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        match self.backend.settings_json(key)? {
            Some(bytes) => Ok(Some(decode("settings", &bytes)?)),
            None => Ok(None),
        }
    }

    /// Replaces the settings of `key` with `settings`, stored as JSON. Buffered.
    pub fn put_settings<T: Serialize>(&self, key: &str, settings: &T) -> Result<(), StoreError> {
        self.backend.put_settings_json(key, &encode(settings)?)
    }

    /// [`SessionStore::export_jsonl`] into any writer.
    pub fn export(&self, key: &str, out: &mut impl Write) -> Result<usize, StoreError> {
        self.backend.export_jsonl(key, out)
    }

    /// [`SessionStore::import_jsonl`] from any reader.
    pub fn import(&self, key: &str, mut input: impl BufRead) -> Result<usize, StoreError> {
        self.backend.import_jsonl(key, &mut input)
    }
}

/// The current time as ISO 8601 UTC with milliseconds (`2025-01-02T03:04:05.678Z`).
pub(crate) fn now_iso() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Parses an ISO 8601 timestamp to milliseconds since the epoch.
pub(crate) fn iso_to_ms(iso: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(iso).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_millis() as u64)
}

/// Encodes a record as JSON.
fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Encode(e.to_string()))
}

/// Decodes a JSON record read from `collection`.
fn decode<T: DeserializeOwned>(collection: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        collection,
        reason: e.to_string(),
    })
}
