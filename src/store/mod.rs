//! The sled store: typed trees for everything that must survive a restart (DESIGN 4, SPEC 6).
//!
//! [`Store`] is a cheap, cloneable handle. No sled type leaves this module: callers see typed
//! records ([`SessionMeta`], [`Entry`], [`PendingTurn`], [`OutboxEntry`]) and [`StoreError`].
//!
//! - sessions: [`SessionMeta`] per session key, and generic per-session settings.
//! - transcript: version-4 entries (pi/OpenClaw JSONL schema), the model window.
//! - jsonl: byte-exact export and validated import.
//! - show: a readable rendering for `chela sessions show`.
//! - pending: the durable queue of accepted-but-not-yet-run turns.
//! - dedupe: inbound dedupe marks.
//! - outbox: final replies recorded before they are sent, dead letters.
//! - cursors: platform cursors (Telegram update offset).
//! - bindings: conversations bound to coding-agent (ACP) sessions.
//! - targets: where each session last replied (for the `message` tool).
//! - subagents: sub-agent sessions and their parents (`sessions_spawn` with `runtime: "subagent"`).
//! - reply_journal: the chat messages each unfinished reply has sent, taken back after a crash.
//!
//! Writes that must be durable before the caller goes on (`enqueue`, `record_final`,
//! `set_cursor`) are async and flush with sled's `flush_async`; everything else is a short
//! in-memory sled operation, made durable by sled's periodic flush or by [`Store::flush`].

mod bindings;
mod cursors;
mod dedupe;
mod delivery;
mod entry;
mod flusher;
mod group_history;
mod highwater;
mod jsonl;
mod outbox;
mod pairing;
mod pending;
mod reply_journal;
mod sessions;
mod show;
mod subagents;
mod targets;
mod transcript;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use bindings::Binding;
pub use dedupe::dedupe_key;
pub use entry::{Entry, EntryKind, Item, SessionHeader, TRANSCRIPT_VERSION};
pub use outbox::OutboxEntry;
pub use pairing::{PairingOutcome, PairingRequest};
pub use pending::PendingTurn;
pub use reply_journal::ReplyJournal;
pub use sessions::SessionMeta;
pub use subagents::{SubagentLink, SubagentState};
pub use transcript::{SUMMARY_HEADING, WindowMessage};

/// The most memory sled's page cache may use, in bytes (sled's default is 1 GiB), unless
/// `[store] cache_mb` says otherwise: small, since per-session memory must not grow with
/// transcripts.
pub const CACHE_CAPACITY: u64 = 8 * 1024 * 1024;

/// The high-water file beside store folder `store` (`<store>.highwater`), if it has a name.
pub fn highwater_path_for(store: &Path) -> Option<PathBuf> {
    highwater::HighWater::path_for(store)
}

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process holds the store's lock.
    #[error("the store at {} is in use by another chela process", path.display())]
    Locked {
        /// The store folder.
        path: PathBuf,
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
    #[error("corrupt record in the {tree} tree: {reason}")]
    Corrupt {
        /// The tree holding the record.
        tree: &'static str,
        /// The decoding error.
        reason: String,
    },
    /// A record could not be encoded.
    #[error("cannot encode a record: {0}")]
    Encode(String),
    /// The session key has no session yet (see [`Store::ensure_session`]).
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
    /// by an older copy (see `highwater.rs`).
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
    /// Reading an import or writing an export failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// A handle on the store. Cloning is cheap (one `Arc`).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
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
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").finish_non_exhaustive()
    }
}

impl Store {
    /// Opens (creating it and its parent folders if needed) the store in folder `path`.
    ///
    /// Fails with [`StoreError::Locked`] when another process has it open, and with
    /// [`StoreError::RolledBack`] when it lost writes it once made durable.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, false, CACHE_CAPACITY)
    }

    /// Like [`Store::open`], with sled's page cache bounded to `cache_bytes`; with
    /// `accept_rollback` a rolled-back store is opened anyway (with a warning): it continues
    /// from the recorded generation, and inbound messages older than the last recorded write
    /// are treated as already seen.
    pub fn open_with(
        path: &Path,
        accept_rollback: bool,
        cache_bytes: u64,
    ) -> Result<Store, StoreError> {
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
        let store = Store::from_db(db, Some(path), generation, highwater)?;
        if accepted {
            store.settle_rollback()?;
        }
        Ok(store)
    }

    /// Opens a store that lives in a temporary folder and is deleted on drop (for tests).
    pub fn temporary() -> Result<Store, StoreError> {
        let db = sled::Config::new()
            .temporary(true)
            .cache_capacity(CACHE_CAPACITY)
            .open()
            .map_err(db_err)?;
        Store::from_db(db, None, 0, None)
    }

    fn from_db(
        db: sled::Db,
        path: Option<PathBuf>,
        generation: u64,
        highwater: Option<highwater::HighWater>,
    ) -> Result<Store, StoreError> {
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
            rollback_floor_ms: highwater::stored_floor(&db)?,
            flusher: flusher::Flusher::start(db.clone(), generation, highwater)?,
            db,
            path,
        };
        Ok(Store {
            inner: Arc::new(inner),
        })
    }

    /// Writes everything buffered to disk; returns once it is durable. Concurrent callers
    /// share one flush (group commit).
    pub async fn flush(&self) -> Result<(), StoreError> {
        self.inner.flusher.flush().await.map_err(StoreError::Db)
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
                path: path.to_path_buf(),
            }
        }
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
) -> Result<(Option<highwater::HighWater>, u64, bool), StoreError> {
    let found = highwater::stored_generation(db)?;
    let Some(mark_path) = highwater::HighWater::path_for(path) else {
        return Ok((None, found, false));
    };
    let (file, mark) = highwater::HighWater::open(&mark_path).map_err(|e| StoreError::Open {
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

/// Encodes a record as JSON.
fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(value).map_err(|e| StoreError::Encode(e.to_string()))
}

/// Decodes a JSON record read from `tree`.
fn decode<T: DeserializeOwned>(tree: &'static str, bytes: &[u8]) -> Result<T, StoreError> {
    serde_json::from_slice(bytes).map_err(|e| StoreError::Corrupt {
        tree,
        reason: e.to_string(),
    })
}

/// Decodes a big-endian u64 key or value.
fn be_u64(tree: &'static str, bytes: &[u8]) -> Result<u64, StoreError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| StoreError::Corrupt {
        tree,
        reason: format!("expected 8 bytes, found {}", bytes.len()),
    })?;
    Ok(u64::from_be_bytes(arr))
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    crate::domain::message::now_ms()
}

/// The current time as ISO 8601 UTC with milliseconds (`2025-01-02T03:04:05.678Z`).
fn now_iso() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Parses an ISO 8601 timestamp to milliseconds since the epoch.
fn iso_to_ms(iso: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(iso).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_millis() as u64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn second_open_of_the_same_folder_is_refused_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested").join("store");
        let _first = Store::open(&path).unwrap();
        let err = Store::open(&path).unwrap_err();
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
        assert!(
            err.to_string()
                .contains("is in use by another chela process"),
            "{err}"
        );
    }

    #[test]
    fn iso_timestamps_have_millis_and_parse_back() {
        let iso = now_iso();
        assert!(iso.ends_with('Z') && iso.len() == 24, "{iso}");
        assert!(iso_to_ms(&iso).is_some());
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod highwater_tests;
