#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::domain::message::{ContentBlock, text_of};

const PI: &str = include_str!("../../tests/fixtures/pi/branched-v3.jsonl");
const OPENCLAW: &str = include_str!("../../tests/fixtures/openclaw/session-v4.jsonl");

fn items(converted: &Converted) -> Vec<&Item> {
    converted
        .entries
        .iter()
        .filter_map(|e| match e {
            Entry::Item(item) => Some(item),
            Entry::Session(_) => None,
        })
        .collect()
}

fn texts(converted: &Converted) -> Vec<String> {
    items(converted)
        .iter()
        .filter_map(|item| match &item.kind {
            EntryKind::Message(Message::User(u)) => Some(text_of(&u.content)),
            EntryKind::Message(Message::Assistant(a)) => Some(text_of(&a.content)),
            _ => None,
        })
        .collect()
}

#[test]
fn pi_branched_session_keeps_the_active_branch_and_lists_the_rest() {
    let converted = convert_jsonl(PI).unwrap();
    let Entry::Session(header) = &converted.entries[0] else {
        panic!("no header");
    };
    assert_eq!(header.version, 4);
    assert_eq!(header.cwd, "/home/pi/project");
    assert_eq!(
        texts(&converted),
        [
            "hello as a plain string",
            "ok: hello as a plain string",
            "Remember to be brief.",
            "second try on another branch",
            "ok: second try on another branch",
        ]
    );
    let counts: Vec<(&str, usize)> = converted
        .not_carried
        .iter()
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        counts,
        [
            ("off the active branch: custom", 1),
            ("off the active branch: label", 1),
            ("off the active branch: message", 2),
            ("session_info", 1),
            ("thinking_level_change", 1),
        ]
    );
    // parentIds form one chain.
    let items = items(&converted);
    for pair in items.windows(2) {
        assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
    }
    assert_eq!(items[0].parent_id, None);
    // Storing it works: the store's own validation accepts the converted lines.
    let store = crate::store::Store::temporary().unwrap();
    let n = store
        .import("agent:main:main", &converted.to_jsonl().unwrap()[..])
        .unwrap();
    assert_eq!(n, items.len());
}

#[test]
fn image_blocks_on_the_active_branch_are_kept() {
    // The same file with the branch point moved: the picture turn is the leaf's chain.
    let lines: Vec<&str> = PI.lines().take(9).collect();
    let converted = convert_jsonl(&lines.join("\n")).unwrap();
    let image = items(&converted)
        .into_iter()
        .find_map(|item| match &item.kind {
            EntryKind::Message(Message::User(u)) => u.content.iter().find_map(|b| match b {
                ContentBlock::Image(image) => Some(image.clone()),
                _ => None,
            }),
            _ => None,
        })
        .expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert!(image.data.starts_with("iVBORw0KGgo"));
    assert_eq!(converted.not_carried.get("label"), Some(&1));
    assert_eq!(converted.not_carried.get("custom"), Some(&1));
}

#[test]
fn openclaw_v4_session_with_string_content_and_uuid_ids_imports() {
    let converted = convert_jsonl(OPENCLAW).unwrap();
    let texts = texts(&converted);
    assert_eq!(texts[0], "hello there");
    assert!(texts.iter().any(|t| t == "second turn"));
    assert!(texts.iter().any(|t| t == "after reset"));
    assert_eq!(converted.not_carried.get("thinking_level_change"), Some(&1));
    assert!(converted.not_carried.get("custom").is_some_and(|n| *n >= 1));
    let first_model = items(&converted)
        .into_iter()
        .find_map(|item| match &item.kind {
            EntryKind::Message(Message::Assistant(a)) => {
                Some((a.provider.clone(), a.model.clone()))
            }
            _ => None,
        });
    assert_eq!(first_model, Some(("fake".into(), "fake-1".into())));
    let store = crate::store::Store::temporary().unwrap();
    store
        .import("agent:main:main", &converted.to_jsonl().unwrap()[..])
        .unwrap();
    assert!(
        store
            .render_text("agent:main:main")
            .unwrap()
            .contains("after reset")
    );
}

#[test]
fn version_1_entries_without_ids_are_chained_in_file_order() {
    let text = concat!(
        r#"{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
        "\n",
        r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
        "\n",
        r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":"hello"}}"#,
        "\n",
    );
    let converted = convert_jsonl(text).unwrap();
    assert_eq!(texts(&converted), ["hi", "hello"]);
    assert!(converted.not_carried.is_empty());
}

