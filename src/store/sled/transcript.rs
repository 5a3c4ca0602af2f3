//! Transcript entries: `(session id, seq)` -> the entry's exact JSON line; seq 0 is the header.
//!
//! A second tree, `entry_ids`, maps `(session id, entry id)` -> seq so that ids stay unique and
//! `firstKeptEntryId` resolves without reading the whole transcript. The model window is read
//! backwards from the end and stops at the last reset or compaction, so its cost follows the
//! window, not the transcript.

use sled::Transactional;

use super::{SledStore, abort, be_u64, db_err, now_ms, tx_err};
use crate::domain::message::{ContentBlock, Message, UserMessage};
use crate::store::codec::{decode, encode};
use crate::store::entry::{Entry, EntryKind, Item};
use crate::store::error::StoreError;
use crate::store::ports::{SUMMARY_HEADING, SessionMeta, SessionStore, WindowMessage};
use crate::store::timestamp::{iso_to_ms, now_iso};

/// The key prefix of every transcript line of session `session_id`.
pub(super) fn transcript_prefix(session_id: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(session_id.len() + 9);
    k.extend_from_slice(session_id.as_bytes());
    k.push(0);
    k
}

/// The key of line `seq` of session `session_id`.
pub(super) fn transcript_key(session_id: &str, seq: u64) -> Vec<u8> {
    let mut k = transcript_prefix(session_id);
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// The seq at the end of a transcript key.
pub(super) fn seq_of_key(key: &[u8]) -> Result<u64, StoreError> {
    let start = key.len().saturating_sub(8);
    be_u64("transcript", &key[start..])
}

/// The `entry_ids` key of entry `id` in session `session_id`.
pub(super) fn entry_id_key(session_id: &str, id: &str) -> Vec<u8> {
    let mut k = transcript_prefix(session_id);
    k.extend_from_slice(id.as_bytes());
    k
}

/// A fresh entry id: 8 lowercase hex chars.
fn random_entry_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(8);
    id
}

impl SledStore {
    /// [`SessionStore::append`]: one transaction over `sessions`, `transcript`, `entry_ids`.
    pub(super) fn append_entry(&self, key: &str, kind: EntryKind) -> Result<String, StoreError> {
        let inner = &self.inner;
        (&inner.sessions, &inner.transcript, &inner.entry_ids)
            .transaction(|(sessions, transcript, entry_ids)| {
                let Some(bytes) = sessions.get(key)? else {
                    return abort(StoreError::UnknownSession(key.to_string()));
                };
                let mut meta: SessionMeta = match decode("sessions", &bytes) {
                    Ok(meta) => meta,
                    Err(e) => return abort(e),
                };
                let mut id = random_entry_id();
                while entry_ids
                    .get(entry_id_key(&meta.session_id, &id))?
                    .is_some()
                {
                    id = random_entry_id();
                }
                let seq = meta.entries + 1;
                let entry = Entry::Item(Item {
                    id: id.clone(),
                    parent_id: meta.last_entry_id.clone(),
                    timestamp: now_iso(),
                    kind: kind.clone(),
                });
                let line = match encode(&entry) {
                    Ok(line) => line,
                    Err(e) => return abort(e),
                };
                transcript.insert(transcript_key(&meta.session_id, seq), line)?;
                entry_ids.insert(entry_id_key(&meta.session_id, &id), &seq.to_be_bytes()[..])?;
                meta.entries = seq;
                meta.updated_ms = now_ms();
                meta.last_entry_id = Some(id.clone());
                match encode(&meta) {
                    Ok(bytes) => sessions.insert(key.as_bytes(), bytes)?,
                    Err(e) => return abort(e),
                };
                Ok(id)
            })
            .map_err(tx_err)
    }

    /// [`SessionStore::entries`].
    pub(super) fn all_entries(&self, key: &str) -> Result<Vec<Entry>, StoreError> {
        let meta = self.session_or_err(key)?;
        self.inner
            .transcript
            .scan_prefix(transcript_prefix(&meta.session_id))
            .map(|kv| {
                let (_, v) = kv.map_err(db_err)?;
                decode("transcript", &v)
            })
            .collect()
    }

