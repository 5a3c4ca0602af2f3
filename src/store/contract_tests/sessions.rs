//! [`SessionStore`](crate::store::SessionStore) and [`BaseStore`](crate::store::BaseStore).

use std::collections::HashSet;

use super::{Harness, chat, turn};
use crate::domain::message::{Message, text_of};
use crate::store::{Entry, EntryKind, Store, StoreError};

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m {
            Message::User(u) => text_of(&u.content),
            Message::Assistant(a) => text_of(&a.content),
            Message::ToolResult(t) => text_of(&t.content),
        })
        .collect()
}

fn say(store: &Store, key: &str, text: &str) -> String {
    store
        .append(key, EntryKind::Message(Message::user(text)))
        .unwrap()
}

fn export(store: &Store, key: &str) -> String {
    let mut out = Vec::new();
    store.export(key, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// A session is created once (the first `cwd` wins) with a header; sessions list by key.
pub(crate) async fn sessions_are_created_once_and_listed_by_key(h: &dyn Harness) {
    let store = h.fresh();
    assert_eq!(store.get_session("b").unwrap(), None);
    let first = store.ensure_session("b", "/work").unwrap();
    let again = store.ensure_session("b", "/elsewhere").unwrap();
    assert_eq!(first, again);
    assert_eq!(
        (
            first.key.as_str(),
            first.entries,
            first.last_entry_id.clone()
        ),
        ("b", 0, None)
    );
    store.ensure_session("a", "/").unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    let keys: Vec<String> = store
        .list_sessions()
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .collect();
    assert_eq!(keys, ["a", "b"]);
    let entries = store.entries("b").unwrap();
    let [Entry::Session(header)] = entries.as_slice() else {
        panic!("expected only the header: {entries:?}")
    };
    assert_eq!(
        (header.version, header.id.as_str(), header.cwd.as_str()),
        (4, first.session_id.as_str(), "/work")
    );
}

/// Settings round-trip as JSON per key and can be cleared.
pub(crate) async fn settings_round_trip_and_clear(h: &dyn Harness) {
    let store = h.fresh();
    assert_eq!(store.get_settings::<Vec<String>>("k").unwrap(), None);
    store.put_settings("k", &vec!["ls".to_string()]).unwrap();
    store.put_settings("j", &"model".to_string()).unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(
        store.get_settings::<Vec<String>>("k").unwrap(),
        Some(vec!["ls".to_string()])
    );
    assert_eq!(
        store.get_settings::<String>("j").unwrap().as_deref(),
        Some("model")
    );
    store.clear_settings("k").unwrap();
    assert_eq!(store.get_settings::<Vec<String>>("k").unwrap(), None);
}

/// Appends chain `parentId`s with unique ids and update the metadata; unknown sessions fail.
pub(crate) async fn transcript_appends_chain_and_refuse_unknown_sessions(h: &dyn Harness) {
    let store = h.fresh();
    let err = store
        .append("nope", EntryKind::Reset { reason: "x".into() })
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownSession(_)), "{err:?}");
    assert!(matches!(
        store.entries("nope"),
        Err(StoreError::UnknownSession(_))
    ));
    store.ensure_session("k", "/").unwrap();
    let ids: Vec<String> = (0..50)
        .map(|i| say(&store, "k", &format!("m{i}")))
        .collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
    // The convenience appends create the session when needed.
    store
        .append_message("fresh", &Message::user("hello"))
        .unwrap();
    store.append_reset("fresh", "/new").unwrap();
    store.flush().await.unwrap();

    let store = h.reopen(store);
    assert_eq!(store.last_entry_id("k").unwrap().as_ref(), ids.last());
    assert_eq!(store.get_session("k").unwrap().unwrap().entries, 50);
    let entries = store.entries("k").unwrap();
    let mut parent: Option<String> = None;
    for (entry, id) in entries[1..].iter().zip(&ids) {
        let Entry::Item(item) = entry else {
            panic!("a header after the first line")
        };
        assert_eq!((&item.id, &item.parent_id), (id, &parent));
        assert!(item.id.len() == 8 && item.id.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
        parent = Some(item.id.clone());
    }
    assert_eq!(store.entries("fresh").unwrap().len(), 3);
    assert!(store.window("fresh").unwrap().is_empty());
}

/// The model window starts after the last reset; a compaction adds its summary and keeps
/// the entries from `firstKeptEntryId`.
pub(crate) async fn window_follows_resets_and_compactions(h: &dyn Harness) {
    let store = h.fresh();
    store.ensure_session("k", "/").unwrap();
    say(&store, "k", "before");
    store
        .append(
            "k",
            EntryKind::Reset {
                reason: "/new".into(),
            },
        )
        .unwrap();
    say(&store, "k", "old");
    let kept = say(&store, "k", "kept");
    let model = EntryKind::ModelChange {
        provider: "p".into(),
        model_id: "m".into(),
    };
    store.append("k", model).unwrap();
    say(&store, "k", "kept 2");
    let compaction = EntryKind::Compaction {
        summary: "they talked".into(),
        first_kept_entry_id: kept.clone(),
        tokens_before: 100,
    };
    store.append("k", compaction).unwrap();
    let newest = say(&store, "k", "new");
    let window = store.window_entries("k").unwrap();
    assert_eq!(
        texts(&window.iter().map(|w| w.message.clone()).collect::<Vec<_>>()),
        [
            "[Summary of earlier conversation]\nthey talked",
            "kept",
            "kept 2",
            "new"
        ]
    );
    assert_eq!(window[0].entry_id, None);
    assert_eq!(window[1].entry_id.as_deref(), Some(kept.as_str()));
    assert_eq!(window[3].entry_id.as_deref(), Some(newest.as_str()));
    store
        .append(
            "k",
            EntryKind::Reset {
                reason: "/reset".into(),
            },
        )
        .unwrap();
    say(&store, "k", "fresh");
    assert_eq!(texts(&store.window("k").unwrap()), ["fresh"]);
    assert_eq!(store.entries("k").unwrap().len(), 11, "nothing is deleted");
}

/// Export gives every line as stored; import stores lines byte for byte.
pub(crate) async fn export_import_round_trip_is_byte_identical(h: &dyn Harness) {
    let store = h.fresh();
    store.ensure_session("a", "/home/ü ser").unwrap();
    say(&store, "a", "héllo \"wörld\"\n\ttabs \\ \u{1F600} \u{2028}");
    store
        .append(
            "a",
            EntryKind::Reset {
                reason: "/new".into(),
            },
        )
        .unwrap();
    say(&store, "a", "after");
    let first = export(&store, "a");
    assert_eq!(first.lines().count(), 4);
    assert!(first.ends_with('\n'));
    assert_eq!(store.import("b", first.as_bytes()).unwrap(), 3);
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(export(&store, "b"), first);
    assert_eq!(store.window("a").unwrap(), store.window("b").unwrap());
    let foreign = concat!(
        r#"{"type":"session", "version":4,"id":"abc","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
        "\r\n\n",
        r#"{"type":"reset","id":"00000001","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","reason":"/new","x":[1]}"#,
        "\n",
    );
    assert_eq!(store.import("c", foreign.as_bytes()).unwrap(), 1);
    assert_eq!(export(&store, "c"), foreign.replace("\r\n\n", "\n"));
    let next = say(&store, "c", "continues");
    let entries = store.entries("c").unwrap();
    let Some(Entry::Item(last)) = entries.last() else {
        panic!("no entry")
    };
    assert_eq!(
        (last.id.as_str(), last.parent_id.as_deref()),
        (next.as_str(), Some("00000001"))
    );
}

/// A refused import stores nothing; a session with entries is never overwritten.
pub(crate) async fn import_refuses_bad_input_and_existing_sessions(h: &dyn Harness) {
    let store = h.fresh();
    let header = r#"{"type":"session","version":4,"id":"s","timestamp":"t","cwd":"/"}"#;
    let reset = |id: &str, parent: &str| {
        format!(r#"{{"type":"reset","id":"{id}","parentId":{parent},"timestamp":"t","reason":""}}"#)
    };
    let bad_chain = format!(
        "{header}\n{}\n{}\n",
        reset("1", "null"),
        reset("2", "\"9\"")
    );
    let err = store.import("k", bad_chain.as_bytes()).unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidImport { line: 3, .. }),
        "{err:?}"
    );
    let err = store
        .import("k", format!("{header}\nnot json\n").as_bytes())
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidImport { line: 2, .. }),
        "{err:?}"
    );
    assert_eq!(store.get_session("k").unwrap(), None, "nothing was stored");

    store.ensure_session("taken", "/").unwrap();
    say(&store, "taken", "mine");
    let before = export(&store, "taken");
    let good = format!("{header}\n{}\n", reset("1", "null"));
    let err = store.import("taken", good.as_bytes()).unwrap_err();
    assert!(
        matches!(err, StoreError::SessionExists { entries: 1, .. }),
        "{err:?}"
    );
    assert_eq!(export(&store, "taken"), before);
    store.ensure_session("empty", "/").unwrap();
    assert_eq!(
        store.import("empty", good.as_bytes()).unwrap(),
        1,
        "a bare header is replaced"
    );
}

/// Buffered writes of every concern are durable once `flush` returns.
pub(crate) async fn buffered_writes_are_durable_after_flush(h: &dyn Harness) {
    let store = h.fresh();
    store.ensure_session("k", "/").unwrap();
    let id = say(&store, "k", "hi");
    let seq = store.enqueue(&turn("k", "1")).await.unwrap();
    let out = store.record_final("k", &chat("1"), "x", 1).await.unwrap();
    assert!(store.remove_pending(seq).unwrap());
    assert!(store.mark_delivered(out).unwrap());
    assert!(store.mark_seen("seen", 5).unwrap());
    store.set_target("k", &chat("2")).unwrap();
    store.put_settings("k", &1u32).unwrap();
    store.flush().await.unwrap();
    let store = h.reopen(store);
    assert_eq!(store.last_entry_id("k").unwrap(), Some(id));
    assert!(store.all_pending().unwrap().is_empty());
    assert!(store.undelivered().unwrap().is_empty());
    assert!(!store.mark_seen("seen", 6).unwrap());
    assert_eq!(store.target("k").unwrap(), Some(chat("2")));
    assert_eq!(store.get_settings::<u32>("k").unwrap(), Some(1));
}
