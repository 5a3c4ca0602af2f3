//! Which embedded engine opens the store folder (`[store] engine`, env `CHELA_STORE_ENGINE`).
//!
//! `auto` (the default) keeps sled for a folder that already holds a sled store, with one log
//! line saying redb is the new default and how to move (`chela store migrate --to redb`), and
//! uses redb otherwise. An engine named explicitly must match what the folder holds: redb
//! named for a sled folder (or sled for a redb one) is refused with an error naming the
//! setting, rather than starting an empty store beside the old one.

use std::path::Path;

use super::{RedbStore, Store, StoreError};
use crate::config::{StoreConfig, StoreEngine};

/// The engine that opens `config`'s folder: redb or sled (never `Auto`).
pub fn resolve(config: &StoreConfig) -> Result<StoreEngine, StoreError> {
    let path = &config.path;
    let (sled, redb) = (holds_sled(path), holds_redb(path));
    let refuse = |named: StoreEngine, found: &str| StoreError::Engine {
        setting: config.engine_setting(),
        named: named.name(),
        path: path.clone(),
        found: found.to_owned(),
    };
    match config.engine {
        StoreEngine::Redb if sled && !redb => Err(refuse(StoreEngine::Redb, "a sled store")),
        StoreEngine::Sled if redb && !sled => Err(refuse(StoreEngine::Sled, "a redb store")),
        StoreEngine::Auto if sled && !redb => Ok(StoreEngine::Sled),
        StoreEngine::Auto => Ok(StoreEngine::Redb),
        named => Ok(named),
    }
}

/// Whether folder `path` holds a sled database.
pub fn holds_sled(path: &Path) -> bool {
    path.join("conf").is_file() || path.join("db").is_file()
}

/// Whether folder `path` holds a redb store.
pub fn holds_redb(path: &Path) -> bool {
    super::redb::file_in(path).is_file()
}

/// Opens the embedded store `config` names (`config.url` empty).
pub(super) fn open_embedded(config: &StoreConfig) -> Result<Store, StoreError> {
    let (path, accept, cache) = (&config.path, config.accept_rollback, config.cache_bytes());
    match resolve(config)? {
        StoreEngine::Sled => {
            if config.engine == StoreEngine::Auto {
                tracing::info!(
                    store = %path.display(),
                    "this store is on sled; redb is the default engine for new stores (less memory and disk): stop the gateway and run `chela store migrate --to redb` to move it, or set [store] engine = \"sled\" to keep it"
                );
            }
            open_sled(config)
        }
        _ => RedbStore::open_with(path, accept, cache).map(|s| Store::new(s).named("redb")),
    }
}

/// Opens the sled store in `config.path`.
#[cfg(feature = "sled")]
fn open_sled(config: &StoreConfig) -> Result<Store, StoreError> {
    let (path, accept, cache) = (&config.path, config.accept_rollback, config.cache_bytes());
    super::SledStore::open_with(path, accept, cache).map(|s| Store::new(s).named("sled"))
}

/// A build without sled refuses a sled folder or `engine = "sled"`, naming the setting.
#[cfg(not(feature = "sled"))]
fn open_sled(config: &StoreConfig) -> Result<Store, StoreError> {
    let setting = match config.engine {
        StoreEngine::Sled => config.engine_setting().to_owned(),
        _ => format!(
            "store.path {} (a sled store; move it with `chela store migrate --to redb` in a build with sled)",
            config.path.display()
        ),
    };
    Err(StoreError::NotBuilt {
        setting,
        part: "the sled engine",
        feature: "sled",
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn config(path: &Path, engine: StoreEngine) -> StoreConfig {
        StoreConfig {
            path: path.to_path_buf(),
            engine,
            ..StoreConfig::default()
        }
    }

    #[test]
    fn a_new_folder_gets_redb_and_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let c = config(&path, StoreEngine::Auto);
        let store = open_embedded(&c).unwrap();
        assert_eq!(store.engine(), "redb");
        store.ensure_session("k", "/").unwrap();
        drop(store);
        assert!(holds_redb(&path) && !holds_sled(&path));
        let store = open_embedded(&c).unwrap();
        assert_eq!(store.engine(), "redb");
        assert_eq!(store.list_sessions().unwrap().len(), 1);
    }

    #[test]
    fn an_existing_sled_folder_stays_on_sled_unless_redb_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        let store = open_embedded(&config(&path, StoreEngine::Sled)).unwrap();
        assert_eq!(store.engine(), "sled");
        store.ensure_session("k", "/").unwrap();
        drop(store);
        let store = open_embedded(&config(&path, StoreEngine::Auto)).unwrap();
        assert_eq!(store.engine(), "sled");
        assert_eq!(store.list_sessions().unwrap().len(), 1);
        drop(store);
        let err = open_embedded(&config(&path, StoreEngine::Redb)).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("store.engine"), "{text}");
        assert!(text.contains("chela store migrate --to redb"), "{text}");
    }

    #[test]
    fn sled_named_for_a_redb_folder_is_refused_naming_the_variable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        drop(open_embedded(&config(&path, StoreEngine::Redb)).unwrap());
        let mut c = config(&path, StoreEngine::Sled);
        c.engine_from_env = true;
        let err = open_embedded(&c).unwrap_err();
        assert!(err.to_string().contains("CHELA_STORE_ENGINE"), "{err}");
    }
}
