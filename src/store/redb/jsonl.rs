//! Transcript export and import as JSONL: export writes each stored line as it is; import
//! parses the lines (`../import.rs`) and writes the whole transcript and the session's
//! metadata in one transaction, so a failed or refused import leaves nothing behind.

use std::io::{BufRead, Write};

use super::transcript::{entry_id_key, transcript_key, transcript_prefix};
use super::{ENTRY_IDS, RedbStore, SESSIONS, TRANSCRIPT, db_err, get, now_ms, scan};
use crate::store::codec::{decode, encode};
use crate::store::error::StoreError;
use crate::store::ports::{SessionMeta, SessionStore};

impl RedbStore {
    /// [`SessionStore::export_jsonl`].
    pub(super) fn export_lines(&self, key: &str, out: &mut dyn Write) -> Result<usize, StoreError> {
        let meta = self.session_or_err(key)?;
        let lines = self.scan(TRANSCRIPT, &transcript_prefix(&meta.session_id))?;
        for (_, v) in &lines {
            out.write_all(v)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(lines.len())
    }

    /// [`SessionStore::import_jsonl`]: refused when the session has entries; a session with
    /// only its header is replaced.
    pub(super) fn import_lines_into(
        &self,
        key: &str,
        input: &mut dyn BufRead,
    ) -> Result<usize, StoreError> {
        if let Some(meta) = self.get_session(key)?
            && meta.entries > 0
        {
            return Err(StoreError::SessionExists {
                key: key.to_string(),
                entries: meta.entries,
            });
        }
        let parsed = crate::store::import::parse(input)?;
        let session_id = uuid::Uuid::new_v4().to_string();
        let now = now_ms();
        let meta = SessionMeta {
            key: key.to_string(),
            session_id: session_id.clone(),
            created_ms: parsed.created_ms.unwrap_or(now),
            updated_ms: now,
            entries: parsed.lines.len() as u64 - 1,
            last_entry_id: parsed.last_entry_id.clone(),
        };
        let meta_bytes = encode(&meta)?;
        self.write(|tx| {
            let mut sessions = tx.open_table(SESSIONS).map_err(db_err)?;
            let old: Option<SessionMeta> = match get(&sessions, key.as_bytes())? {
                Some(bytes) => Some(decode("sessions", &bytes)?),
                None => None,
            };
            if let Some(old) = &old
                && old.entries > 0
            {
                return Err(StoreError::SessionExists {
                    key: key.to_string(),
                    entries: old.entries,
                });
            }
            let mut transcript = tx.open_table(TRANSCRIPT).map_err(db_err)?;
            let mut entry_ids = tx.open_table(ENTRY_IDS).map_err(db_err)?;
            if let Some(old) = old {
                let prefix = transcript_prefix(&old.session_id);
                for (k, _) in scan(&transcript, &prefix)? {
                    transcript.remove(k.as_slice()).map_err(db_err)?;
                }
                for (k, _) in scan(&entry_ids, &prefix)? {
                    entry_ids.remove(k.as_slice()).map_err(db_err)?;
                }
            }
            for (seq, (entry_id, line)) in (0u64..).zip(&parsed.lines) {
                if let Some(id) = entry_id {
                    entry_ids
                        .insert(
                            entry_id_key(&session_id, id).as_slice(),
                            &seq.to_be_bytes()[..],
                        )
                        .map_err(db_err)?;
                }
                transcript
                    .insert(transcript_key(&session_id, seq).as_slice(), line.as_slice())
                    .map_err(db_err)?;
            }
            sessions
                .insert(key.as_bytes(), meta_bytes.as_slice())
                .map_err(db_err)?;
            Ok(meta.entries as usize)
        })
    }
}
