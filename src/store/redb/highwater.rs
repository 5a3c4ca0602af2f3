//! Rollback detection for the redb store: the same scheme as the sled backend, around the
//! shared high-water file (`../highwater.rs`). The store keeps a generation in its `meta`
//! table, bumped by every durable commit; the fsynced `<store.path>.highwater` file records
//! the newest generation known durable. A store found at open with a smaller generation than
//! its mark went backwards (a damaged or replaced file; an emptied file starts at 0) and is
//! refused.

use std::path::Path;

use redb::{Database, ReadableDatabase};

use super::{META, RedbStore, be_u64, db_err, get};
use crate::store::error::StoreError;
use crate::store::highwater::{HighWater, Mark};
use crate::store::ports::{DeliveryStore, QueueStore};

/// The `meta` key of the store's generation.
const GENERATION_KEY: &[u8] = b"generation";
/// The `meta` key of the accepted rollback's floor (ms).
const FLOOR_KEY: &[u8] = b"rollback-floor-ms";

/// Reads a `meta` counter (0 when missing).
fn read_meta(db: &Database, key: &[u8]) -> Result<u64, StoreError> {
    let tx = db.begin_read().map_err(db_err)?;
    let meta = tx.open_table(META).map_err(db_err)?;
    match get(&meta, key)? {
        Some(v) => be_u64("meta", &v),
        None => Ok(0),
    }
}

/// The floor an accepted rollback left (0: none).
pub(super) fn stored_floor(db: &Database) -> Result<u64, StoreError> {
    read_meta(db, FLOOR_KEY)
}

/// Sets the generation to `generation` in one durable commit (which also makes every
/// earlier commit durable).
pub(super) fn commit_generation(db: &Database, generation: u64) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(db_err)?;
    tx.open_table(META)
        .map_err(db_err)?
        .insert(GENERATION_KEY, &generation.to_be_bytes()[..])
        .map_err(db_err)?;
    tx.commit().map_err(db_err)
}

/// Compares the store's generation with its high-water file; returns the open file, the
/// generation to continue from, and whether a rollback was accepted.
pub(super) fn check(
    db: &Database,
    path: &Path,
    accept_rollback: bool,
) -> Result<(Option<HighWater>, u64, bool), StoreError> {
    let found = read_meta(db, GENERATION_KEY)?;
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
            accept(db, mark)?;
            Ok((Some(file), mark.generation, true))
        }
        _ => Ok((Some(file), found, false)),
    }
}

/// Records an accepted rollback: the floor and the generation to continue from, durably.
fn accept(db: &Database, mark: Mark) -> Result<(), StoreError> {
    let floor = stored_floor(db)?.max(mark.at_ms);
    let tx = db.begin_write().map_err(db_err)?;
    {
        let mut meta = tx.open_table(META).map_err(db_err)?;
        meta.insert(FLOOR_KEY, &floor.to_be_bytes()[..])
            .map_err(db_err)?;
        meta.insert(GENERATION_KEY, &mark.generation.to_be_bytes()[..])
            .map_err(db_err)?;
    }
    tx.commit().map_err(db_err)
}

impl RedbStore {
    /// After an accepted rollback: drops pending turns and dead-letters undelivered replies
    /// made before the floor (what the lost writes likely handled already).
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
        if dropped + dead > 0 {
            tracing::warn!(
                dropped_turns = dropped,
                dead_lettered_replies = dead,
                "store rollback: turns and replies from before the lost writes are not run or sent again"
            );
        }
        Ok(())
    }

    /// Whether a message dated `timestamp_ms` predates an accepted store rollback (see
    /// the sled backend's `before_rollback`).
    pub(super) fn before_rollback(&self, timestamp_ms: u64) -> bool {
        let floor = self.inner.rollback_floor_ms / 1000 * 1000;
        let before = floor > 0 && timestamp_ms < floor;
        if before {
            tracing::info!(
                timestamp_ms,
                floor,
                "inbound older than the accepted store rollback; dropped"
            );
        }
        before
    }
}
