//! Raw loading for `chela store migrate` (`../migrate.rs`): records written as they were
//! stored by the sled backend (same keys, same values), counted back, and the counters.

use redb::ReadableTableMetadata;

use super::{META, NEXT_ID_KEY, RedbStore, TABLES, db_err};
use crate::store::error::StoreError;

/// How many records one transaction loads.
const BATCH: usize = 10_000;

impl RedbStore {
    /// Writes `records` into table `name` (batched transactions); returns how many.
    pub(crate) fn load_records(
        &self,
        name: &str,
        records: impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), StoreError>>,
    ) -> Result<u64, StoreError> {
        let table = table(name)?;
        let mut records = records.peekable();
        let mut loaded = 0;
        while records.peek().is_some() {
            loaded += self.write(|tx| {
                let mut t = tx.open_table(table).map_err(db_err)?;
                let mut n = 0;
                for record in records.by_ref().take(BATCH) {
                    let (k, v) = record?;
                    t.insert(k.as_slice(), v.as_slice()).map_err(db_err)?;
                    n += 1;
                }
                Ok(n)
            })?;
        }
        Ok(loaded)
    }

    /// How many records table `name` holds.
    pub(crate) fn count(&self, name: &str) -> Result<u64, StoreError> {
        let table = table(name)?;
        self.read(|tx| tx.open_table(table).map_err(db_err)?.len().map_err(db_err))
    }
}

/// Sets the counters carried over from another store in the closed redb store of folder
/// `path`, durably.
pub(crate) fn write_counters(
    path: &std::path::Path,
    next_id: u64,
    generation: u64,
    floor_ms: u64,
) -> Result<(), StoreError> {
    let db = redb::Database::open(super::file_in(path)).map_err(db_err)?;
    let tx = db.begin_write().map_err(db_err)?;
    {
        let mut meta = tx.open_table(META).map_err(db_err)?;
        for (key, value) in [
            (NEXT_ID_KEY, next_id),
            (&b"generation"[..], generation),
            (&b"rollback-floor-ms"[..], floor_ms),
        ] {
            meta.insert(key, &value.to_be_bytes()[..]).map_err(db_err)?;
        }
    }
    tx.commit().map_err(db_err)
}

/// The table named `name`.
fn table(name: &str) -> Result<super::Bytes, StoreError> {
    TABLES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| StoreError::Db(format!("no table {name}")))
}
