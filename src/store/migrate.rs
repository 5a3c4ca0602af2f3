//! `chela store migrate --to redb`: copies a sled store folder into a new redb store, record
//! by record (the two backends store the same keys and values), checks that every table
//! holds as many records as the sled tree it came from, carries the id counter, generation
//! and rollback floor over, and keeps the sled folder beside it as `<folder>.sled-backup`.
//! The gateway must be stopped (the sled folder's lock says so).

use std::path::{Path, PathBuf};

use super::StoreError;
#[cfg(feature = "sled")]
use super::{RedbStore, SledStore};

/// What a migration copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// Records per table, in table order (tables without records left out).
    pub tables: Vec<(&'static str, u64)>,
    /// Where the sled folder was kept.
    pub backup: PathBuf,
}

/// The folder name with `suffix` appended (`/x/data` -> `/x/data<suffix>`).
#[cfg(feature = "sled")]
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

/// Moves the sled store in folder `path` to redb (see the module doc). The redb store is
/// built in `<folder>.redb-migrating` and put in place only once every count matched.
#[cfg(feature = "sled")]
pub fn sled_to_redb(path: &Path, cache_bytes: u64) -> Result<Migrated, StoreError> {
    let fail = |reason: String| StoreError::Open {
        path: path.to_path_buf(),
        reason,
    };
    if !super::holds_sled(path) {
        return Err(fail("no sled store here to migrate".into()));
    }
    if super::holds_redb(path) {
        return Err(fail("the folder already holds a redb store".into()));
    }
    let (building, backup) = (
        beside(path, ".redb-migrating"),
        beside(path, ".sled-backup"),
    );
    if backup.exists() {
        return Err(fail(format!(
            "{} exists already; move it away first",
            backup.display()
        )));
    }
    // What a failed earlier try left: its folder and its rollback mark.
    let _ = std::fs::remove_dir_all(&building);
    if let Some(mark) = super::highwater_path_for(&building) {
        let _ = std::fs::remove_file(mark);
    }
    // Held open (locked) until the folders are renamed, so no gateway starts on it meanwhile.
    let sled = SledStore::open_with(path, false, cache_bytes)?;
    let counters = sled.counters()?;
    let redb = RedbStore::open_with(&building, false, cache_bytes)?;
    let mut tables = Vec::new();
    for (name, _) in super::redb::TABLES {
        if name == "meta" {
            continue;
        }
        let loaded = redb.load_records(name, sled.raw_records(name)?)?;
        let counted = redb.count(name)?;
        let expected = sled.raw_records(name)?.count() as u64;
        if loaded != expected || counted != expected {
            return Err(fail(format!(
                "{name}: {expected} records in sled, {counted} in the new redb store; nothing was changed ({} can be removed)",
                building.display()
            )));
        }
        if expected > 0 {
            tables.push((name, expected));
        }
    }
    drop(redb);
    super::redb::raw::write_counters(
        &building,
        counters.next_id,
        counters.generation,
        counters.floor_ms,
    )?;
    if let Some(mark) = super::highwater_path_for(&building) {
        let _ = std::fs::remove_file(mark);
    }
    std::fs::rename(path, &backup)?;
    std::fs::rename(&building, path)?;
    drop(sled);
    Ok(Migrated { tables, backup })
}

/// A build without sled cannot read the sled store it would move.
#[cfg(not(feature = "sled"))]
pub fn sled_to_redb(_path: &Path, _cache_bytes: u64) -> Result<Migrated, StoreError> {
    Err(StoreError::NotBuilt {
        setting: "chela store migrate".to_owned(),
        part: "the sled engine",
        feature: "sled",
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::config::{StoreConfig, StoreEngine};
    use crate::store::contract_tests::{chat, turn};
    use crate::store::{Store, engine};

    #[tokio::test]
    async fn a_migration_that_failed_midway_can_be_run_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        {
            let store = Store::open(&path).unwrap();
            store.ensure_session("agent:main:main", "/w").unwrap();
            store.flush().await.unwrap();
        }
        // What an interrupted try leaves: the half-built redb store, with durable commits
        // (and so a rollback mark beside it).
        let building = beside(&path, ".redb-migrating");
        {
            let half = Store::new(RedbStore::open_with(&building, false, 1 << 20).unwrap());
            half.ensure_session("agent:main:other", "/w").unwrap();
            half.flush().await.unwrap();
        }
        let migrated = sled_to_redb(&path, 1 << 20).unwrap();
        assert!(
            migrated.tables.contains(&("sessions", 1)),
            "{:?}",
            migrated.tables
        );
        let config = StoreConfig {
            path: path.clone(),
            engine: StoreEngine::Auto,
            ..StoreConfig::default()
        };
        let store = engine::open_embedded(&config).unwrap();
        assert_eq!(store.list_sessions().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_sled_store_moves_to_redb_with_every_record_and_its_counters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let (seq, meta) = {
            let store = Store::open(&path).unwrap();
            store.ensure_session("agent:main:main", "/w").unwrap();
            store
                .append_message(
                    "agent:main:main",
                    &crate::domain::message::Message::user("hi"),
                )
                .unwrap();
            let seq = store.enqueue(&turn("agent:main:main", "m1")).await.unwrap();
            store
                .record_final("agent:main:main", &chat("42"), "answer", 5)
                .await
                .unwrap();
            assert!(store.mark_seen("d1", 9).unwrap());
            store.set_cursor("telegram:default", 77).await.unwrap();
            store.flush().await.unwrap();
            (seq, store.get_session("agent:main:main").unwrap().unwrap())
        };
        let migrated = sled_to_redb(&path, 1 << 20).unwrap();
        assert!(migrated.backup.join("conf").is_file() || migrated.backup.join("db").is_file());
        assert!(
            migrated.tables.contains(&("transcript", 2)),
            "{:?}",
            migrated.tables
        );
        let config = StoreConfig {
            path: path.clone(),
            engine: StoreEngine::Auto,
            ..StoreConfig::default()
        };
        assert_eq!(engine::resolve(&config).unwrap(), StoreEngine::Redb);
        let store = engine::open_embedded(&config).unwrap();
        assert_eq!(store.engine(), "redb");
        assert_eq!(store.get_session("agent:main:main").unwrap(), Some(meta));
        assert_eq!(store.entries("agent:main:main").unwrap().len(), 2);
        assert!(store.is_pending(seq).unwrap());
        assert_eq!(store.undelivered().unwrap().len(), 1);
        assert!(!store.mark_seen("d1", 10).unwrap());
        assert_eq!(store.get_cursor("telegram:default").unwrap(), Some(77));
        // Ids go on after the sled store's.
        let next = store.enqueue(&turn("agent:main:main", "m2")).await.unwrap();
        assert!(next > seq && next > store.undelivered().unwrap()[0].id);
        drop(store);
        // The generation came along: the high-water file does not see a rollback.
        engine::open_embedded(&config).unwrap();
        // A second migration finds nothing to move.
        assert!(sled_to_redb(&path, 1 << 20).is_err());
    }

    #[test]
    fn a_running_gateway_blocks_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let _held = Store::open(&path).unwrap();
        let err = sled_to_redb(&path, 1 << 20).unwrap_err();
        assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
        assert!(!beside(&path, ".sled-backup").exists());
    }
}
