//! Reading an OpenClaw state folder: transcripts (SQLite `agents/<id>/agent/
//! openclaw-agent.sqlite` of 2026.9, and `agents/<id>/sessions/*.jsonl` of older versions) and
//! pairing approvals (`state/openclaw.sqlite`, and the older `credentials/<channel>-allowFrom.json`).

use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

use super::files::{self, FileError, JSON_LIMIT, TRANSCRIPT_LIMIT};

/// The most one compressed transcript row may expand to.
pub const ROW_LIMIT: u64 = 16 << 20;
/// The most the compressed rows of one agent database may expand to together.
pub const ROWS_LIMIT: u64 = 512 << 20;

/// One OpenClaw session: its key and its transcript lines (header first).
pub struct ForeignSession {
    /// OpenClaw's session key (`agent:main:...`).
    pub key: String,
    /// Where it came from, for the summary.
    pub origin: String,
    /// The entries as JSON, header first.
    pub lines: Vec<Value>,
    /// Rows that could not be read (compressed or broken), counted.
    pub unreadable: usize,
}

/// Why the state folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// SQLite refused.
    #[error("{path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// A file could not be read, or was refused (not a regular file, too large).
    #[error(transparent)]
    File(#[from] FileError),
    /// A compressed transcript row expands past a limit (a decompression bomb, or more than
    /// chela imports).
    #[error(
        "{path}: {row} expands past {} MiB, the most chela reads from {what}; nothing was \
         imported",
        limit >> 20
    )]
    TooLarge {
        /// The database file.
        path: String,
        /// Which row: its session and `seq`.
        row: String,
        /// What the limit applies to: one row, or every row of the database.
        what: &'static str,
        /// The limit in bytes.
        limit: u64,
    },
}

/// Every session under `dir/agents`, sorted by key.
pub fn sessions(dir: &Path) -> Result<Vec<ForeignSession>, StateError> {
    let mut out = Vec::new();
    let agents = dir.join("agents");
    let Ok(read) = std::fs::read_dir(&agents) else {
        return Ok(out);
    };
    let mut agent_dirs: Vec<_> = read.flatten().map(|e| e.path()).collect();
    agent_dirs.sort();
    for agent_dir in agent_dirs {
        let db = agent_dir.join("agent").join("openclaw-agent.sqlite");
        if sqlite_file(&db)? {
            out.extend(sqlite_sessions(&db)?);
        }
        out.extend(jsonl_sessions(&agent_dir)?);
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(out)
}

/// The sessions of one agent database: each window's rows in `seq` order; a key with several
/// windows (reset, rollover) gets them oldest first, each after a `reset` entry.
fn sqlite_sessions(db: &Path) -> Result<Vec<ForeignSession>, StateError> {
    let err = |source| StateError::Sqlite {
        path: db.display().to_string(),
        source,
    };
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(err)?;
    let mut windows = conn
        .prepare(
            "SELECT session_id, session_key FROM session_windows ORDER BY session_key, created_at",
        )
        .map_err(err)?;
    let windows: Vec<(String, String)> = windows
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .map_err(err)?
        .collect::<Result<_, _>>()
        .map_err(err)?;
    let mut rows = conn
        .prepare("SELECT seq, event_json, event_zstd FROM transcript_events WHERE session_id = ?1 ORDER BY seq")
        .map_err(err)?;
    let mut out: Vec<ForeignSession> = Vec::new();
    let mut budget = ROWS_LIMIT;
    for (session_id, key) in windows {
        let events: Vec<Event> = rows
            .query_map([&session_id], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?))
            })
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        let mut lines = Vec::new();
        let mut unreadable = 0;
        for (seq, json, zstd) in events {
            let text = match (json, zstd) {
                (Some(json), _) => Some(json),
                (None, Some(bytes)) => {
                    let row = || format!("session {key}, row seq {seq}");
                    unzstd(&bytes, &mut budget).map_err(|(what, limit)| StateError::TooLarge {
                        path: db.display().to_string(),
                        row: row(),
                        what,
                        limit,
                    })?
                }
                (None, None) => None,
            };
            match text.and_then(|t| serde_json::from_str::<Value>(&t).ok()) {
                Some(value) => lines.push(value),
                None => unreadable += 1,
            }
        }
        match out.last_mut() {
            Some(previous) if previous.key == key => {
                append_window(previous, lines);
                previous.unreadable += unreadable;
            }
            _ => out.push(ForeignSession {
                key,
                origin: db.display().to_string(),
                lines,
                unreadable,
            }),
        }
    }
    Ok(out)
}

