//! Transcript entries: `(session id, seq)` -> the entry's exact JSON line; seq 0 is the header.
//!
//! `entry_ids` maps `(session id, entry id)` -> seq, as in the sled backend. The model window
//! is read backwards from the end and stops at the last reset or compaction, so its cost
//! follows the window, not the transcript.

use redb::ReadTransaction;

use super::{ENTRY_IDS, RedbStore, SESSIONS, TRANSCRIPT, be_u64, db_err, get, now_ms};
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
fn seq_of_key(key: &[u8]) -> Result<u64, StoreError> {
    be_u64("transcript", &key[key.len().saturating_sub(8)..])
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

/// A compaction met while reading the window backwards: its seq, summary, first kept entry
/// and time.
type Compaction = (u64, String, String, String);

impl RedbStore {
    /// [`SessionStore::append`]: one transaction over `sessions`, `transcript`, `entry_ids`.
    pub(super) fn append_entry(&self, key: &str, kind: EntryKind) -> Result<String, StoreError> {
        self.write(|tx| {
            let mut sessions = tx.open_table(SESSIONS).map_err(db_err)?;
            let Some(bytes) = get(&sessions, key.as_bytes())? else {
                return Err(StoreError::UnknownSession(key.to_string()));
            };
            let mut meta: SessionMeta = decode("sessions", &bytes)?;
            let mut entry_ids = tx.open_table(ENTRY_IDS).map_err(db_err)?;
            let mut id = random_entry_id();
            while get(&entry_ids, &entry_id_key(&meta.session_id, &id))?.is_some() {
                id = random_entry_id();
            }
            let seq = meta.entries + 1;
            let line = encode(&Entry::Item(Item {
                id: id.clone(),
                parent_id: meta.last_entry_id.clone(),
                timestamp: now_iso(),
                kind,
            }))?;
            tx.open_table(TRANSCRIPT)
                .map_err(db_err)?
                .insert(
                    transcript_key(&meta.session_id, seq).as_slice(),
                    line.as_slice(),
                )
                .map_err(db_err)?;
            entry_ids
                .insert(
                    entry_id_key(&meta.session_id, &id).as_slice(),
                    &seq.to_be_bytes()[..],
                )
                .map_err(db_err)?;
            meta.entries = seq;
            meta.updated_ms = now_ms();
            meta.last_entry_id = Some(id.clone());
            sessions
                .insert(key.as_bytes(), encode(&meta)?.as_slice())
                .map_err(db_err)?;
            Ok(id)
        })
    }

    /// [`SessionStore::entries`].
    pub(super) fn all_entries(&self, key: &str) -> Result<Vec<Entry>, StoreError> {
        let meta = self.session_or_err(key)?;
        self.scan(TRANSCRIPT, &transcript_prefix(&meta.session_id))?
            .iter()
            .map(|(_, v)| decode("transcript", v))
            .collect()
    }

    /// [`SessionStore::window_entries`]: read backwards from the end of the transcript, so
    /// its cost follows the window.
    pub(super) fn window_of(&self, key: &str) -> Result<Vec<WindowMessage>, StoreError> {
        let meta = self.session_or_err(key)?;
        let sid = meta.session_id.as_str();
        self.read(|tx| {
            let (mut tail, compaction) = read_tail(tx, sid)?;
            tail.reverse();
            let Some((compaction_seq, summary, first_kept, timestamp)) = compaction else {
                return Ok(tail);
            };
            let mut window = vec![WindowMessage {
                entry_id: None,
                message: Message::User(UserMessage {
                    content: vec![ContentBlock::text(format!("{SUMMARY_HEADING}\n{summary}"))],
                    timestamp: iso_to_ms(&timestamp).unwrap_or(0),
                }),
            }];
            let entry_ids = tx.open_table(ENTRY_IDS).map_err(db_err)?;
            let first_seq = match get(&entry_ids, &entry_id_key(sid, &first_kept))? {
                Some(v) => Some(be_u64("entry_ids", &v)?),
                None => None,
            };
            if let Some(first_seq) = first_seq.filter(|&s| s > 0 && s < compaction_seq) {
                let transcript = tx.open_table(TRANSCRIPT).map_err(db_err)?;
                let (from, to) = (
                    transcript_key(sid, first_seq),
                    transcript_key(sid, compaction_seq),
                );
                for kv in transcript
                    .range::<&[u8]>(from.as_slice()..to.as_slice())
                    .map_err(db_err)?
                {
                    let (_, v) = kv.map_err(db_err)?;
                    if let Entry::Item(item) = decode("transcript", v.value())? {
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
        })
    }
}

/// The messages after the last reset or compaction of session `sid`, newest first, and the
/// compaction if one ended the walk.
fn read_tail(
    tx: &ReadTransaction,
    sid: &str,
) -> Result<(Vec<WindowMessage>, Option<Compaction>), StoreError> {
    let transcript = tx.open_table(TRANSCRIPT).map_err(db_err)?;
    let from = transcript_prefix(sid);
    let mut to = sid.as_bytes().to_vec();
    to.push(1);
    let mut tail = Vec::new();
    for kv in transcript
        .range::<&[u8]>(from.as_slice()..to.as_slice())
        .map_err(db_err)?
        .rev()
    {
        let (k, v) = kv.map_err(db_err)?;
        let Entry::Item(item) = decode("transcript", v.value())? else {
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
                let seq = seq_of_key(k.value())?;
                return Ok((
                    tail,
                    Some((seq, summary, first_kept_entry_id, item.timestamp)),
                ));
            }
        }
    }
    Ok((tail, None))
}
