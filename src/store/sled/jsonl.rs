//! JSONL export and import of a transcript (`chela sessions export|import`).
//!
//! Export writes every stored line as is, each ending in `\n`. Import validates each line and
//! stores its exact bytes, so export -> import -> export is byte-identical.

use std::io::{BufRead, Write};

use super::transcript::{entry_id_key, transcript_key, transcript_prefix};
use super::{SledStore, db_err, now_ms};
use crate::store::codec::encode;
use crate::store::error::StoreError;
use crate::store::ports::{SessionMeta, SessionStore};

impl SledStore {
    /// [`SessionStore::export_jsonl`]: the stored lines as they are.
    pub(super) fn export_lines(&self, key: &str, out: &mut dyn Write) -> Result<usize, StoreError> {
        let meta = self.session_or_err(key)?;
        let mut lines = 0;
        for kv in self
            .inner
            .transcript
            .scan_prefix(transcript_prefix(&meta.session_id))
        {
            let (_, v) = kv.map_err(db_err)?;
            out.write_all(&v)?;
            out.write_all(b"\n")?;
            lines += 1;
        }
        out.flush()?;
        Ok(lines)
    }

    /// [`SessionStore::import_jsonl`]: the lines are written under a fresh session id, then the
    /// session's metadata is swapped to it (compare and swap), so a refused or raced import
    /// leaves the session as it was.
    pub(super) fn import_lines_into(
        &self,
        key: &str,
        input: &mut dyn BufRead,
    ) -> Result<usize, StoreError> {
        let existing = self.get_session(key)?;
        if let Some(meta) = &existing
            && meta.entries > 0
        {
            return Err(StoreError::SessionExists {
                key: key.to_string(),
                entries: meta.entries,
            });
        }
        let session_id = uuid::Uuid::new_v4().to_string();
        match self.import_lines(&session_id, input) {
            Ok(Imported {
                entries,
                last_entry_id,
                created_ms,
            }) => {
                let now = now_ms();
                let meta = SessionMeta {
                    key: key.to_string(),
                    session_id: session_id.clone(),
                    created_ms: created_ms.unwrap_or(now),
                    updated_ms: now,
                    entries,
                    last_entry_id,
                };
                let old = existing.as_ref().map(encode).transpose()?;
                let swapped = self
                    .inner
                    .sessions
                    .compare_and_swap(key, old, Some(encode(&meta)?))
                    .map_err(db_err)?;
                if swapped.is_err() {
                    // Someone wrote to this session while we read: keep theirs.
                    self.remove_lines(&session_id)?;
                    let entries = self.get_session(key)?.map_or(0, |m| m.entries);
                    return Err(StoreError::SessionExists {
                        key: key.to_string(),
                        entries,
                    });
                }
                if let Some(old) = existing {
                    self.remove_lines(&old.session_id)?;
                }
                Ok(entries as usize)
            }
            Err(e) => {
                self.remove_lines(&session_id)?;
                Err(e)
            }
        }
    }

    /// Validates every line of `input`, then stores them under `session_id` (nothing is
    /// stored when a line is refused).
    fn import_lines(
        &self,
        session_id: &str,
        input: &mut dyn BufRead,
    ) -> Result<Imported, StoreError> {
        let parsed = crate::store::import::parse(input)?;
        for (seq, (entry_id, line)) in (0u64..).zip(&parsed.lines) {
            if let Some(id) = entry_id {
                self.inner
                    .entry_ids
                    .insert(entry_id_key(session_id, id), &seq.to_be_bytes()[..])
                    .map_err(db_err)?;
            }
            self.inner
                .transcript
                .insert(transcript_key(session_id, seq), line.as_slice())
                .map_err(db_err)?;
        }
        Ok(Imported {
            entries: parsed.lines.len() as u64 - 1,
            last_entry_id: parsed.last_entry_id,
            created_ms: parsed.created_ms,
        })
    }

    /// Removes every transcript line and entry id of `session_id`.
    fn remove_lines(&self, session_id: &str) -> Result<(), StoreError> {
        let prefix = transcript_prefix(session_id);
        for tree in [&self.inner.transcript, &self.inner.entry_ids] {
            for k in tree.scan_prefix(&prefix).keys() {
                tree.remove(k.map_err(db_err)?).map_err(db_err)?;
            }
        }
        Ok(())
    }
}

/// What an import stored.
struct Imported {
    entries: u64,
    last_entry_id: Option<String>,
    created_ms: Option<u64>,
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::domain::message::{
        AssistantMessage, ContentBlock, Message, StopReason, ToolCall, Usage,
    };
    use crate::store::entry::Entry;
    use crate::store::{EntryKind, Store};