#[test]
fn bad_headers_are_refused() {
    assert!(matches!(
        convert_jsonl(r#"{"type":"message"}"#),
        Err(ForeignError::NoHeader)
    ));
    assert!(matches!(
        convert_jsonl(r#"{"type":"session","version":9}"#),
        Err(ForeignError::Version(9))
    ));
    assert!(matches!(
        convert_jsonl("{"),
        Err(ForeignError::NotJson { line: 1, .. })
    ));
}

mod round_trip {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// One generated entry: its parent (an index of an earlier entry, or the root) and kind.
    fn entry(n: usize, parent: Option<usize>, kind: u8, text: &str) -> Value {
        let id = format!("{n:08x}");
        let parent = parent.map(|p| format!("{p:08x}"));
        let ts = format!("2026-01-01T00:00:{:02}.000Z", n % 60);
        let mut v = match kind {
            0 => {
                json!({"type": "message", "message": {"role": "user", "content": text, "timestamp": n}})
            }
            1 => json!({"type": "message", "message": {"role": "user",
                "content": [{"type": "text", "text": text}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}],
                "timestamp": n}}),
            2 => json!({"type": "message", "message": {"role": "assistant",
                "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": text}],
                "api": "openai-completions", "provider": "p", "model": "m",
                "usage": {"input": n, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": n + 1,
                          "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
                "stopReason": "stop", "timestamp": n}}),
            3 => json!({"type": "model_change", "provider": "p", "modelId": text}),
            4 => {
                json!({"type": "custom_message", "customType": "x", "content": text, "display": true})
            }
            5 => json!({"type": "thinking_level_change", "thinkingLevel": "low"}),
            6 => json!({"type": "label", "targetId": "00000000", "label": text}),
            _ => json!({"type": "custom", "customType": "x", "data": {"t": text}}),
        };
        v["id"] = json!(id);
        v["parentId"] = json!(parent);
        v["timestamp"] = json!(ts);
        v
    }

    /// A generated tree as JSONL: each entry's parent is the one before it or, with a branch,
    /// any earlier entry.
    fn tree() -> impl Strategy<Value = (u64, Vec<Value>)> {
        let one = (
            any::<bool>(),
            any::<prop::sample::Index>(),
            0u8..8,
            "[a-z ]{0,12}",
        );
        (3u64..=4, prop::collection::vec(one, 1..24)).prop_map(|(version, specs)| {
            let lines = specs
                .iter()
                .enumerate()
                .map(|(n, (branch, pick, kind, text))| {
                    let parent = match n {
                        0 => None,
                        _ if *branch => Some(pick.index(n)),
                        _ => Some(n - 1),
                    };
                    entry(n, parent, *kind, text)
                })
                .collect();
            (version, lines)
        })
    }

    fn jsonl(version: u64, lines: &[Value]) -> String {
        let header = json!({"type": "session", "version": version, "id": "s",
            "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
        std::iter::once(&header)
            .chain(lines)
            .map(|v| format!("{v}\n"))
            .collect()
    }

    fn export(store: &crate::store::Store, key: &str) -> String {
        let mut out = Vec::new();
        store.export(key, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Import (convert + store) -> export -> import -> export is equal; every foreign entry
        /// is either kept or counted; the pi form of the export reads back to the same entries.
        #[test]
        fn import_export_round_trips((version, lines) in tree()) {
            let converted = convert_jsonl(&jsonl(version, &lines)).unwrap();
            let kept = converted.entries.len() - 1;
            let counted: usize = converted.not_carried.values().sum();
            prop_assert_eq!(kept + counted, lines.len());
            let store = crate::store::Store::temporary().unwrap();
            store.import("agent:main:a", &converted.to_jsonl().unwrap()[..]).unwrap();
            let first = export(&store, "agent:main:a");
            store.import("agent:main:b", first.as_bytes()).unwrap();
            let second = export(&store, "agent:main:b");
            prop_assert_eq!(&first, &second);
            let again = convert_jsonl(&first).unwrap();
            prop_assert!(again.not_carried.is_empty());
            prop_assert_eq!(&again.entries, &converted.entries);
            let through_pi = convert_jsonl(&crate::store::pi_export::to_pi(&first).unwrap()).unwrap();
            prop_assert_eq!(&through_pi.entries, &converted.entries);
        }
    }
}
