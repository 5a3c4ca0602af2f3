//! The id counter across a crash. Ids are handed out in commits that are not all durable at
//! once (a message the Telegram poll queues waits for its offset save), so a kill -9 can lose
//! the last ones, and the counter would hand them out again. A flag file beside the store
//! (`chela.open`), written when the store opens and removed once it closed cleanly, tells a
//! start after a crash, which then moves the counter past anything that could have been lost.
//! The flag is a file of its own so that a clean start and stop write nothing more to the
//! store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::Database;

use super::{META, NEXT_ID_KEY, Shared, be_u64, db_err, get};
use crate::store::error::StoreError;

/// The flag's file name in the store folder.
const FLAG_NAME: &str = "chela.open";

/// How far a start after a crash moves the counter: far more ids than are handed out
/// between two durable commits (at most 500 ms apart, `flusher::PERIOD`).
const LOST_IDS_GAP: u64 = 1 << 20;

/// The flag of an open store; dropped after the store's last commit, it removes the file
/// unless that commit left writes behind (it failed: a full disk is no damage, but what was
/// not made durable is lost) or the store is damaged.
pub(super) struct OpenFlag {
    path: PathBuf,
    shared: Arc<Shared>,
}

impl Drop for OpenFlag {
    fn drop(&mut self) {
        let unsaved = self.shared.dirty.load(std::sync::atomic::Ordering::Acquire);
        if !unsaved
            && self.shared.damage.get().is_none()
            && let Err(e) = std::fs::remove_file(&self.path)
        {
            tracing::warn!(error = %e, path = %self.path.display(), "cannot remove the store's open flag");
        }
    }
}

/// Marks store folder `dir` open: after a crash (the flag is still there) first moves the id
/// counter of `db` past every id that could have been lost, durably; then writes the flag
/// (synced, with its folder).
pub(super) fn mark_open(db: &Database, dir: &Path) -> Result<PathBuf, StoreError> {
    let path = dir.join(FLAG_NAME);
    let flag_err = |e: std::io::Error| StoreError::Open {
        path: path.clone(),
        reason: e.to_string(),
    };
    if path.try_exists().map_err(flag_err)? {
        skip_lost_ids(db)?;
    }
    let file = std::fs::File::create(&path).map_err(flag_err)?;
    file.sync_all().map_err(flag_err)?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(flag_err)?;
    Ok(path)
}

impl OpenFlag {
    /// The flag at `path` of the store `shared`.
    pub(super) fn new(path: PathBuf, shared: Arc<Shared>) -> OpenFlag {
        OpenFlag { path, shared }
    }
}

/// Moves the id counter [`LOST_IDS_GAP`] ahead, durably.
fn skip_lost_ids(db: &Database) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(db_err)?;
    let (from, to) = {
        let mut meta = tx.open_table(META).map_err(db_err)?;
        let next = match get(&meta, NEXT_ID_KEY)? {
            Some(v) => be_u64("meta", &v)?,
            None => 1,
        };
        let skipped = next.saturating_add(LOST_IDS_GAP);
        meta.insert(NEXT_ID_KEY, &skipped.to_be_bytes()[..])
            .map_err(db_err)?;
        (next, skipped)
    };
    tx.commit().map_err(db_err)?;
    tracing::info!(
        from,
        to,
        "the store was not closed cleanly: ids move past any lost with it"
    );
    Ok(())
}
