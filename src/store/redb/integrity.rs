//! A damaged redb file is named, never trusted: every open runs redb's integrity check
//! (`Builder::set_check_integrity_on_open`: the checksum of every page of the committed trees
//! is verified and the allocator state rebuilt), so a file altered outside redb fails with
//! [`StoreError::Damaged`] instead of making redb panic at open, which aborts a release build.
//! A corruption or I/O error met later, by a read or a write, is also reported as
//! [`StoreError::Damaged`] and remembered ([`Damage`], [`BaseStore::damage`](crate::store::ports::BaseStore::damage)), so the gateway stops with the message
//! rather than going on without a store that answers (`chela store check` walks every table).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use redb::{Database, ReadableTable};

use super::{RedbStore, TABLES, db_err, file_in};
use crate::store::error::StoreError;

/// The first damage a store met (its reason), kept for [`RedbStore::damage`].
#[derive(Debug, Default)]
pub(super) struct Damage {
    first: OnceLock<String>,
    path: PathBuf,
}

impl Damage {
    /// Damage of the store in folder `path` (none yet).
    pub(super) fn new(path: &Path) -> Damage {
        Damage {
            first: OnceLock::new(),
            path: path.to_path_buf(),
        }
    }

    /// Passes `result` on; a [`StoreError::Damaged`] in it (made by [`super::db_err`],
    /// which knows no path) is named after this store and remembered.
    pub(super) fn watch<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        result.map_err(|e| match e {
            StoreError::Damaged { reason, .. } => {
                let _ = self.first.set(reason.clone());
                damaged(&self.path, reason)
            }
            e => e,
        })
    }

    /// The first damage met, if any.
    pub(super) fn get(&self) -> Option<StoreError> {
        self.first
            .get()
            .map(|reason| damaged(&self.path, reason.clone()))
    }
}

/// The text of a redb error that says the file is damaged or the disk fails (corruption,
/// an I/O error); the error's text otherwise (a full disk, a file chela may not open: what
/// to do then is not what a damaged store needs).
pub(super) fn damage_reason(e: impl Into<redb::Error>) -> Result<String, String> {
    use std::io::ErrorKind::{
        NotFound, PermissionDenied, QuotaExceeded, ReadOnlyFilesystem, StorageFull,
    };
    match e.into() {
        redb::Error::Io(io)
            if matches!(
                io.kind(),
                NotFound | PermissionDenied | QuotaExceeded | ReadOnlyFilesystem | StorageFull
            ) =>
        {
            Err(redb::Error::Io(io).to_string())
        }
        e @ (redb::Error::Corrupted(_) | redb::Error::Io(_) | redb::Error::PreviousIo) => {
            Ok(e.to_string())
        }
        e => Err(e.to_string()),
    }
}

/// [`StoreError::Damaged`] for the store in folder `path`.
pub(super) fn damaged(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Damaged {
        path: path.to_path_buf(),
        file: file_in(path),
        reason: reason.into(),
    }
}

/// Opens (creating it if needed) the redb file of folder `path`, checking its integrity.
pub(super) fn open(path: &Path, cache_bytes: u64) -> Result<Database, StoreError> {
    Database::builder()
        .set_cache_size(usize::try_from(cache_bytes).unwrap_or(usize::MAX))
        .set_check_integrity_on_open(true)
        .create(file_in(path))
        .map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Locked {
                place: path.display().to_string(),
            },
            redb::DatabaseError::Storage(e) => match damage_reason(e) {
                Ok(reason) => damaged(path, reason),
                Err(reason) => StoreError::Open {
                    path: path.to_path_buf(),
                    reason,
                },
            },
            redb::DatabaseError::RepairAborted => damaged(path, "the repair was aborted"),
            e => StoreError::Open {
                path: path.to_path_buf(),
                reason: e.to_string(),
            },
        })
}

impl RedbStore {
    /// Reads every record of every table; returns the count per table (in [`TABLES`]
    /// order). What `chela store check` runs after the open's integrity check.
    pub(super) fn walk_tables(&self) -> Result<Vec<(&'static str, u64)>, StoreError> {
        let mut counts = Vec::with_capacity(TABLES.len());
        for (name, table) in TABLES {
            let n = self.read(|tx| {
                let t = tx.open_table(table).map_err(db_err)?;
                let mut n = 0u64;
                for kv in t.iter().map_err(db_err)? {
                    let (k, v) = kv.map_err(db_err)?;
                    // Touch both, so every page of the table is read.
                    std::hint::black_box((k.value().len(), v.value().len()));
                    n += 1;
                }
                Ok(n)
            })?;
            counts.push((name, n));
        }
        Ok(counts)
    }
}
