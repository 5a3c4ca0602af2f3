//! The sled backend: [`SledStore`] implements the store traits (`../ports/`) over one sled
//! database, one tree per record kind (see ARCHITECTURE.md, Where state lives).
//!
//! Files follow the concerns: `sessions.rs`, `transcript.rs`, `jsonl.rs` ([`SessionStore`]);
//! `pending.rs`, `dedupe.rs`, `delivery.rs` (the two cross-tree transactions) ([`QueueStore`]);
//! `outbox.rs`, `reply_journal.rs` ([`DeliveryStore`]); `bindings.rs`, `subagents.rs`,
//! `targets.rs` ([`BindingStore`]); `pairing.rs` ([`PairingStore`]); `cursors.rs`,
//! `group_history.rs` ([`CursorStore`]).
//!
//! Buffered writes are short in-memory sled operations, made durable by sled's periodic flush
//! or by [`BaseStore::flush`]: every flush goes through one flusher thread (`flusher.rs`,
//! group commit), which bumps the store's generation and records it in the fsynced
//! `<store.path>.highwater` file (`store/highwater.rs`; sled's copy of the generation in
//! `highwater.rs`), checked at open to refuse a rolled-back store.
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
mod dedupe;
mod delivery;
mod flusher;
mod group_history;
mod highwater;
mod jsonl;
mod outbox;
mod pairing;
mod pending;
mod raw;
mod reply_journal;
mod sessions;
mod subagents;
mod targets;
mod transcript;

use std::path::{Path, PathBuf};

use crate::store::cache::CACHE_CAPACITY;
use crate::store::error::StoreError;
use crate::store::highwater::HighWater;
use crate::store::ports::{BaseStore, StoreFuture};

/// The sled store. Callers hold it through `store::Store`.
pub struct SledStore {
    inner: Inner,
}

/// Folders this process has closed a store in. sled's writer threads may hold a folder's lock
/// for a moment after the store is dropped, so opening such a folder again waits for the lock
/// instead of reporting another process.
static CLOSED_HERE: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
/// How long an open waits for a lock this process itself just released.
const OWN_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

struct Inner {
    /// The store's folder (`None` for a temporary store).
    path: Option<PathBuf>,
    db: sled::Db,
    flusher: flusher::Flusher,
    /// Inbound messages at or before this time (ms) count as seen: set when a rollback was
    /// accepted, 0 otherwise.
    rollback_floor_ms: u64,
    sessions: sled::Tree,
    transcript: sled::Tree,
    entry_ids: sled::Tree,
    settings: sled::Tree,
    pending: sled::Tree,
    dedupe: sled::Tree,
    outbox: sled::Tree,
    outbox_dead: sled::Tree,
    bindings: sled::Tree,
    pairing: sled::Tree,
    cursors: sled::Tree,
    targets: sled::Tree,
    subagents: sled::Tree,
    group_history: sled::Tree,
    reply_journal: sled::Tree,
    /// seq -> JSON `RunRecord` of the run that answered it (pruned after a while).
    finished: sled::Tree,
    /// id -> JSON `CronJob`.
    cron: sled::Tree,
}

impl std::fmt::Debug for SledStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStore").finish_non_exhaustive()
    }
}

impl SledStore {
    /// Opens (creating it and its parent folders if needed) the store in folder `path`.
    ///
    /// Fails with [`StoreError::Locked`] when another process has it open, and with
    /// [`StoreError::RolledBack`] when it lost writes it once made durable.
    pub fn open(path: &Path) -> Result<SledStore, StoreError> {
        SledStore::open_with(path, false, CACHE_CAPACITY)
    }

    /// Like [`SledStore::open`], with sled's page cache bounded to `cache_bytes`; with
    /// `accept_rollback` a rolled-back store is opened anyway (with a warning): it continues
    /// from the recorded generation, and inbound messages older than the last recorded write
    /// are treated as already seen.
    pub fn open_with(
        path: &Path,
        accept_rollback: bool,
        cache_bytes: u64,
    ) -> Result<SledStore, StoreError> {
        std::fs::create_dir_all(path).map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let started = std::time::Instant::now();
        let db = loop {
            match open_db(&path, cache_bytes) {
                Err(StoreError::Locked { .. })
                    if closed_here(&path) && started.elapsed() < OWN_LOCK_WAIT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                other => break other?,
            }
        };
        let (highwater, generation, accepted) = check_highwater(&db, &path, accept_rollback)?;
        let store = SledStore::from_db(db, Some(path), generation, highwater)?;
        if accepted {
            store.settle_rollback()?;
        }
        Ok(store)
    }

