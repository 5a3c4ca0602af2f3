//! [`SessionStore`] over PostgreSQL: `sessions` (metadata), `settings`, and `transcript`
//! (each line's exact bytes; seq 0 is the header, entry ids unique per session). Export and
//! import are in `jsonl.rs`.

use std::io::{BufRead, Write};

use tokio_postgres::Row;

use super::conn::Conn;

use super::{PgStore, big, pg_err, transaction, unbig};
use crate::domain::message::{ContentBlock, Message, UserMessage};
use crate::store::codec::{decode, encode};
use crate::store::entry::{Entry, EntryKind, Item, SessionHeader, TRANSCRIPT_VERSION};
use crate::store::error::StoreError;
use crate::store::ports::{SUMMARY_HEADING, SessionMeta, SessionStore, WindowMessage};

/// How many lines the window reads per query, going backwards from the end.
const WINDOW_BATCH: i64 = 64;

/// The columns of a [`SessionMeta`], in the order [`meta_of`] reads them.
pub(super) const META_COLUMNS: &str =
    "key, session_id, created_ms, updated_ms, entries, last_entry_id";

/// A `sessions` row (selected with [`META_COLUMNS`]) as [`SessionMeta`].
pub(super) fn meta_of(row: &Row) -> SessionMeta {
    SessionMeta {
        key: row.get(0),
        session_id: row.get(1),
        created_ms: unbig(row.get(2)),
        updated_ms: unbig(row.get(3)),
        entries: unbig(row.get(4)),
        last_entry_id: row.get(5),
    }
}

/// The metadata of session `key`, if any.
pub(super) async fn session_of(c: &Conn, key: &str) -> Result<Option<SessionMeta>, StoreError> {
    let sql = format!("SELECT {META_COLUMNS} FROM sessions WHERE key = $1");
    let row = c.query_opt(&sql, &[&key]).await.map_err(pg_err)?;
    Ok(row.as_ref().map(meta_of))
}

/// A fresh entry id: 8 lowercase hex chars.
fn random_entry_id() -> String {
    let mut id = uuid::Uuid::new_v4().simple().to_string();
    id.truncate(8);
    id
}

impl SessionStore for PgStore {
    fn get_session(&self, key: &str) -> Result<Option<SessionMeta>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move { session_of(&c, &key).await })
    }

    fn ensure_session(&self, key: &str, cwd: &str) -> Result<SessionMeta, StoreError> {
        let (key, cwd) = (key.to_owned(), cwd.to_owned());
        self.blocking(move |c| async move { ensure(&c, &key, &cwd).await })
    }

    fn list_sessions(&self) -> Result<Vec<SessionMeta>, StoreError> {
        self.blocking(move |c| async move {
            let sql = format!("SELECT {META_COLUMNS} FROM sessions ORDER BY key");
            let rows = c.query(&sql, &[]).await.map_err(pg_err)?;
            Ok(rows.iter().map(meta_of).collect())
        })
    }

    fn settings_json(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            let row = c
                .query_opt("SELECT json FROM settings WHERE key = $1", &[&key])
                .await
                .map_err(pg_err)?;
            Ok(row.map(|r| r.get(0)))
        })
    }

    fn put_settings_json(&self, key: &str, json: &[u8]) -> Result<(), StoreError> {
        let (key, json) = (key.to_owned(), json.to_vec());
        self.blocking(move |c| async move {
            c.execute(
                "INSERT INTO settings (key, json) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET json = EXCLUDED.json",
                &[&key, &json],
            )
            .await
            .map_err(pg_err)?;
            Ok(())
        })
    }

    fn clear_settings(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            c.execute("DELETE FROM settings WHERE key = $1", &[&key])
                .await
                .map_err(pg_err)?;
            Ok(())
        })
    }

    fn append(&self, key: &str, kind: EntryKind) -> Result<String, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move { append(&c, &key, kind).await })
    }

    fn entries(&self, key: &str) -> Result<Vec<Entry>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move {
            let meta = session_of(&c, &key)
                .await?
                .ok_or(StoreError::UnknownSession(key))?;
            let rows = c
                .query(
                    "SELECT line FROM transcript WHERE session_id = $1 ORDER BY seq",
                    &[&meta.session_id],
                )
                .await
                .map_err(pg_err)?;
            rows.iter()
                .map(|r| decode("transcript", r.get::<_, &[u8]>(0)))
                .collect()
        })
    }

    fn window_entries(&self, key: &str) -> Result<Vec<WindowMessage>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |c| async move { window(&c, &key).await })
    }

    fn export_jsonl(&self, key: &str, out: &mut dyn Write) -> Result<usize, StoreError> {
        self.export_lines(key, out)
    }

    fn import_jsonl(&self, key: &str, input: &mut dyn BufRead) -> Result<usize, StoreError> {
        self.import_lines(key, input)
    }
}

