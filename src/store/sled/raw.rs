//! Raw access to the sled trees for `chela store migrate` (`../migrate.rs`): every record of a
//! tree as stored bytes, and the store's counters.

use super::{SledStore, db_err};
use crate::store::error::StoreError;

/// A stored record: key and value bytes.
type Record = (Vec<u8>, Vec<u8>);

/// The store's counters: the next id, the generation, the accepted rollback floor.
pub(crate) struct Counters {
    /// An id larger than every id handed out.
    pub next_id: u64,
    /// The store's generation (see `highwater.rs`).
    pub generation: u64,
    /// The accepted rollback floor (ms; 0: none).
    pub floor_ms: u64,
}

impl SledStore {
    /// Every record of tree `name`, in key order.
    pub(crate) fn raw_records(
        &self,
        name: &str,
    ) -> Result<impl Iterator<Item = Result<Record, StoreError>>, StoreError> {
        let tree = self.inner.db.open_tree(name).map_err(db_err)?;
        Ok(tree.iter().map(|kv| {
            let (k, v) = kv.map_err(db_err)?;
            Ok((k.to_vec(), v.to_vec()))
        }))
    }

    /// Reads every record of every tree; returns how many each holds (`chela store check`;
    /// sled checks each record's checksum as it reads it).
    pub(crate) fn walk_trees(&self) -> Result<Vec<(&'static str, u64)>, StoreError> {
        let mut counts = Vec::new();
        for (name, _) in crate::store::redb::TABLES {
            if name == "meta" {
                continue; // sled keeps the counters elsewhere
            }
            let mut n = 0u64;
            for record in self.raw_records(name)? {
                record?;
                n += 1;
            }
            counts.push((name, n));
        }
        Ok(counts)
    }

    /// The store's counters.
    pub(crate) fn counters(&self) -> Result<Counters, StoreError> {
        Ok(Counters {
            next_id: self
                .inner
                .db
                .generate_id()
                .map_err(db_err)?
                .saturating_add(1),
            generation: super::highwater::stored_generation(&self.inner.db)?,
            floor_ms: super::highwater::stored_floor(&self.inner.db)?,
        })
    }
}