    fn export_string(store: &Store, key: &str) -> String {
        let mut out = Vec::new();
        store.export(key, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn fill(store: &Store, key: &str, text: &str) {
        store.ensure_session(key, "/home/ü ser").unwrap();
        let call = ToolCall {
            id: "call_1".into(),
            name: "exec".into(),
            arguments: json!({"command": format!("echo {text}")}),
        };
        let kinds = [
            EntryKind::ModelChange {
                provider: "openai".into(),
                model_id: "gpt-x".into(),
            },
            EntryKind::Message(Message::user(text)),
            EntryKind::Message(Message::Assistant(AssistantMessage {
                content: vec![
                    ContentBlock::thinking(text),
                    ContentBlock::text(text),
                    ContentBlock::ToolCall(call.clone()),
                ],
                provider: "openai".into(),
                model: "gpt-x".into(),
                usage: Usage::default(),
                stop_reason: StopReason::ToolUse,
                error_message: None,
                timestamp: 7,
            })),
            EntryKind::Message(Message::tool_result(&call, text, false)),
            EntryKind::Reset {
                reason: text.into(),
            },
            EntryKind::Message(Message::user("after")),
        ];
        for kind in kinds {
            store.append(key, kind).unwrap();
        }
        let first = store.last_entry_id(key).unwrap().unwrap();
        store
            .append(
                key,
                EntryKind::Compaction {
                    summary: text.into(),
                    first_kept_entry_id: first,
                    tokens_before: 42,
                },
            )
            .unwrap();
    }

    fn round_trip(text: &str) {
        let store = Store::temporary().unwrap();
        fill(&store, "a", text);
        let first = export_string(&store, "a");
        assert_eq!(first.lines().count(), 8);
        assert!(first.ends_with('\n'));
        assert_eq!(store.import("b", first.as_bytes()).unwrap(), 7);
        let second = export_string(&store, "b");
        assert_eq!(first, second);
        assert_eq!(store.window("a").unwrap(), store.window("b").unwrap());
        assert_eq!(store.entries("a").unwrap(), store.entries("b").unwrap());
    }

    #[test]
    fn export_import_export_is_byte_identical() {
        round_trip("héllo \"wörld\"\n\ttabs \\ back\u{1F600} \u{2028}");
    }

    #[test]
    fn foreign_lines_keep_their_bytes_and_unknown_fields() {
        let input = concat!(
            r#"{"type":"session", "version":4,"id":"abc","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/","parentSession":null}"#,
            "\r\n\n",
            r#"{"type":"reset","id":"00000001","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","reason":"/new","x":[1,2]}"#,
            "\n",
        );
        let store = Store::temporary().unwrap();
        assert_eq!(store.import("k", input.as_bytes()).unwrap(), 1);
        let out = export_string(&store, "k");
        assert_eq!(out, input.replace("\r\n\n", "\n"));
        // Appending continues the chain.
        store
            .append("k", EntryKind::Reset { reason: "r".into() })
            .unwrap();
        let entries = store.entries("k").unwrap();
        let Some(Entry::Item(last)) = entries.last() else {
            panic!("no entry")
        };
        assert_eq!(last.parent_id.as_deref(), Some("00000001"));
    }

    fn refused(store: &Store, key: &str, input: &str) -> StoreError {
        let err = store.import(key, input.as_bytes()).unwrap_err();
        assert!(store.get_session(key).unwrap().is_none() || key == "taken");
        err
    }

    #[test]
    fn import_refuses_bad_input_and_stores_nothing() {
        let store = Store::temporary().unwrap();
        let header = r#"{"type":"session","version":4,"id":"s","timestamp":"t","cwd":"/"}"#;
        let reset = |id: &str, parent: &str| {
            format!(
                r#"{{"type":"reset","id":"{id}","parentId":{parent},"timestamp":"t","reason":""}}"#
            )
        };
        let v3 = header.replace("\"version\":4", "\"version\":3");
        let err = refused(&store, "k", &format!("{v3}\n"));
        assert!(err.to_string().contains("version 3"), "{err}");
        let unknown = r#"{"type":"label","id":"1","parentId":null,"timestamp":"t"}"#;
        let err = refused(&store, "k", &format!("{header}\n{unknown}\n"));
        assert!(
            matches!(err, StoreError::InvalidImport { line: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("unknown variant"), "{err}");
        let err = refused(&store, "k", &format!("{}\n", reset("1", "null")));
        assert!(err.to_string().contains("header"), "{err}");
        let chain = format!(
            "{header}\n{}\n{}\n",
            reset("1", "null"),
            reset("2", "\"9\"")
        );
        let err = refused(&store, "k", &chain);
        assert!(err.to_string().contains("parentId"), "{err}");
        let dup = format!(
            "{header}\n{}\n{}\n",
            reset("1", "null"),
            reset("1", "\"1\"")
        );
        let err = refused(&store, "k", &dup);
        assert!(err.to_string().contains("twice"), "{err}");
        let err = refused(&store, "k", "");
        assert!(err.to_string().contains("empty"), "{err}");
        let err = refused(&store, "k", &format!("{header}\nnot json\n"));
        assert!(
            matches!(err, StoreError::InvalidImport { line: 2, .. }),
            "{err}"
        );
        // After all the refusals the key is still free.
        let good = format!("{header}\n{}\n", reset("1", "null"));
        assert_eq!(store.import("k", good.as_bytes()).unwrap(), 1);
    }

    #[test]
    fn import_refuses_a_session_with_entries() {
        let store = Store::temporary().unwrap();
        fill(&store, "taken", "x");
        let before = export_string(&store, "taken");
        let err = refused(&store, "taken", &before);
        assert!(
            matches!(err, StoreError::SessionExists { entries: 7, .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("already has 7 entries"), "{err}");
        assert_eq!(export_string(&store, "taken"), before);
        // A session with only its header is replaced.
        store.ensure_session("empty", "/").unwrap();
        assert_eq!(store.import("empty", before.as_bytes()).unwrap(), 7);
        assert_eq!(export_string(&store, "empty"), before);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn round_trip_is_byte_identical_for_any_text(text in "(\\PC|[\"\\\\\n\r\t\u{0}])*") {
            round_trip(&text);
        }
    }
}
