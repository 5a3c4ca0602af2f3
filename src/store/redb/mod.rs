//! The redb backend: [`RedbStore`] implements the store traits (`../ports/`) over one redb
//! file, `<store.path>/chela.redb`, one table per record kind with the same keys and the same
//! JSON values as the sled backend (see ARCHITECTURE.md, Where state lives).
//!
//! Files follow the concerns: `sessions.rs`, `transcript.rs`, `jsonl.rs` ([`SessionStore`]);
//! `queue.rs` ([`QueueStore`]); `delivery.rs` ([`DeliveryStore`]); `bindings.rs`
//! ([`BindingStore`]); `pairing.rs` ([`PairingStore`]); `cursors.rs` ([`CursorStore`]).
//!
//! Every write is one redb write transaction committed with `Durability::None`: visible to
//! every later read at once, held in memory until a durable commit. Durable commits come from
//! one flusher thread (`flusher.rs`, group commit: all waiting callers share one fsync, and a
//! periodic commit bounds what a crash can lose, like sled's flush every 500 ms), which bumps
//! the store's generation and records it in the fsynced `<store.path>.highwater` file, checked
//! at open to refuse a rolled-back store (`highwater.rs`). After a minute without writes the
//! flusher compacts the file, so it gives back the pages the load left free.
//!
//! [`SessionStore`]: crate::store::ports::SessionStore
//! [`QueueStore`]: crate::store::ports::QueueStore
//! [`DeliveryStore`]: crate::store::ports::DeliveryStore
//! [`BindingStore`]: crate::store::ports::BindingStore
//! [`PairingStore`]: crate::store::ports::PairingStore
//! [`CursorStore`]: crate::store::ports::CursorStore

mod bindings;
mod cron;
mod cursors;
mod delivery;
mod flusher;
mod highwater;
mod ids;
mod integrity;
mod jsonl;
mod pairing;
mod queue;
#[cfg(feature = "sled")]
pub(crate) mod raw;
mod sessions;
mod transcript;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use redb::{
    Database, Durability, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
    WriteTransaction,
};

use crate::store::error::StoreError;
use crate::store::ports::{BaseStore, StoreFuture};

/// The name of the redb file inside the store folder.
pub const FILE_NAME: &str = "chela.redb";

/// A stored record: key and value bytes.
pub(crate) type Record = (Vec<u8>, Vec<u8>);

/// A table of byte keys and byte values (every table: keys and values as in the sled backend).
type Bytes = TableDefinition<'static, &'static [u8], &'static [u8]>;

const SESSIONS: Bytes = TableDefinition::new("sessions");
const TRANSCRIPT: Bytes = TableDefinition::new("transcript");
const ENTRY_IDS: Bytes = TableDefinition::new("entry_ids");
const SETTINGS: Bytes = TableDefinition::new("settings");
const PENDING: Bytes = TableDefinition::new("pending");
const DEDUPE: Bytes = TableDefinition::new("dedupe");
const OUTBOX: Bytes = TableDefinition::new("outbox");
const OUTBOX_DEAD: Bytes = TableDefinition::new("outbox_dead");
const BINDINGS: Bytes = TableDefinition::new("bindings");
const PAIRING: Bytes = TableDefinition::new("pairing");
const CURSORS: Bytes = TableDefinition::new("cursors");
const TARGETS: Bytes = TableDefinition::new("targets");
const SUBAGENTS: Bytes = TableDefinition::new("subagents");
const GROUP_HISTORY: Bytes = TableDefinition::new("group_history");
const REPLY_JOURNAL: Bytes = TableDefinition::new("reply_journal");
/// seq -> JSON `RunRecord` of the run that answered it (pruned after a while).
const FINISHED: Bytes = TableDefinition::new("finished");
/// id -> JSON `CronJob`.
const CRON: Bytes = TableDefinition::new("cron");
/// The store's own counters: generation, rollback floor, next id.
const META: Bytes = TableDefinition::new("meta");

/// Every table, by name (what `store migrate` copies and counts).
pub(crate) const TABLES: [(&str, Bytes); 18] = [
    ("sessions", SESSIONS),
    ("transcript", TRANSCRIPT),
    ("entry_ids", ENTRY_IDS),
    ("settings", SETTINGS),
    ("pending", PENDING),
    ("dedupe", DEDUPE),
    ("outbox", OUTBOX),
    ("outbox_dead", OUTBOX_DEAD),
    ("bindings", BINDINGS),
    ("pairing", PAIRING),
    ("cursors", CURSORS),
    ("targets", TARGETS),
    ("subagents", SUBAGENTS),
    ("group_history", GROUP_HISTORY),
    ("reply_journal", REPLY_JOURNAL),
    ("finished", FINISHED),
    ("cron", CRON),
    ("meta", META),
];

/// The `meta` key of the next id handed out (pending seqs and outbox ids).
const NEXT_ID_KEY: &[u8] = b"next-id";

/// The redb store. Callers hold it through `store::Store`.
pub struct RedbStore {
    inner: Inner,
}

