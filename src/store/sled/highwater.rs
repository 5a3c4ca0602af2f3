//! The store's high-water mark: a generation counter kept both inside sled and in a small
//! fsynced file beside the store folder (`<store>.highwater`), so that opening a store that
//! lost durable writes (damaged or restored files) is noticed instead of silently answering
//! old messages again.
//!
//! Every group commit of the flusher bumps the generation inside sled, flushes sled, and only
//! then writes the generation to the file: the file never runs ahead of what sled made
//! durable, so a crash (kill -9, power loss) at any point cannot raise a false alarm. A store
//! whose generation is below the file's lost writes that were once durable.
//!
//! The file holds two 24-byte slots written alternately (generation, time in ms, check),
//! so a torn write spoils at most the slot being written; the newest valid slot counts.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::{StoreError, db_err};
use crate::store::{DeliveryStore, QueueStore};

/// The sled key (default tree) of the store's generation.
const GENERATION_KEY: &[u8] = b"chela:generation";
/// The sled key (default tree) of the rollback floor (see [`super::SledStore::open_with`]).
const FLOOR_KEY: &[u8] = b"chela:rollback-floor-ms";
/// One slot: generation, time (ms), check; all big-endian u64.
const SLOT: usize = 24;
/// Mixed into the check so that zeroes or stray bytes do not pass as a slot.
const MAGIC: u64 = 0x6368_656c_6168_7731;

/// What the high-water file said at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) struct Mark {
    /// The last generation known durable.
    pub generation: u64,
    /// When it was written (ms since the epoch).
    pub at_ms: u64,
}

/// The open high-water file.
pub(in crate::store) struct HighWater {
    file: File,
}

impl HighWater {
    /// The file beside store folder `store`, if the folder has a name.
    pub(in crate::store) fn path_for(store: &Path) -> Option<PathBuf> {
        let name = store.file_name()?.to_string_lossy().into_owned();
        Some(store.with_file_name(format!("{name}.highwater")))
    }

    /// Opens (creating) the file; returns it and the newest valid mark in it.
    pub(in crate::store) fn open(path: &Path) -> std::io::Result<(HighWater, Option<Mark>)> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let mark = bytes
            .chunks_exact(SLOT)
            .take(2)
            .filter_map(decode)
            .max_by_key(|m| m.generation);
        Ok((HighWater { file }, mark))
    }

    /// Records `generation` as durable (written to its slot and fsynced).
    pub(in crate::store) fn write(&self, generation: u64, at_ms: u64) -> std::io::Result<()> {
        let slot = (generation % 2) as usize;
        self.file
            .write_all_at(&encode(generation, at_ms), (slot * SLOT) as u64)?;
        self.file.sync_data()
    }
}

fn check(generation: u64, at_ms: u64) -> u64 {
    (generation.rotate_left(17) ^ at_ms.rotate_left(41) ^ MAGIC).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn encode(generation: u64, at_ms: u64) -> [u8; SLOT] {
    let mut out = [0u8; SLOT];
    out[..8].copy_from_slice(&generation.to_be_bytes());
    out[8..16].copy_from_slice(&at_ms.to_be_bytes());
    out[16..].copy_from_slice(&check(generation, at_ms).to_be_bytes());
    out
}

fn decode(slot: &[u8]) -> Option<Mark> {
    let word = |i: usize| -> Option<u64> {
        let arr: [u8; 8] = slot.get(i * 8..i * 8 + 8)?.try_into().ok()?;
        Some(u64::from_be_bytes(arr))
    };
    let (generation, at_ms, sum) = (word(0)?, word(1)?, word(2)?);
    (sum == check(generation, at_ms) && generation > 0).then_some(Mark { generation, at_ms })
}

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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_valid_slot_counts_and_a_torn_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data.highwater");
        let (hw, mark) = HighWater::open(&path).unwrap();
        assert_eq!(mark, None);
        hw.write(1, 10).unwrap();
        hw.write(2, 20).unwrap();
        hw.write(3, 30).unwrap();
        drop(hw);
        let (_, mark) = HighWater::open(&path).unwrap();
        assert_eq!(
            mark,
            Some(Mark {
                generation: 3,
                at_ms: 30
            })
        );
        // Spoil slot 1 (generation 3): generation 2 in slot 0 still counts.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[SLOT + 3] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (_, mark) = HighWater::open(&path).unwrap();
        assert_eq!(mark.map(|m| m.generation), Some(2));
        std::fs::write(&path, [0u8; 2 * SLOT]).unwrap();
        assert_eq!(HighWater::open(&path).unwrap().1, None);
    }
}