/// [`SessionStore::ensure_session`]: the metadata and the header in one transaction; a
/// concurrent creator (this or another process) wins and its session is returned.
async fn ensure(c: &Conn, key: &str, cwd: &str) -> Result<SessionMeta, StoreError> {
    if let Some(meta) = session_of(c, key).await? {
        return Ok(meta);
    }
    let session_id = uuid::Uuid::new_v4().to_string();
    let header = encode(&Entry::Session(SessionHeader {
        version: TRANSCRIPT_VERSION,
        id: session_id.clone(),
        timestamp: crate::store::timestamp::now_iso(),
        cwd: cwd.to_string(),
    }))?;
    let now = big(crate::domain::message::now_ms());
    let created = transaction(c, async |c: &Conn| {
        let inserted = c
            .execute(
                "INSERT INTO sessions (key, session_id, created_ms, updated_ms, entries) \
                 VALUES ($1, $2, $3, $3, 0) ON CONFLICT (key) DO NOTHING",
                &[&key, &session_id, &now],
            )
            .await
            .map_err(pg_err)?;
        if inserted == 1 {
            c.execute(
                "INSERT INTO transcript (session_id, seq, line) VALUES ($1, 0, $2)",
                &[&session_id, &header],
            )
            .await
            .map_err(pg_err)?;
        }
        Ok(inserted == 1)
    })
    .await?;
    if !created {
        tracing::debug!(key, "session created concurrently elsewhere");
    }
    session_of(c, key)
        .await?
        .ok_or_else(|| StoreError::UnknownSession(key.to_owned()))
}

/// [`SessionStore::append`]: one transaction, the session row locked so appends of several
/// callers chain one after the other.
async fn append(c: &Conn, key: &str, kind: EntryKind) -> Result<String, StoreError> {
    transaction(c, async |c: &Conn| {
        let sql = format!("SELECT {META_COLUMNS} FROM sessions WHERE key = $1 FOR UPDATE");
        let row = c.query_opt(&sql, &[&key]).await.map_err(pg_err)?;
        let meta = row
            .as_ref()
            .map(meta_of)
            .ok_or_else(|| StoreError::UnknownSession(key.to_owned()))?;
        let seq = big(meta.entries + 1);
        // The session row's lock keeps `seq` free; an id already used in the session (the
        // unique index) is drawn again.
        let id = loop {
            let id = random_entry_id();
            let line = encode(&Entry::Item(Item {
                id: id.clone(),
                parent_id: meta.last_entry_id.clone(),
                timestamp: crate::store::timestamp::now_iso(),
                kind: kind.clone(),
            }))?;
            let inserted = c
                .execute(
                    "INSERT INTO transcript (session_id, seq, entry_id, line) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (session_id, entry_id) WHERE entry_id IS NOT NULL DO NOTHING",
                    &[&meta.session_id, &seq, &id, &line],
                )
                .await
                .map_err(pg_err)?;
            if inserted == 1 {
                break id;
            }
        };
        c.execute(
            "UPDATE sessions SET entries = $2, updated_ms = $3, last_entry_id = $4 WHERE key = $1",
            &[&key, &seq, &big(crate::domain::message::now_ms()), &id],
        )
        .await
        .map_err(pg_err)?;
        Ok(id)
    })
    .await
}

/// [`SessionStore::window_entries`]: read backwards from the end in batches until the last
/// reset or compaction, so its cost follows the window, not the transcript.
async fn window(c: &Conn, key: &str) -> Result<Vec<WindowMessage>, StoreError> {
    let meta = session_of(c, key)
        .await?
        .ok_or_else(|| StoreError::UnknownSession(key.to_owned()))?;
    let sid = &meta.session_id;
    let mut tail = Vec::new();
    let mut compaction = None;
    let mut before = big(meta.entries) + 1;
    'read: while before > 0 {
        let rows = c
            .query(
                "SELECT seq, line FROM transcript WHERE session_id = $1 AND seq < $2 \
                 ORDER BY seq DESC LIMIT $3",
                &[sid, &before, &WINDOW_BATCH],
            )
            .await
            .map_err(pg_err)?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            before = row.get(0);
            let Entry::Item(item) = decode("transcript", row.get::<_, &[u8]>(1))? else {
                break 'read;
            };
            match item.kind {
                EntryKind::Message(m) => tail.push(WindowMessage::stored(item.id, m)),
                EntryKind::ModelChange { .. } => {}
                EntryKind::Reset { .. } => break 'read,
                EntryKind::Compaction {
                    summary,
                    first_kept_entry_id,
                    ..
                } => {
                    compaction = Some((before, summary, first_kept_entry_id, item.timestamp));
                    break 'read;
                }
            }
        }
    }
    tail.reverse();
    let Some((compaction_seq, summary, first_kept, timestamp)) = compaction else {
        return Ok(tail);
    };
    let mut window = vec![WindowMessage {
        entry_id: None,
        message: Message::User(UserMessage {
            content: vec![ContentBlock::text(format!("{SUMMARY_HEADING}\n{summary}"))],
            timestamp: crate::store::timestamp::iso_to_ms(&timestamp).unwrap_or(0),
        }),
    }];
    let rows = c
        .query(
            "SELECT t.line FROM transcript t, transcript f \
             WHERE f.session_id = $1 AND f.entry_id = $2 AND f.seq > 0 \
             AND t.session_id = $1 AND t.seq >= f.seq AND t.seq < $3 ORDER BY t.seq",
            &[sid, &first_kept, &compaction_seq],
        )
        .await
        .map_err(pg_err)?;
    for row in &rows {
        if let Entry::Item(item) = decode("transcript", row.get::<_, &[u8]>(0))? {
            match item.kind {
                EntryKind::Message(m) => window.push(WindowMessage::stored(item.id, m)),
                // A kept entry before a reset would cross it: start again after it.
                EntryKind::Reset { .. } => window.truncate(1),
                _ => {}
            }
        }
    }
    window.extend(tail);
    Ok(window)
}
