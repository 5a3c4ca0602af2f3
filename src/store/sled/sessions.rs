//! Session metadata (`sessions`: session key -> [`SessionMeta`]) and per-key settings
//! (`settings`: key -> JSON); the rest of [`SessionStore`] is in `transcript.rs` and `jsonl.rs`.

use std::io::{BufRead, Write};

use sled::Transactional;

use super::transcript::transcript_key;
use super::{SledStore, db_err, now_ms, tx_err};
use crate::store::codec::{decode, encode};
use crate::store::entry::{Entry, EntryKind, SessionHeader, TRANSCRIPT_VERSION};
use crate::store::error::StoreError;
use crate::store::ports::{SessionMeta, SessionStore, WindowMessage};
use crate::store::timestamp::now_iso;

impl SessionStore for SledStore {
    /// The metadata of session `key`, if it exists.
    fn get_session(&self, key: &str) -> Result<Option<SessionMeta>, StoreError> {
        match self.inner.sessions.get(key).map_err(db_err)? {
            Some(bytes) => Ok(Some(decode("sessions", &bytes)?)),
            None => Ok(None),
        }
    }

    /// The metadata of session `key`, creating the session (metadata and transcript header
    /// with working directory `cwd`) on first use.
    fn ensure_session(&self, key: &str, cwd: &str) -> Result<SessionMeta, StoreError> {
        if let Some(meta) = self.get_session(key)? {
            return Ok(meta);
        }
        let session_id = uuid::Uuid::new_v4().to_string();
        let header = Entry::Session(SessionHeader {
            version: TRANSCRIPT_VERSION,
            id: session_id.clone(),
            timestamp: now_iso(),
            cwd: cwd.to_string(),
        });
        let header_bytes = encode(&header)?;
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
        let inner = &self.inner;
        (&inner.sessions, &inner.transcript)
            .transaction(|(sessions, transcript)| {
                // Another caller may have created it since we looked.
                if let Some(bytes) = sessions.get(key)? {
                    return match decode("sessions", &bytes) {
                        Ok(meta) => Ok(meta),
                        Err(e) => super::abort(e),
                    };
                }
                transcript.insert(transcript_key(&session_id, 0), header_bytes.as_slice())?;
                sessions.insert(key.as_bytes(), fresh_bytes.as_slice())?;
                Ok(fresh.clone())
            })
            .map_err(tx_err)
    }

    /// Every session, ordered by key.
    fn list_sessions(&self) -> Result<Vec<SessionMeta>, StoreError> {
        self.inner
            .sessions
            .iter()
            .map(|kv| {
                let (_, v) = kv.map_err(db_err)?;
                decode("sessions", &v)
            })
            .collect()
    }

    fn settings_json(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let bytes = self.inner.settings.get(key).map_err(db_err)?;
        Ok(bytes.map(|b| b.to_vec()))
    }

    fn put_settings_json(&self, key: &str, json: &[u8]) -> Result<(), StoreError> {
        self.inner.settings.insert(key, json).map_err(db_err)?;
        Ok(())
    }

    /// Removes the settings of session `key`.
    fn clear_settings(&self, key: &str) -> Result<(), StoreError> {
        self.inner.settings.remove(key).map_err(db_err)?;
        Ok(())
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::store::Store;
    use serde::{Deserialize, Serialize};

    #[test]
    fn ensure_session_creates_once_and_writes_the_header() {
        let store = Store::temporary().unwrap();
        assert!(store.get_session("agent:main:main").unwrap().is_none());
        let a = store.ensure_session("agent:main:main", "/work").unwrap();
        let b = store
            .ensure_session("agent:main:main", "/elsewhere")
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.entries, 0);
        assert!(uuid::Uuid::parse_str(&a.session_id).is_ok());
        let entries = store.entries("agent:main:main").unwrap();
        assert_eq!(entries.len(), 1);
        match &entries[0] {
            Entry::Session(h) => {
                assert_eq!(h.version, 4);
                assert_eq!(h.id, a.session_id);
                assert_eq!(h.cwd, "/work");
            }
            other => panic!("expected a header, got {other:?}"),
        }
    }

    #[test]
    fn sessions_are_listed_by_key() {
        let store = Store::temporary().unwrap();
        for key in ["agent:b:main", "agent:a:main", "agent:c:main"] {
            store.ensure_session(key, "/").unwrap();
        }
        let keys: Vec<String> = store
            .list_sessions()
            .unwrap()
            .into_iter()
            .map(|m| m.key)
            .collect();
        assert_eq!(keys, ["agent:a:main", "agent:b:main", "agent:c:main"]);
    }

    #[test]
    fn settings_round_trip_and_clear() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Queue {
            mode: String,
            cap: u32,
        }
        let store = Store::temporary().unwrap();
        assert_eq!(store.get_settings::<Queue>("k").unwrap(), None);
        let q = Queue {
            mode: "collect".into(),
            cap: 5,
        };
        store.put_settings("k", &q).unwrap();
        assert_eq!(store.get_settings::<Queue>("k").unwrap(), Some(q));
        store.clear_settings("k").unwrap();
        assert_eq!(store.get_settings::<Queue>("k").unwrap(), None);
    }
}