    /// Opens a store that lives in a temporary folder and is deleted on drop (for tests).
    pub fn temporary() -> Result<SledStore, StoreError> {
        let db = sled::Config::new()
            .temporary(true)
            .cache_capacity(CACHE_CAPACITY)
            .open()
            .map_err(db_err)?;
        SledStore::from_db(db, None, 0, None)
    }

    fn from_db(
        db: sled::Db,
        path: Option<PathBuf>,
        generation: u64,
        highwater: Option<HighWater>,
    ) -> Result<SledStore, StoreError> {
        let tree = |name: &str| db.open_tree(name).map_err(db_err);
        let inner = Inner {
            sessions: tree("sessions")?,
            transcript: tree("transcript")?,
            entry_ids: tree("entry_ids")?,
            settings: tree("settings")?,
            pending: tree("pending")?,
            dedupe: tree("dedupe")?,
            outbox: tree("outbox")?,
            outbox_dead: tree("outbox_dead")?,
            bindings: tree("bindings")?,
            pairing: tree("pairing")?,
            cursors: tree("cursors")?,
            targets: tree("targets")?,
            subagents: tree("subagents")?,
            group_history: tree("group_history")?,
            reply_journal: tree("reply_journal")?,
            finished: tree("finished")?,
            cron: tree("cron")?,
            rollback_floor_ms: highwater::stored_floor(&db)?,
            flusher: flusher::Flusher::start(db.clone(), generation, highwater)?,
            db,
            path,
        };
        Ok(SledStore { inner })
    }

    /// Writes everything buffered to disk; returns once it is durable. Concurrent callers
    /// share one flush (group commit). The trait's [`BaseStore::flush`] boxes this; the
    /// backend's own methods await it directly.
    async fn sync(&self) -> Result<(), StoreError> {
        self.inner
            .flusher
            .flush()
            .await
            .map_err(|e| StoreError::Db(e.to_string()))
    }
}

impl BaseStore for SledStore {
    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.sync())
    }

    fn walk(&self) -> Result<Vec<(&'static str, u64)>, StoreError> {
        self.walk_trees()
    }
}

/// Maps a sled error to a [`StoreError`] without exposing the sled type.
fn db_err(e: sled::Error) -> StoreError {
    StoreError::Db(e.to_string())
}

/// Maps a failed sled transaction to a [`StoreError`].
fn tx_err(e: sled::transaction::TransactionError<StoreError>) -> StoreError {
    match e {
        sled::transaction::TransactionError::Abort(e) => e,
        sled::transaction::TransactionError::Storage(e) => db_err(e),
    }
}

/// Aborts a sled transaction with `e`.
fn abort<T>(e: StoreError) -> sled::transaction::ConflictableTransactionResult<T, StoreError> {
    Err(sled::transaction::ConflictableTransactionError::Abort(e))
}

/// Opens the sled database in folder `path`.
fn open_db(path: &Path, cache_bytes: u64) -> Result<sled::Db, StoreError> {
    let config = sled::Config::new().path(path).cache_capacity(cache_bytes);
    config.open().map_err(|e| match &e {
        sled::Error::Io(io) if io.to_string().contains("could not acquire lock") => {
            StoreError::Locked {
                place: path.display().to_string(),
            }
        }
        sled::Error::Corruption { .. } => StoreError::Damaged {
            path: path.to_path_buf(),
            file: path.join("db"),
            reason: e.to_string(),
        },
        _ => StoreError::Open {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    })
}

/// Compares the store's generation with its high-water file (see `highwater.rs`); returns the
/// open file, the generation to continue from, and whether a rollback was accepted.
fn check_highwater(
    db: &sled::Db,
    path: &Path,
    accept_rollback: bool,
) -> Result<(Option<HighWater>, u64, bool), StoreError> {
    let found = highwater::stored_generation(db)?;
    let Some(mark_path) = HighWater::path_for(path) else {
        return Ok((None, found, false));
    };
    let (file, mark) = HighWater::open(&mark_path).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        reason: format!("cannot open {}: {e}", mark_path.display()),
    })?;
    match mark {
        Some(mark) if found < mark.generation => {
            if !accept_rollback {
                return Err(StoreError::RolledBack {
                    path: path.to_path_buf(),
                    mark: mark_path,
                    found,
                    recorded: mark.generation,
                });
            }
            tracing::warn!(
                store = %path.display(),
                found,
                recorded = mark.generation,
                "store rollback accepted (--accept-store-rollback): writes were lost; messages older than the last recorded write are not answered again"
            );
            highwater::accept(db, mark)?;
            Ok((Some(file), mark.generation, true))
        }
        _ => Ok((Some(file), found, false)),
    }
}

