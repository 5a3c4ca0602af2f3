//! The store's high-water file, shared by the embedded engines (redb, sled): a small fsynced
//! file beside the store folder (`<store>.highwater`) holding the last generation the engine
//! made durable, so that opening a store that lost durable writes (damaged or restored
//! files) is noticed instead of silently answering old messages again. Each engine keeps
//! its own copy of the generation inside its database and bumps it with every group commit,
//! writing the file only once the database flushed: the file never runs ahead, so a crash
//! (kill -9, power loss) at any point cannot raise a false alarm.
//!
//! The file holds two 24-byte slots written alternately (generation, time in ms, check),
//! so a torn write spoils at most the slot being written; the newest valid slot counts.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One slot: generation, time (ms), check; all big-endian u64.
const SLOT: usize = 24;
/// Mixed into the check so that zeroes or stray bytes do not pass as a slot.
const MAGIC: u64 = 0x6368_656c_6168_7731;

/// What the high-water file said at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    /// The last generation known durable.
    pub generation: u64,
    /// When it was written (ms since the epoch).
    pub at_ms: u64,
}

/// The open high-water file.
pub(crate) struct HighWater {
    file: File,
}

impl HighWater {
    /// The file beside store folder `store`, if the folder has a name.
    pub(crate) fn path_for(store: &Path) -> Option<PathBuf> {
        let name = store.file_name()?.to_string_lossy().into_owned();
        Some(store.with_file_name(format!("{name}.highwater")))
    }

    /// Opens (creating) the file; returns it and the newest valid mark in it.
    pub(crate) fn open(path: &Path) -> std::io::Result<(HighWater, Option<Mark>)> {
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
    pub(crate) fn write(&self, generation: u64, at_ms: u64) -> std::io::Result<()> {
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
