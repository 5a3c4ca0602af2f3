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
            EntryKind::Message(Message::Assistant(a)) => Some((a.provider.clone(), a.model.clone())),
            _ => None,
        });
    assert_eq!(first_model, Some(("fake".into(), "fake-1".into())));
    let store = crate::store::Store::temporary().unwrap();
    store
        .import("agent:main:main", &converted.to_jsonl().unwrap()[..])
        .unwrap();
    assert!(store.render_text("agent:main:main").unwrap().contains("after reset"));
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