/// Whether this process has closed a store in `path`.
fn closed_here(path: &Path) -> bool {
    CLOSED_HERE
        .lock()
        .map(|closed| closed.iter().any(|p| p == path))
        .unwrap_or(false)
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(path) = self.path.take()
            && let Ok(mut closed) = CLOSED_HERE.lock()
            && !closed.contains(&path)
        {
            closed.push(path);
        }
    }
}

/// Decodes a big-endian u64 key or value.
fn be_u64(tree: &'static str, bytes: &[u8]) -> Result<u64, StoreError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| StoreError::Corrupt {
        collection: tree,
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
mod tests {
    use super::*;

    #[test]
    fn second_open_of_the_same_folder_is_refused_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("store");
        let _first = SledStore::open(&path).unwrap();
        let err = SledStore::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("is in use by another chela process"),
            "{err}"
        );
    }

    /// No code outside this folder names the sled crate, so a second backend can replace it.
    #[test]
    fn sled_is_named_only_inside_the_sled_backend() {
        fn scan(dir: &Path, skip: &Path, found: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path == skip {
                    continue;
                }
                if path.is_dir() {
                    scan(&path, skip, found);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    // Paths to this module (`self::sled::`, `store::sled::`) are fine.
                    let text = std::fs::read_to_string(&path)
                        .unwrap()
                        .replace("self::sled::", "")
                        .replace("store::sled::", "");
                    if text.contains("sled::") || text.contains("use sled") {
                        found.push(path);
                    }
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut found = Vec::new();
        for top in ["src", "tests", "benches"] {
            scan(&root.join(top), &root.join("src/store/sled"), &mut found);
        }
        assert!(
            found.is_empty(),
            "sled named outside src/store/sled: {found:?}"
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod highwater_tests;

/// The store contract (`../contract_tests/`) run against sled, each check in its own folder.
#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod contract {
    use crate::store::Store;
    use crate::store::contract_tests::{Harness, store_contract_tests};

    /// Sled stores in a temporary folder. `reopen` copies the folder (and its high-water
    /// file) while the store is still open, as a crash would leave it, and opens the copy:
    /// only what the store had made durable by then survives.
    struct SledHarness {
        dir: tempfile::TempDir,
        opened: std::sync::atomic::AtomicUsize,
    }

    impl SledHarness {
        fn new() -> SledHarness {
            SledHarness {
                dir: tempfile::tempdir().unwrap(),
                opened: std::sync::atomic::AtomicUsize::new(0),
            }
        }

        fn path(&self, n: usize) -> std::path::PathBuf {
            self.dir.path().join(format!("data{n}"))
        }
    }

    impl Harness for SledHarness {
        fn fresh(&self) -> Store {
            Store::open(&self.path(0)).unwrap()
        }

        fn reopen(&self, store: Store) -> Store {
            use std::sync::atomic::Ordering;
            let n = self.opened.fetch_add(1, Ordering::SeqCst);
            let (from, to) = (self.path(n), self.path(n + 1));
            let mark = |p: &std::path::Path| p.with_extension("highwater");
            std::fs::copy(mark(&from), mark(&to)).unwrap();
            copy_dir(&from, &to);
            drop(store);
            Store::open(&to).unwrap()
        }
    }

    fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_dir(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }

    store_contract_tests!(SledHarness::new());
}
