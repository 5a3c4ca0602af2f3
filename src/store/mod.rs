//! The store: everything that must survive a restart (SPEC 6; ARCHITECTURE.md "Where state
//! lives"), behind traits.
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
//! Three backends implement the traits and pass the contract tests (`contract_tests/`):
//! [`RedbStore`] (`redb/`, one redb table per record kind in one file, the embedded default),
//! [`SledStore`] (`sled/`, one sled tree per record kind; still selectable, and kept for a
//! folder that holds a sled store: `engine.rs` picks the engine from `[store] engine`) and
//! [`PgStore`] (`postgres/`, one PostgreSQL table per record kind, chosen by `[store] url`).
//! No backend type leaves them: callers see the typed records and [`StoreError`].
//! [`Store::open_config`] chooses the backend where the store is opened; nothing above the
//! store changes.
//!
//! What the backends share has a file of its own, which they import from directly, never
//! from this one: the error (`error.rs`), records as JSON (`codec.rs`), timestamps
//! (`timestamp.rs`), the default page cache size (`cache.rs`), the high-water file
//! (`highwater.rs`) and the traits (`ports/`). This file declares the backends, re-exports
//! what callers use and holds the [`Store`] handle.

mod cache;
mod codec;
mod engine;
mod entry;
mod error;
pub mod foreign;
mod highwater;
mod import;
pub mod migrate;
pub mod pi_export;
mod ports;
#[cfg(feature = "postgres")]
mod postgres;
mod questions;
mod redb;
mod show;
#[cfg(feature = "sled")]
mod sled;
mod timestamp;

#[cfg(test)]
pub(crate) mod contract_tests;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use codec::{decode, encode};

#[cfg(feature = "postgres")]
pub use self::postgres::{PgStore, SCHEMA_VERSION, Tenancy};
pub use self::redb::RedbStore;
#[cfg(feature = "sled")]
pub use self::sled::SledStore;
pub use cache::CACHE_CAPACITY;
pub use engine::{holds_redb, holds_sled, resolve as resolve_engine};
pub use entry::{Entry, EntryKind, Item, SessionHeader, TRANSCRIPT_VERSION};
pub use error::StoreError;
#[cfg(test)]
pub(crate) use ports::test_support;
pub use ports::{
    Backend, BaseStore, Binding, BindingStore, CODE_TTL_MS, Coordinator, CronJob, CronOrigin,
    CronStore, CursorStore, DeliveryStore, Lease, MAX_EVENT_PAYLOAD, MAX_PENDING, NodeInfo,
    NodeVersion, OutboxEntry, PARTITIONS, PROTOCOL, PairingOutcome, PairingRequest, PairingStore,
    PendingTurn, QueueStore, ReplyJournal, SUMMARY_HEADING, SessionMeta, SessionStore, StoreFuture,
    SubagentLink, SubagentState, WindowMessage, dedupe_key, partition_of,
};
pub use questions::OpenQuestion;
pub use show::render_entry;

/// The high-water file beside store folder `store` (`<store>.highwater`), if it has a name.
pub fn highwater_path_for(store: &Path) -> Option<PathBuf> {
    highwater::HighWater::path_for(store)
}

/// The error of a build without PostgreSQL asked for `config.url`.
#[cfg(not(feature = "postgres"))]
fn postgres_not_built(config: &crate::config::StoreConfig) -> StoreError {
    StoreError::NotBuilt {
        setting: config.url_setting().to_owned(),
        part: "the PostgreSQL store",
        feature: "postgres",
    }
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
    #[cfg(feature = "sled")]
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        SledStore::open(path).map(|s| Store::new(s).named("sled"))
    }

    /// Opens the sled store in folder `path` with a page cache of `cache_bytes`, accepting a
    /// rolled-back store when `accept_rollback` ([`SledStore::open_with`]).
    #[cfg(feature = "sled")]
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
        let shared = config.cluster.enabled;
        let config = &config.store;
        if config.url.trim().is_empty() {
            return engine::open_embedded(config);
        }
        // The local files beside `store.path` (RPC discovery, logs) need its folder, which
        // no sled store creates here.
        if let Some(parent) = config.path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        Self::open_postgres(config, shared)
    }

    /// Opens the PostgreSQL store `config.url` names, shared with other nodes when `shared`.
    #[cfg(feature = "postgres")]
    fn open_postgres(
        config: &crate::config::StoreConfig,
        shared: bool,
    ) -> Result<Store, StoreError> {
        let tenancy = match shared {
            true => Tenancy::Shared,
            false => Tenancy::Sole,
        };
        PgStore::open_as(config.url.trim(), config.url_setting(), tenancy)
            .map(|s| Store::new(s).named("postgresql"))
    }

    /// A build without PostgreSQL refuses `config.url`, naming the setting and the feature.
    #[cfg(not(feature = "postgres"))]
    fn open_postgres(config: &crate::config::StoreConfig, _: bool) -> Result<Store, StoreError> {
        Err(postgres_not_built(config))
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
        #[cfg(not(feature = "postgres"))]
        {
            let _ = (node, alive_s);
            Err(postgres_not_built(config))
        }
        #[cfg(feature = "postgres")]
        {
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
    }

    /// A sled store in a temporary folder, deleted on drop (for tests).
    #[cfg(feature = "sled")]
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
