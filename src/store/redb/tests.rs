//! Tests of the redb backend: the store contract, the lock, rollback detection.

use std::path::Path;

use super::*;
use crate::store::{QueueStore, SessionStore, Store};

#[test]
fn second_open_of_the_same_folder_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested").join("store");
    let _first = RedbStore::open_with(&path, false, 1 << 20).unwrap();
    let err = RedbStore::open_with(&path, false, 1 << 20).unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("is in use by another chela process"),
        "{err}"
    );
}

#[test]
fn a_dropped_store_can_be_opened_again_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    for _ in 0..3 {
        let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
        store.ensure_session("k", "/").unwrap();
    }
}

/// Copies the store's file as a crash would leave it (only durable commits count).
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(file_in(from), file_in(to)).unwrap();
}

#[tokio::test]
async fn an_older_copy_of_the_file_is_refused_as_a_rollback_and_can_be_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let old = dir.path().join("old");
    let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
    store.flush().await.unwrap();
    copy_store(&path, &old);
    let seq = store
        .enqueue(&crate::store::contract_tests::turn("k", "m1"))
        .await
        .unwrap();
    store.flush().await.unwrap();
    drop(store);
    // Put the old file in place of the new one.
    std::fs::copy(file_in(&old), file_in(&path)).unwrap();
    let err = RedbStore::open_with(&path, false, 1 << 20).unwrap_err();
    assert!(matches!(err, StoreError::RolledBack { .. }), "{err:?}");
    assert!(err.to_string().contains("--accept-store-rollback"), "{err}");
    let store = RedbStore::open_with(&path, true, 1 << 20).unwrap();
    assert!(!store.is_pending(seq).unwrap());
    drop(store);
    // Accepted once, the store opens normally again.
    RedbStore::open_with(&path, false, 1 << 20).unwrap();
}

#[test]
fn an_emptied_file_is_refused_as_a_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
    store.ensure_session("k", "/").unwrap();
    drop(store);
    std::fs::write(file_in(&path), b"").unwrap();
    let err = RedbStore::open_with(&path, false, 1 << 20).unwrap_err();
    assert!(matches!(err, StoreError::RolledBack { .. }), "{err:?}");
}

#[tokio::test]
async fn ids_keep_increasing_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let turn = crate::store::contract_tests::turn("k", "m1");
    let first = {
        let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
        store.enqueue(&turn).await.unwrap()
    };
    let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
    assert!(store.enqueue(&turn).await.unwrap() > first);
}

/// The store contract (`../contract_tests/`) run against redb, each check in its own folder.
mod contract {
    use super::copy_store;
    use crate::store::Store;
    use crate::store::contract_tests::{Harness, store_contract_tests};

    /// redb stores in a temporary folder. `reopen` copies the file (and its high-water file)
    /// while the store is still open, as a crash would leave it, and opens the copy: only
    /// what the store had made durable by then survives.
    struct RedbHarness {
        dir: tempfile::TempDir,
        opened: std::sync::atomic::AtomicUsize,
    }

    impl RedbHarness {
        fn new() -> RedbHarness {
            RedbHarness {
                dir: tempfile::tempdir().unwrap(),
                opened: std::sync::atomic::AtomicUsize::new(0),
            }
        }

        fn path(&self, n: usize) -> std::path::PathBuf {
            self.dir.path().join(format!("data{n}"))
        }

        fn open(path: &std::path::Path) -> Store {
            Store::new(super::RedbStore::open_with(path, false, 1 << 20).unwrap())
        }
    }

    impl Harness for RedbHarness {
        fn fresh(&self) -> Store {
            RedbHarness::open(&self.path(0))
        }

        fn reopen(&self, store: Store) -> Store {
            use std::sync::atomic::Ordering;
            let n = self.opened.fetch_add(1, Ordering::SeqCst);
            let (from, to) = (self.path(n), self.path(n + 1));
            let mark = |p: &std::path::Path| p.with_extension("highwater");
            std::fs::copy(mark(&from), mark(&to)).unwrap();
            copy_store(&from, &to);
            drop(store);
            RedbHarness::open(&to)
        }
    }

    store_contract_tests!(RedbHarness::new());
}

#[test]
fn the_temporary_store_works_in_memory() {
    let store = Store::new(RedbStore::temporary().unwrap());
    store.ensure_session("k", "/").unwrap();
    assert_eq!(store.list_sessions().unwrap().len(), 1);
}
