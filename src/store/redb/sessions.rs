//! Session metadata (`sessions`: session key -> [`SessionMeta`]) and per-key settings
//! (`settings`: key -> JSON); the rest of [`SessionStore`] is in `transcript.rs` and `jsonl.rs`.

use std::io::{BufRead, Write};

use redb::ReadableTable;

use super::transcript::transcript_key;
use super::{RedbStore, SESSIONS, SETTINGS, TRANSCRIPT, db_err, get, now_ms};
use crate::store::codec::{decode, encode};
use crate::store::entry::{Entry, EntryKind, SessionHeader, TRANSCRIPT_VERSION};
use crate::store::error::StoreError;
use crate::store::ports::{SessionMeta, SessionStore, WindowMessage};
use crate::store::timestamp::now_iso;

impl SessionStore for RedbStore {
    fn get_session(&self, key: &str) -> Result<Option<SessionMeta>, StoreError> {
        match self.get(SESSIONS, key.as_bytes())? {
            Some(bytes) => Ok(Some(decode("sessions", &bytes)?)),
            None => Ok(None),
        }
    }

    /// The metadata of session `key`, creating the session (metadata and transcript header
    /// with working directory `cwd`) on first use, in one transaction.
    fn ensure_session(&self, key: &str, cwd: &str) -> Result<SessionMeta, StoreError> {
        if let Some(meta) = self.get_session(key)? {
            return Ok(meta);
        }
        let session_id = uuid::Uuid::new_v4().to_string();
        let header = encode(&Entry::Session(SessionHeader {
            version: TRANSCRIPT_VERSION,
            id: session_id.clone(),
            timestamp: now_iso(),
            cwd: cwd.to_string(),
        }))?;
        let now = now_ms();
        let fresh = SessionMeta {
            key: key.to_string(),
            session_id: session_id.clone(),
            created_ms: now,
            updated_ms: now,
            entries: 0,
            last_entry_id: None,
        };
        let fresh_bytes = encode(&fresh)?;
        self.write(|tx| {
            let mut sessions = tx.open_table(SESSIONS).map_err(db_err)?;
            // Another caller may have created it since we looked.
            if let Some(bytes) = get(&sessions, key.as_bytes())? {
                return decode("sessions", &bytes);
            }
            tx.open_table(TRANSCRIPT)
                .map_err(db_err)?
                .insert(transcript_key(&session_id, 0).as_slice(), header.as_slice())
                .map_err(db_err)?;
            sessions
                .insert(key.as_bytes(), fresh_bytes.as_slice())
                .map_err(db_err)?;
            Ok(fresh)
        })
    }

    /// Every session, ordered by key.
    fn list_sessions(&self) -> Result<Vec<SessionMeta>, StoreError> {
        self.read(|tx| {
            let table = tx.open_table(SESSIONS).map_err(db_err)?;
            let mut out = Vec::new();
            for kv in table.iter().map_err(db_err)? {
                let (_, v) = kv.map_err(db_err)?;
                out.push(decode("sessions", v.value())?);
            }
            Ok(out)
        })
    }

    fn settings_json(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.get(SETTINGS, key.as_bytes())
    }

    fn put_settings_json(&self, key: &str, json: &[u8]) -> Result<(), StoreError> {
        self.insert(SETTINGS, key.as_bytes(), json)
    }

    fn clear_settings(&self, key: &str) -> Result<(), StoreError> {
        self.remove(SETTINGS, key.as_bytes()).map(|_| ())
    }

    fn append(&self, key: &str, kind: EntryKind) -> Result<String, StoreError> {
        self.append_entry(key, kind)
    }

    fn entries(&self, key: &str) -> Result<Vec<Entry>, StoreError> {
        self.all_entries(key)
    }

    fn window_entries(&self, key: &str) -> Result<Vec<WindowMessage>, StoreError> {
        self.window_of(key)
    }

    fn export_jsonl(&self, key: &str, out: &mut dyn Write) -> Result<usize, StoreError> {
        self.export_lines(key, out)
    }

    fn import_jsonl(&self, key: &str, input: &mut dyn BufRead) -> Result<usize, StoreError> {
        self.import_lines_into(key, input)
    }
}