/// Appends a later window of the same key: a `reset` entry, then its entries (the header
/// dropped), the first re-parented onto the reset so the leaf's chain spans both.
fn append_window(session: &mut ForeignSession, lines: Vec<Value>) {
    let last_id = session
        .lines
        .last()
        .and_then(|v| v["id"].as_str())
        .map(str::to_string);
    let timestamp = lines
        .first()
        .map(|h| h["timestamp"].clone())
        .unwrap_or(Value::Null);
    let reset_id = format!("reset-{}", session.lines.len());
    session.lines.push(serde_json::json!({
        "type": "reset", "id": reset_id, "parentId": last_id, "timestamp": timestamp,
        "reason": "new OpenClaw session window",
    }));
    let mut parent = Some(reset_id);
    for mut line in lines.into_iter().filter(|l| l["type"] != "session") {
        if line["parentId"].is_null()
            && let Some(p) = parent.take()
        {
            line["parentId"] = Value::String(p);
        }
        session.lines.push(line);
    }
}

/// A transcript row: `seq`, the event as JSON text, or compressed.
type Event = (i64, Option<String>, Option<Vec<u8>>);

/// Decompresses a zstd frame to text (`None` when it is not a frame of UTF-8 text), reading
/// at most [`ROW_LIMIT`] and what is left of `budget` (taken from it). Past either, the
/// limit that stopped it, and what it applies to.
fn unzstd(bytes: &[u8], budget: &mut u64) -> Result<Option<String>, (&'static str, u64)> {
    let Ok(decoder) = ruzstd::decoding::StreamingDecoder::new(bytes) else {
        return Ok(None);
    };
    let cap = ROW_LIMIT.min(*budget);
    let mut out = Vec::new();
    if decoder
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .is_err()
    {
        return Ok(None);
    }
    let read = out.len() as u64;
    if read > cap {
        return Err(match cap == ROW_LIMIT {
            true => ("one row", ROW_LIMIT),
            false => ("the rows of one database together", ROWS_LIMIT),
        });
    }
    *budget -= read;
    Ok(String::from_utf8(out).ok())
}

/// Whether the SQLite database `db` is there as a regular file, its journal files (which
/// SQLite opens by name beside it) too: see [`files::regular`].
fn sqlite_file(db: &Path) -> Result<bool, FileError> {
    if !files::regular(db)? {
        return Ok(false);
    }
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        files::regular(Path::new(&name))?;
    }
    Ok(true)
}

/// The JSONL session files of older versions: `agents/<id>/sessions/*.jsonl`, keyed by
/// `sessions.json` (`{ "<key>": { "sessionId": ... } }`) when it names them.
fn jsonl_sessions(agent_dir: &Path) -> Result<Vec<ForeignSession>, StateError> {
    let dir = agent_dir.join("sessions");
    let Ok(read) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let index: Value = files::read_text(&dir.join("sessions.json"), JSON_LIMIT)?
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let agent = agent_dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("main");
    let mut out = Vec::new();
    let mut files: Vec<_> = read.flatten().map(|e| e.path()).collect();
    files.sort();
    for path in files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
    {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let key = index
            .as_object()
            .and_then(|m| m.iter().find(|(_, v)| v["sessionId"] == stem.as_str()))
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| format!("agent:{agent}:{stem}"));
        let Some(text) = files::read_text(&path, TRANSCRIPT_LIMIT)? else {
            continue; // gone since the folder was listed
        };
        let mut unreadable = 0;
        let lines = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| serde_json::from_str(l).map_err(|_| unreadable += 1).ok())
            .collect();
        out.push(ForeignSession {
            key,
            origin: path.display().to_string(),
            lines,
            unreadable,
        });
    }
    Ok(out)
}

/// One approved sender: (channel, account, sender id).
pub type Approval = (String, String, String);

