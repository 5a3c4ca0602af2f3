//! Rollback detection through the high-water mark: an older copy of the store folder or a
//! cut data file is refused at open; a normal reopen is not.

use std::path::Path;

use chela_channel::{ChatKind, Conversation, Inbound, Sender};

use crate::store::{PendingTurn, Store, StoreError};

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn turn(id: &str, timestamp_ms: u64) -> PendingTurn {
    PendingTurn {
        session_key: "agent:main:main".into(),
        inbound: Inbound {
            conversation: Conversation {
                channel: "telegram".into(),
                account: "default".into(),
                kind: ChatKind::Direct,
                chat_id: "42".into(),
                thread_id: None,
            },
            sender: Sender::default(),
            message_id: id.into(),
            text: "hi".into(),
            reply_to: None,
            mentioned: true,
            timestamp_ms,
            interaction: None,
            attachments: Vec::new(),
        },
        queued_ms: timestamp_ms,
    }
}

/// Writes `n` durable cursors (each one flush, so one generation).
async fn write(path: &Path, n: i64) {
    let store = Store::open(path).unwrap();
    for i in 0..n {
        store
            .set_cursor("telegram:default:offset", i)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn an_older_copy_of_the_store_is_refused_unless_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write(&data, 2).await;
    {
        // The older copy still holds a turn and a reply that the lost writes settled.
        let store = Store::open(&data).unwrap();
        store.enqueue(&turn("settled", 5)).await.unwrap();
        let to = turn("x", 5).inbound.conversation;
        store
            .record_final("agent:main:main", &to, "sent", 5)
            .await
            .unwrap();
    }
    copy_dir(&data, &dir.path().join("old"));
    write(&data, 5).await;
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::rename(dir.path().join("old"), &data).unwrap();

    let err = Store::open(&data).unwrap_err();
    assert!(matches!(err, StoreError::RolledBack { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("rolled back") && text.contains("--accept-store-rollback"),
        "{text}"
    );
    assert!(text.contains("data.highwater"), "{text}");

    // Accepted: it opens, continues, and old messages count as seen.
    let store = Store::open_with(&data, true, 8 << 20).unwrap();
    assert!(
        store.all_pending().unwrap().is_empty(),
        "the old turn is not run again"
    );
    assert!(
        store.undelivered().unwrap().is_empty(),
        "the old reply is not sent again"
    );
    assert_eq!(store.dead_letters().unwrap().len(), 1);
    assert_eq!(
        store.get_cursor("telegram:default:offset").unwrap(),
        Some(1)
    );
    assert_eq!(
        store
            .enqueue_unique("old", &turn("old", 1_000))
            .await
            .unwrap(),
        None,
        "a message from before the rollback is not answered again"
    );
    let now = crate::domain::message::now_ms() + 60_000;
    assert!(
        store
            .enqueue_unique("new", &turn("new", now))
            .await
            .unwrap()
            .is_some()
    );
    assert!(!store.mark_seen("cmd-old", 1_000).unwrap());
    drop(store);
    // Once accepted, a plain open works again.
    Store::open(&data).unwrap();
}

#[tokio::test]
async fn a_cut_data_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write(&data, 3).await;
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("snap.") {
            std::fs::remove_file(&path).unwrap();
        } else if name == "db" {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap();
        }
    }
    let err = Store::open(&data).unwrap_err();
    assert!(
        matches!(err, StoreError::RolledBack { found: 0, .. }),
        "an emptied store must not open silently: {err:?}"
    );
}

#[tokio::test]
async fn a_normal_reopen_raises_no_alarm() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    for _ in 0..5 {
        write(&data, 3).await;
    }
    // A store that never wrote anything since its last flush reopens too.
    drop(Store::open(&data).unwrap());
    let store = Store::open(&data).unwrap();
    // No floor: any message is taken.
    assert!(
        store
            .enqueue_unique("k", &turn("k", 1))
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_mark_behind_the_store_is_no_alarm() {
    // kill -9 between sled's flush and the mark's write leaves the mark one step behind;
    // a mark file lost with the folder's neighbours leaves none.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write(&data, 4).await;
    let mark = dir.path().join("data.highwater");
    let (file, _) = crate::store::highwater::HighWater::open(&mark).unwrap();
    std::fs::write(&mark, b"").unwrap();
    file.write(1, 1).unwrap();
    drop(file);
    drop(Store::open(&data).unwrap());
    std::fs::remove_file(&mark).unwrap();
    drop(Store::open(&data).unwrap());
}
