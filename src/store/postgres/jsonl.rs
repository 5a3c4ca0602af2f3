//! JSONL export and import of a transcript over PostgreSQL. Export writes the stored bytes
//! as they are; import validates every line first, then replaces the session's (empty)
//! transcript in one transaction, so a refused or raced import stores nothing.

use std::collections::HashSet;
use std::io::{BufRead, Write};

use super::conn::Conn;

use super::{PgStore, big, pg_err, transaction};
use crate::store::entry::{Entry, TRANSCRIPT_VERSION};
use crate::store::{SessionStore, StoreError};

/// A validated import: every line (entry id, exact bytes), header first.
struct Parsed {
    lines: Vec<(Option<String>, Vec<u8>)>,
    last_entry_id: Option<String>,
    created_ms: Option<u64>,
}

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

/// Validates every line of `input`.
fn parse(input: &mut dyn BufRead) -> Result<Parsed, StoreError> {
    let mut buf = Vec::new();
    let mut line_no = 0;
    let mut parsed = Parsed {
        lines: Vec::new(),
        last_entry_id: None,
        created_ms: None,
    };
    let mut ids = HashSet::new();
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        line_no += 1;
        let mut line = buf.as_slice();
        if let Some(rest) = line.strip_suffix(b"\n") {
            line = rest;
        }
        if let Some(rest) = line.strip_suffix(b"\r") {
            line = rest;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let invalid = |reason: String| StoreError::InvalidImport {
            line: line_no,
            reason,
        };
        let entry: Entry = serde_json::from_slice(line).map_err(|e| invalid(e.to_string()))?;
        let entry_id = match (parsed.lines.is_empty(), entry) {
            (true, Entry::Session(h)) => {
                if h.version != TRANSCRIPT_VERSION {
                    return Err(invalid(format!(
                        "transcript version {} is not supported (expected {TRANSCRIPT_VERSION})",
                        h.version
                    )));
                }
                parsed.created_ms = crate::store::iso_to_ms(&h.timestamp);
                None
            }
            (true, Entry::Item(_)) => {
                return Err(invalid("the first line must be the session header".into()));
            }
            (false, Entry::Session(_)) => return Err(invalid("a second session header".into())),
            (false, Entry::Item(item)) => {
                if item.parent_id != parsed.last_entry_id {
                    return Err(invalid(format!(
                        "parentId {:?} is not the previous entry's id {:?}",
                        item.parent_id, parsed.last_entry_id
                    )));
                }
                if !ids.insert(item.id.clone()) {
                    return Err(invalid(format!("entry id {} appears twice", item.id)));
                }
                parsed.last_entry_id = Some(item.id.clone());
                Some(item.id)
            }
        };
        parsed.lines.push((entry_id, line.to_vec()));
    }
    if parsed.lines.is_empty() {
        return Err(StoreError::InvalidImport {
            line: line_no,
            reason: "no session header: the input is empty".into(),
        });
    }
    Ok(parsed)
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parse_keeps_exact_bytes_and_drops_blank_lines() {
        let input = concat!(
            r#"{"type":"session", "version":4,"id":"abc","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/"}"#,
            "\r\n\n",
            r#"{"type":"reset","id":"00000001","parentId":null,"timestamp":"t","reason":"/new"}"#,
            "\n",
        );
        let parsed = parse(&mut input.as_bytes()).unwrap();
        assert_eq!(parsed.lines.len(), 2);
        assert_eq!(parsed.lines[0].0, None);
        assert!(
            parsed.lines[0]
                .1
                .starts_with(br#"{"type":"session", "version""#)
        );
        assert_eq!(parsed.last_entry_id.as_deref(), Some("00000001"));
    }
}