/// What the flusher thread shares with the store.
struct Shared {
    /// The database. Every transaction runs under the read lock; compaction takes the write
    /// lock, so it never meets an open transaction.
    db: RwLock<Database>,
    /// Set by every commit that is not durable yet; cleared by the flusher's durable commit.
    dirty: AtomicBool,
    /// The first damage a read or a write met (see `integrity.rs`).
    damage: integrity::Damage,
}

struct Inner {
    shared: Arc<Shared>,
    flusher: flusher::Flusher,
    /// Inbound messages at or before this time (ms) count as seen: set when a rollback was
    /// accepted, 0 otherwise.
    rollback_floor_ms: u64,
    /// The open flag of a store on disk (`ids.rs`): last, dropped after the flusher's last
    /// commit.
    open_flag: Option<ids::OpenFlag>,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore").finish_non_exhaustive()
    }
}

/// The redb file of store folder `path`.
pub fn file_in(path: &Path) -> PathBuf {
    path.join(FILE_NAME)
}

impl RedbStore {
    /// Opens (creating it and its parent folders if needed) the store in folder `path`, with a
    /// cache of `cache_bytes`; with `accept_rollback` a rolled-back store is opened anyway
    /// (with a warning), like `SledStore::open_with`.
    ///
    /// Fails with [`StoreError::Locked`] when another process has it open, and with
    /// [`StoreError::RolledBack`] when it lost writes it once made durable.
    pub fn open_with(
        path: &Path,
        accept_rollback: bool,
        cache_bytes: u64,
    ) -> Result<RedbStore, StoreError> {
        let open_err = |reason: String| StoreError::Open {
            path: path.to_path_buf(),
            reason,
        };
        std::fs::create_dir_all(path).map_err(|e| open_err(e.to_string()))?;
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let db = integrity::open(&path, cache_bytes)?;
        let damage = integrity::Damage::new(&path);
        damage.watch(create_tables(&db))?;
        let (mark, generation, accepted) =
            damage.watch(highwater::check(&db, &path, accept_rollback))?;
        let flag = damage.watch(ids::mark_open(&db, &path))?;
        let mut store = RedbStore::from_db(db, generation, mark, damage)?;
        let shared = store.inner.shared.clone();
        store.inner.open_flag = Some(ids::OpenFlag::new(flag, shared));
        if accepted {
            store.settle_rollback()?;
            // Durable before anything else happens: a crash now must not bring back the
            // turns and replies the settling dropped (the generation already says settled).
            store.durable_now()?;
        }
        Ok(store)
    }

    /// A store held in memory only (for tests).
    pub fn temporary() -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .create_with_backend(redb::backends::InMemoryBackend::new())
            .map_err(db_err)?;
        create_tables(&db)?;
        RedbStore::from_db(
            db,
            0,
            None,
            integrity::Damage::new(Path::new("(in memory)")),
        )
    }

    /// A store over `backend` (for tests: a disk that fails).
    #[cfg(test)]
    fn over(backend: impl redb::StorageBackend) -> Result<RedbStore, StoreError> {
        let db = Database::builder()
            .create_with_backend(backend)
            .map_err(db_err)?;
        create_tables(&db)?;
        RedbStore::from_db(db, 0, None, integrity::Damage::new(Path::new("(test)")))
    }

    fn from_db(
        db: Database,
        generation: u64,
        mark: Option<crate::store::highwater::HighWater>,
        damage: integrity::Damage,
    ) -> Result<RedbStore, StoreError> {
        let rollback_floor_ms = damage.watch(highwater::stored_floor(&db))?;
        let shared = Arc::new(Shared {
            db: RwLock::new(db),
            dirty: AtomicBool::new(false),
            damage,
        });
        let flusher = flusher::Flusher::start(shared.clone(), generation, mark)?;
        Ok(RedbStore {
            inner: Inner {
                shared,
                flusher,
                rollback_floor_ms,
                open_flag: None,
            },
        })
    }

    /// The database, under the read lock (see [`Shared::db`]).
    fn db(&self) -> Result<RwLockReadGuard<'_, Database>, StoreError> {
        // A panic while the lock was held (in a compaction) leaves redb consistent: its
        // transactions commit whole or not at all, so the guard is taken back.
        Ok(self
            .inner
            .shared
            .db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Runs `f` in one write transaction, committed without an fsync (visible at once,
    /// durable at the next flush). An error from `f` aborts the transaction: nothing of it
    /// is kept.
    fn write<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.inner.shared.damage.watch(self.write_unwatched(f))
    }

    /// [`RedbStore::write`] without noting damage.
    fn write_unwatched<T>(
        &self,
        f: impl FnOnce(&WriteTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db()?;
        let mut tx = db.begin_write().map_err(db_err)?;
        tx.set_durability(Durability::None).map_err(db_err)?;
        let out = f(&tx)?;
        tx.commit().map_err(db_err)?;
        self.inner.shared.dirty.store(true, Ordering::Release);
        Ok(out)
    }

    /// Makes every commit so far durable at once (an empty commit with an fsync), without
    /// waiting for the flusher.
    fn durable_now(&self) -> Result<(), StoreError> {
        let db = self.db()?;
        let commit = || {
            let mut tx = db.begin_write().map_err(db_err)?;
            tx.set_durability(Durability::Immediate).map_err(db_err)?;
            tx.commit().map_err(db_err)
        };
        self.inner.shared.damage.watch(commit())
    }

    /// Runs `f` in one read transaction (a snapshot of every commit so far).
    fn read<T>(
        &self,
        f: impl FnOnce(&ReadTransaction) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db()?;
        let run = || f(&db.begin_read().map_err(db_err)?);
        self.inner.shared.damage.watch(run())
    }

    /// The value of `key` in `table`.
    fn get(&self, table: Bytes, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.read(|tx| get(&tx.open_table(table).map_err(db_err)?, key))
    }

    /// Every record of `table` whose key starts with `prefix`, in key order.
    fn scan(&self, table: Bytes, prefix: &[u8]) -> Result<Vec<Record>, StoreError> {
        self.read(|tx| scan(&tx.open_table(table).map_err(db_err)?, prefix))
    }

    /// Sets `key` in `table` to `value` (buffered).
    fn insert(&self, table: Bytes, key: &[u8], value: &[u8]) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.open_table(table)
                .map_err(db_err)?
                .insert(key, value)
                .map_err(db_err)?;
            Ok(())
        })
    }

    /// Removes `key` from `table` (buffered); returns the old value.
    fn remove(&self, table: Bytes, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.write(|tx| {
            let mut t = tx.open_table(table).map_err(db_err)?;
            let old = t.remove(key).map_err(db_err)?;
            Ok(old.map(|v| v.value().to_vec()))
        })
    }

    /// Writes everything committed so far to disk; returns once it is durable. Concurrent
    /// callers share one fsync (group commit).
    async fn sync(&self) -> Result<(), StoreError> {
        let flushed = self.inner.flusher.flush().await;
        match (flushed, self.damage()) {
            // The flusher's commit met the damage (noted there): say what it is.
            (Err(_), Some(damage)) => Err(damage),
            (flushed, _) => flushed.map_err(|e| StoreError::Db(e.to_string())),
        }
    }
}

