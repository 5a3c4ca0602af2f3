//! sled's side of the high-water mark ([`crate::store::highwater`]): the generation and the
//! rollback floor kept inside sled's default tree, and what an accepted rollback settles.

use super::db_err;
use crate::store::error::StoreError;
use crate::store::highwater::Mark;
use crate::store::ports::{DeliveryStore, QueueStore};

/// The sled key (default tree) of the store's generation.
const GENERATION_KEY: &[u8] = b"chela:generation";
/// The sled key (default tree) of the rollback floor (see [`super::SledStore::open_with`]).
const FLOOR_KEY: &[u8] = b"chela:rollback-floor-ms";

/// The generation stored in sled (0 for a store that never flushed one).
pub(super) fn stored_generation(db: &sled::Db) -> Result<u64, StoreError> {
    read_u64(db, GENERATION_KEY)
}

/// Writes the next generation into sled (not yet flushed); returns it.
pub(super) fn bump_generation(db: &sled::Db, current: u64) -> Result<u64, StoreError> {
    let next = current.saturating_add(1);
    db.insert(GENERATION_KEY, &next.to_be_bytes()[..])
        .map_err(db_err)?;
    Ok(next)
}

/// The rollback floor stored in sled (0: none).
pub(super) fn stored_floor(db: &sled::Db) -> Result<u64, StoreError> {
    read_u64(db, FLOOR_KEY)
}

/// Stores the rollback floor and the generation to continue from, and flushes.
pub(super) fn accept(db: &sled::Db, mark: Mark) -> Result<(), StoreError> {
    let floor = stored_floor(db)?.max(mark.at_ms);
    db.insert(FLOOR_KEY, &floor.to_be_bytes()[..])
        .map_err(db_err)?;
    db.insert(GENERATION_KEY, &mark.generation.to_be_bytes()[..])
        .map_err(db_err)?;
    db.flush().map_err(db_err)?;
    Ok(())
}

impl super::SledStore {
    /// After an accepted rollback: drops the pending turns and dead-letters the undelivered
    /// replies from before the floor; the lost writes may have answered them already.
    pub(super) fn settle_rollback(&self) -> Result<(), StoreError> {
        let floor = self.inner.rollback_floor_ms;
        let mut dropped = 0;
        for (seq, turn) in self.all_pending()? {
            if turn.queued_ms <= floor && self.remove_pending(seq)? {
                dropped += 1;
            }
        }
        let mut dead = 0;
        for entry in self.undelivered()? {
            if entry.created_ms <= floor && self.dead_letter(entry.id)? {
                dead += 1;
            }
        }
        self.inner.db.flush().map_err(db_err)?;
        if dropped + dead > 0 {
            tracing::warn!(
                dropped_turns = dropped,
                dead_lettered_replies = dead,
                "store rollback: turns and replies from before the lost writes are not run or sent again"
            );
        }
        Ok(())
    }
}

fn read_u64(db: &sled::Db, key: &[u8]) -> Result<u64, StoreError> {
    match db.get(key).map_err(db_err)? {
        Some(v) => super::be_u64("default", &v),
        None => Ok(0),
    }
}
