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

/// Copies the store's file as a crash would leave it (only durable commits count), with
/// its open flag.
fn copy_store(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    std::fs::copy(file_in(from), file_in(to)).unwrap();
    if from.join("chela.open").exists() {
        std::fs::copy(from.join("chela.open"), to.join("chela.open")).unwrap();
    }
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
    assert!(
        !path.join("chela.open").exists(),
        "a clean close removes the flag"
    );
    let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
    // A clean close leaves no gap.
    assert_eq!(store.enqueue(&turn).await.unwrap(), first + 1);
}

#[tokio::test]
async fn ids_lost_to_a_crash_are_not_handed_out_again() {
    let dir = tempfile::tempdir().unwrap();
    let turn = crate::store::contract_tests::turn("k", "m1");
    // The flusher's periodic commit (every 500 ms) may make the buffered turn durable before
    // the copy on a stalled machine: then that attempt shows nothing, and another is made.
    for attempt in 0..3 {
        let path = dir.path().join(format!("store{attempt}"));
        let crashed = dir.path().join(format!("crashed{attempt}"));
        let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
        let durable = store.enqueue(&turn).await.unwrap();
        let lost = store.enqueue_unique_buffered("k2", &turn).await.unwrap();
        let lost = lost.expect("a new key is queued");
        // A crash now: the buffered turn was never made durable.
        let mark = |p: &Path| p.with_extension("highwater");
        std::fs::copy(mark(&path), mark(&crashed)).unwrap();
        copy_store(&path, &crashed);
        drop(store);

        assert!(crashed.join("chela.open").exists());
        let store = RedbStore::open_with(&crashed, false, 1 << 20).unwrap();
        assert!(store.is_pending(durable).unwrap());
        if store.is_pending(lost).unwrap() {
            continue;
        }
        let next = store.enqueue_unique("k2", &turn).await.unwrap().unwrap();
        assert!(next > lost, "{next} must not reuse {lost}");
        return;
    }
    panic!("the buffered turn was made durable before every copy");
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

/// A disk held in memory whose writes fail once `fail` is set.
#[derive(Debug)]
struct FailingDisk {
    inner: redb::backends::InMemoryBackend,
    fail: std::sync::Arc<AtomicBool>,
}

impl FailingDisk {
    fn check(&self) -> std::io::Result<()> {
        match self.fail.load(Ordering::Acquire) {
            true => Err(std::io::Error::other("the disk failed")),
            false => Ok(()),
        }
    }
}

impl redb::StorageBackend for FailingDisk {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.check()?;
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> std::io::Result<()> {
        self.check()?;
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.check()?;
        self.inner.write(offset, data)
    }
}

#[tokio::test]
async fn a_failing_disk_is_reported_as_damage_and_remembered() {
    let fail = std::sync::Arc::new(AtomicBool::new(false));
    let store = RedbStore::over(FailingDisk {
        inner: redb::backends::InMemoryBackend::new(),
        fail: fail.clone(),
    })
    .unwrap();
    store.ensure_session("k", "/").unwrap();
    store.flush().await.unwrap();
    assert!(store.damage().is_none());
    fail.store(true, Ordering::Release);
    let wrote = store.ensure_session("k2", "/");
    let flushed = store.flush().await;
    let err = wrote.and(flushed).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    assert!(err.to_string().contains("the disk failed"), "{err}");
    let remembered = store.damage().expect("the damage is remembered");
    assert!(remembered.to_string().contains("the disk failed"));
}

#[test]
fn a_file_scribbled_outside_redb_is_refused_as_damaged_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    {
        let store = RedbStore::open_with(&path, false, 1 << 20).unwrap();
        for i in 0..50 {
            store.ensure_session(&format!("k{i}"), "/").unwrap();
        }
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(file_in(&path))
        .unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, &[0xa5; 16], 4096).unwrap();
    let err = RedbStore::open_with(&path, false, 1 << 20).unwrap_err();
    assert!(matches!(err, StoreError::Damaged { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("chela.redb is damaged"), "{text}");
    assert!(text.contains("from a backup"), "{text}");
}

/// Many callers waiting for durability at once (the group commit under load, which waits a
/// moment for more waiters): every one is answered, and what each wrote is in the file a
/// crash would leave (a copy of it, opened again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_waiters_at_once_are_all_answered_and_their_writes_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = Arc::new(RedbStore::open_with(&path, false, 1 << 20).unwrap());
    let mut waiting = Vec::new();
    for n in 0..200 {
        let store = store.clone();
        waiting.push(tokio::spawn(async move {
            let turn = crate::store::contract_tests::turn(&format!("k{n}"), &format!("m{n}"));
            store.enqueue(&turn).await
        }));
    }
    for waiter in waiting {
        // A waiter never answered fails here instead of hanging the suite.
        let answered = tokio::time::timeout(std::time::Duration::from_secs(60), waiter);
        answered
            .await
            .expect("a waiter was never answered")
            .unwrap()
            .unwrap();
    }
    let crashed = dir.path().join("crashed");
    copy_store(&path, &crashed);
    let reopened = RedbStore::open_with(&crashed, false, 1 << 20).unwrap();
    assert_eq!(reopened.pending_count().unwrap(), 200);
}