/// Pairing approvals: `state/openclaw.sqlite` (2026.9) and `credentials/*-allowFrom.json`.
pub fn approvals(dir: &Path) -> Result<Vec<Approval>, StateError> {
    let mut out = Vec::new();
    let db = dir.join("state").join("openclaw.sqlite");
    if sqlite_file(&db)? {
        let err = |source| StateError::Sqlite {
            path: db.display().to_string(),
            source,
        };
        let conn =
            Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(err)?;
        let mut query = conn
            .prepare("SELECT channel_key, account_id, entry FROM channel_pairing_allow_entries ORDER BY channel_key, account_id, sort_order")
            .map_err(err)?;
        let rows = query
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .map_err(err)?;
        for row in rows {
            out.push(row.map_err(err)?);
        }
    }
    if let Ok(read) = std::fs::read_dir(dir.join("credentials")) {
        for path in read.flatten().map(|e| e.path()) {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let Some(channel) = name.strip_suffix("-allowFrom.json") else {
                continue;
            };
            let (channel, account) = channel.split_once('-').unwrap_or((channel, "default"));
            let value: Value = files::read_text(&path, JSON_LIMIT)?
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(Value::Null);
            let ids = value["allowFrom"].as_array().cloned().unwrap_or_default();
            for id in ids {
                out.push((channel.into(), account.into(), super::config::id_text(&id)));
            }
        }
    }
    out.dedup();
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":4,"id":"w","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}"#;

    fn message(id: &str, parent: Option<&str>, text: &str) -> String {
        serde_json::json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1}})
        .to_string()
    }

    #[test]
    fn windows_of_one_key_are_joined_by_a_reset_and_compressed_rows_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agents/main/agent");
        std::fs::create_dir_all(&agent).unwrap();
        let conn = Connection::open(agent.join("openclaw-agent.sqlite")).unwrap();
        conn.execute_batch(
            "CREATE TABLE session_windows (session_id TEXT, session_key TEXT, created_at INTEGER);
             CREATE TABLE transcript_events (session_id TEXT, seq INTEGER, event_json TEXT, event_zstd BLOB);
             INSERT INTO session_windows VALUES ('w1', 'agent:main:main', 1), ('w2', 'agent:main:main', 2);",
        )
        .unwrap();
        let rows = [
            ("w1", 0, HEADER.to_string()),
            ("w1", 1, message("a", None, "first window")),
            ("w2", 0, HEADER.to_string()),
            ("w2", 1, message("b", None, "second window")),
        ];
        for (window, seq, json) in rows {
            if seq == 1 && window == "w2" {
                let zstd = ruzstd::encoding::compress_to_vec(
                    json.as_bytes(),
                    ruzstd::encoding::CompressionLevel::Fastest,
                );
                conn.execute(
                    "INSERT INTO transcript_events VALUES (?1, ?2, NULL, ?3)",
                    rusqlite::params![window, seq, zstd],
                )
                .unwrap();
            } else {
                conn.execute(
                    "INSERT INTO transcript_events VALUES (?1, ?2, ?3, NULL)",
                    rusqlite::params![window, seq, json],
                )
                .unwrap();
            }
        }
        drop(conn);
        let sessions = sessions(dir.path()).unwrap();
        assert_eq!(sessions.len(), 1);
        assert_eq!(sessions[0].unreadable, 0);
        let converted = chela::store::foreign::convert_values(sessions[0].lines.clone()).unwrap();
        let kinds: Vec<&str> = converted
            .entries
            .iter()
            .skip(1)
            .map(|e| match e {
                chela::store::Entry::Item(item) => item.kind.type_name(),
                chela::store::Entry::Session(_) => "session",
            })
            .collect();
        assert_eq!(kinds, ["message", "reset", "message"]);
        assert!(
            converted.not_carried.is_empty(),
            "{:?}",
            converted.not_carried
        );
    }

    /// A zstd frame of `total` spaces in RLE blocks of 128 KiB (4 bytes each).
    fn rle(total: usize) -> Vec<u8> {
        const BLOCK: usize = 128 * 1024;
        let mut out = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38];
        let blocks = total / BLOCK;
        for i in 0..blocks {
            let header = ((BLOCK as u32) << 3) | (1 << 1) | u32::from(i + 1 == blocks);
            out.extend_from_slice(&header.to_le_bytes()[..3]);
            out.push(b' ');
        }
        out
    }

    #[test]
    fn compressed_rows_are_read_up_to_a_limit_per_row_and_in_all() {
        let small = ruzstd::encoding::compress_to_vec(
            &b"{\"a\":1}"[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        let mut budget = ROWS_LIMIT;
        let text = unzstd(&small, &mut budget).unwrap();
        assert_eq!(text.as_deref(), Some("{\"a\":1}"));
        assert_eq!(budget, ROWS_LIMIT - 7);
        assert_eq!(
            unzstd(&rle(1 << 20), &mut budget).unwrap().unwrap().len(),
            1 << 20
        );
        let bomb = rle(ROW_LIMIT as usize + (128 << 10));
        assert_eq!(unzstd(&bomb, &mut budget), Err(("one row", ROW_LIMIT)));
        let mut budget = 1 << 20;
        assert_eq!(
            unzstd(&rle(2 << 20), &mut budget),
            Err(("the rows of one database together", ROWS_LIMIT))
        );
        assert_eq!(unzstd(b"not zstd", &mut budget), Ok(None));
    }

    #[test]
    fn older_jsonl_sessions_and_allow_from_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let sessions_dir = dir.path().join("agents/main/sessions");
        std::fs::create_dir_all(&sessions_dir).unwrap();
        std::fs::write(
            sessions_dir.join("sessions.json"),
            r#"{"agent:main:telegram:direct:7": {"sessionId": "abc"}}"#,
        )
        .unwrap();
        std::fs::write(
            sessions_dir.join("abc.jsonl"),
            format!("{HEADER}\n{}\n", message("a", None, "hi")),
        )
        .unwrap();
        let credentials = dir.path().join("credentials");
        std::fs::create_dir_all(&credentials).unwrap();
        std::fs::write(
            credentials.join("telegram-allowFrom.json"),
            r#"{"version":1,"allowFrom":["7", 8]}"#,
        )
        .unwrap();
        let found = sessions(dir.path()).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].key, "agent:main:telegram:direct:7");
        assert_eq!(found[0].lines.len(), 2);
        let approvals = approvals(dir.path()).unwrap();
        assert_eq!(
            approvals,
            [
                ("telegram".into(), "default".into(), "7".into()),
                ("telegram".into(), "default".into(), "8".into()),
            ]
        );
    }
}
