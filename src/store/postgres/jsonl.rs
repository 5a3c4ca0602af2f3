//! JSONL export and import of a transcript over PostgreSQL. Export writes the stored bytes
//! as they are; import validates every line first, then replaces the session's (empty)
//! transcript in one transaction, so a refused or raced import stores nothing.

use std::io::{BufRead, Write};

use super::conn::Conn;

use super::{PgStore, big, pg_err, transaction};
use crate::store::error::StoreError;
use crate::store::import::{Parsed, parse};
use crate::store::ports::SessionStore;

impl PgStore {
    /// [`SessionStore::export_jsonl`]: the stored lines as they are.
    pub(super) fn export_lines(&self, key: &str, out: &mut dyn Write) -> Result<usize, StoreError> {
        let meta = self.session_or_err(key)?;
        let sid = meta.session_id;
        let lines: Vec<Vec<u8>> = self.blocking(move |c| async move {
            let rows = c
                .query(
                    "SELECT line FROM transcript WHERE session_id = $1 ORDER BY seq",
                    &[&sid],
                )
                .await
                .map_err(pg_err)?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })?;
        for line in &lines {
            out.write_all(line)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        Ok(lines.len())
    }

    /// [`SessionStore::import_jsonl`].
    pub(super) fn import_lines(
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
        let parsed = parse(input)?;
        let key = key.to_owned();
        self.blocking(move |c| async move { store_import(&c, &key, parsed).await })
    }
}

/// Stores a validated import as session `key` (replacing a session with only its header),
/// in one transaction; refuses a session that has entries by now.
async fn store_import(c: &Conn, key: &str, parsed: Parsed) -> Result<usize, StoreError> {
    let entries = parsed.lines.len() - 1;
    transaction(c, async |c: &Conn| {
        let old = c
            .query_opt(
                "SELECT session_id, entries FROM sessions WHERE key = $1 FOR UPDATE",
                &[&key],
            )
            .await
            .map_err(pg_err)?;
        if let Some(row) = &old {
            let had: i64 = row.get(1);
            if had > 0 {
                return Err(StoreError::SessionExists {
                    key: key.to_owned(),
                    entries: super::unbig(had),
                });
            }
            let old_sid: String = row.get(0);
            c.execute("DELETE FROM transcript WHERE session_id = $1", &[&old_sid])
                .await
                .map_err(pg_err)?;
        }
        let sid = uuid::Uuid::new_v4().to_string();
        let seqs: Vec<i64> = (0..parsed.lines.len()).map(|s| big(s as u64)).collect();
        let (ids, lines): (Vec<Option<String>>, Vec<Vec<u8>>) = parsed.lines.into_iter().unzip();
        c.execute(
            "INSERT INTO transcript (session_id, seq, entry_id, line) \
             SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::bytea[])",
            &[&sid, &seqs, &ids, &lines],
        )
        .await
        .map_err(pg_err)?;
        let now = crate::domain::message::now_ms();
        let created = big(parsed.created_ms.unwrap_or(now));
        // Only over a session with no entries: one created meanwhile elsewhere is kept.
        let stored = c.execute(
            "INSERT INTO sessions (key, session_id, created_ms, updated_ms, entries, last_entry_id) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO UPDATE SET \
             session_id = EXCLUDED.session_id, created_ms = EXCLUDED.created_ms, \
             updated_ms = EXCLUDED.updated_ms, entries = EXCLUDED.entries, \
             last_entry_id = EXCLUDED.last_entry_id WHERE sessions.entries = 0",
            &[
                &key,
                &sid,
                &created,
                &big(now),
                &big(entries as u64),
                &parsed.last_entry_id,
            ],
        )
        .await
        .map_err(pg_err)?;
        if stored == 0 {
            return Err(StoreError::SessionExists {
                key: key.to_owned(),
                entries: super::sessions::session_of(c, key).await?.map_or(0, |m| m.entries),
            });
        }
        Ok(entries)
    })
    .await
}