impl BaseStore for RedbStore {
    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.sync())
    }

    fn damage(&self) -> Option<StoreError> {
        self.inner.shared.damage.get()
    }

    fn walk(&self) -> Result<Vec<(&'static str, u64)>, StoreError> {
        self.walk_tables()
    }
}

/// Creates every table, so read transactions find them all.
fn create_tables(db: &Database) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(db_err)?;
    for (_, table) in TABLES {
        tx.open_table(table).map_err(db_err)?;
    }
    tx.commit().map_err(db_err)
}

/// The value of `key` in an open table.
fn get(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    key: &[u8],
) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(table.get(key).map_err(db_err)?.map(|v| v.value().to_vec()))
}

/// Every record of an open table whose key starts with `prefix`, in key order.
fn scan(
    table: &impl ReadableTable<&'static [u8], &'static [u8]>,
    prefix: &[u8],
) -> Result<Vec<Record>, StoreError> {
    let mut out = Vec::new();
    for kv in table.range::<&[u8]>(prefix..).map_err(db_err)? {
        let (k, v) = kv.map_err(db_err)?;
        if !k.value().starts_with(prefix) {
            break;
        }
        out.push((k.value().to_vec(), v.value().to_vec()));
    }
    Ok(out)
}

/// Hands out the next id inside write transaction `tx` (ids increase and are never reused:
/// a start after a crash moves past the ones lost with it, `ids.rs`).
fn next_id(tx: &WriteTransaction) -> Result<u64, StoreError> {
    let mut meta = tx.open_table(META).map_err(db_err)?;
    let id = match get(&meta, NEXT_ID_KEY)? {
        Some(v) => be_u64("meta", &v)?,
        None => 1,
    };
    meta.insert(NEXT_ID_KEY, &id.saturating_add(1).to_be_bytes()[..])
        .map_err(db_err)?;
    Ok(id)
}

/// Maps a redb error to a [`StoreError`] without exposing the redb type: a damaged file or a
/// failing disk becomes [`StoreError::Damaged`] (named after the store by
/// `integrity::Damage::watch`, which every read and write passes through).
fn db_err(e: impl Into<redb::Error>) -> StoreError {
    match integrity::damage_reason(e) {
        Ok(reason) => StoreError::Damaged {
            path: PathBuf::new(),
            file: PathBuf::new(),
            reason,
        },
        Err(text) => StoreError::Db(text),
    }
}

/// Decodes a big-endian u64 key or value.
fn be_u64(table: &'static str, bytes: &[u8]) -> Result<u64, StoreError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| StoreError::Corrupt {
        collection: table,
        reason: format!("expected 8 bytes, found {}", bytes.len()),
    })?;
    Ok(u64::from_be_bytes(arr))
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    crate::domain::message::now_ms()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