    /// [`SessionStore::window_entries`]: read backwards from the end of the transcript, so
    /// its cost follows the window.
    pub(super) fn window_of(&self, key: &str) -> Result<Vec<WindowMessage>, StoreError> {
        let meta = self.session_or_err(key)?;
        let sid = &meta.session_id;
        let mut tail = Vec::new();
        let mut compaction = None;
        for kv in self
            .inner
            .transcript
            .scan_prefix(transcript_prefix(sid))
            .rev()
        {
            let (k, v) = kv.map_err(db_err)?;
            let Entry::Item(item) = decode("transcript", &v)? else {
                break;
            };
            match item.kind {
                EntryKind::Message(m) => tail.push(WindowMessage::stored(item.id, m)),
                EntryKind::ModelChange { .. } => {}
                EntryKind::Reset { .. } => break,
                EntryKind::Compaction {
                    summary,
                    first_kept_entry_id,
                    ..
                } => {
                    compaction = Some((
                        seq_of_key(&k)?,
                        summary,
                        first_kept_entry_id,
                        item.timestamp,
                    ));
                    break;
                }
            }
        }
        tail.reverse();
        let Some((compaction_seq, summary, first_kept, timestamp)) = compaction else {
            return Ok(tail);
        };
        let summary_message = Message::User(UserMessage {
            content: vec![ContentBlock::text(format!("{SUMMARY_HEADING}\n{summary}"))],
            timestamp: iso_to_ms(&timestamp).unwrap_or(0),
        });
        let mut window = vec![WindowMessage {
            entry_id: None,
            message: summary_message,
        }];
        let first_seq = match self
            .inner
            .entry_ids
            .get(entry_id_key(sid, &first_kept))
            .map_err(db_err)?
        {
            Some(v) => Some(be_u64("entry_ids", &v)?),
            None => None,
        };
        if let Some(first_seq) = first_seq.filter(|&s| s > 0 && s < compaction_seq) {
            let range = transcript_key(sid, first_seq)..transcript_key(sid, compaction_seq);
            for kv in self.inner.transcript.range(range) {
                let (_, v) = kv.map_err(db_err)?;
                if let Entry::Item(item) = decode("transcript", &v)? {
                    match item.kind {
                        EntryKind::Message(m) => window.push(WindowMessage::stored(item.id, m)),
                        // A kept entry before a reset would cross it: start again after it.
                        EntryKind::Reset { .. } => window.truncate(1),
                        _ => {}
                    }
                }
            }
        }
        window.extend(tail);
        Ok(window)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::domain::message::text_of;
    use crate::store::Store;

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

    fn reset(store: &Store, key: &str) -> String {
        store
            .append(
                key,
                EntryKind::Reset {
                    reason: "/new".into(),
                },
            )
            .unwrap()
    }

    #[test]
    fn append_to_unknown_session_is_refused() {
        let store = Store::temporary().unwrap();
        let err = store
            .append("nope", EntryKind::Reset { reason: "x".into() })
            .unwrap_err();
        assert!(matches!(err, StoreError::UnknownSession(_)), "{err:?}");
    }

    #[test]
    fn parent_ids_chain_and_ids_are_unique_hex() {
        let store = Store::temporary().unwrap();
        store.ensure_session("k", "/").unwrap();
        let mut ids = Vec::new();
        for i in 0..200 {
            ids.push(say(&store, "k", &format!("m{i}")));
        }
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
        assert_eq!(store.last_entry_id("k").unwrap().as_ref(), ids.last());
        let entries = store.entries("k").unwrap();
        assert_eq!(entries.len(), 201);
        let mut prev: Option<String> = None;
        for entry in &entries[1..] {
            let Entry::Item(item) = entry else {
                panic!("header after the first line")
            };
            assert_eq!(item.id.len(), 8);
            assert!(
                item.id
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
            assert_eq!(item.parent_id, prev);
            assert!(item.timestamp.ends_with('Z'));
            prev = Some(item.id.clone());
        }
        let meta = store.get_session("k").unwrap().unwrap();
        assert_eq!(meta.entries, 200);
    }

    #[test]
    fn window_starts_after_the_last_reset() {
        let store = Store::temporary().unwrap();
        store.ensure_session("k", "/").unwrap();
        assert!(store.window("k").unwrap().is_empty());
        say(&store, "k", "a");
        say(&store, "k", "b");
        assert_eq!(texts(&store.window("k").unwrap()), ["a", "b"]);
        reset(&store, "k");
        assert!(store.window("k").unwrap().is_empty());
        say(&store, "k", "c");
        store
            .append(
                "k",
                EntryKind::ModelChange {
                    provider: "openai".into(),
                    model_id: "m".into(),
                },
            )
            .unwrap();
        say(&store, "k", "d");
        assert_eq!(texts(&store.window("k").unwrap()), ["c", "d"]);
        // Nothing was deleted.
        assert_eq!(store.entries("k").unwrap().len(), 7);
    }

    #[test]
    fn window_after_compaction_is_summary_then_kept_then_newer() {
        let store = Store::temporary().unwrap();
        store.ensure_session("k", "/").unwrap();
        say(&store, "k", "before reset");
        reset(&store, "k");
        say(&store, "k", "old 1");
        say(&store, "k", "old 2");
        let kept = say(&store, "k", "kept 1");
        say(&store, "k", "kept 2");
        store
            .append(
                "k",
                EntryKind::Compaction {
                    summary: "they talked".into(),
                    first_kept_entry_id: kept,
                    tokens_before: 1000,
                },
            )
            .unwrap();
        say(&store, "k", "new 1");
        assert_eq!(
            texts(&store.window("k").unwrap()),
            [
                "[Summary of earlier conversation]\nthey talked",
                "kept 1",
                "kept 2",
                "new 1"
            ]
        );
        // A later reset hides the compaction too.
        reset(&store, "k");
        say(&store, "k", "fresh");
        assert_eq!(texts(&store.window("k").unwrap()), ["fresh"]);
    }

    #[test]
    fn compaction_keeping_nothing_or_an_unknown_id_gives_summary_and_newer() {
        let store = Store::temporary().unwrap();
        store.ensure_session("k", "/").unwrap();
        say(&store, "k", "old");
        store
            .append(
                "k",
                EntryKind::Compaction {
                    summary: "s".into(),
                    first_kept_entry_id: "ffffffff".into(),
                    tokens_before: 1,
                },
            )
            .unwrap();
        say(&store, "k", "new");
        assert_eq!(
            texts(&store.window("k").unwrap()),
            ["[Summary of earlier conversation]\ns", "new"]
        );
    }
}
