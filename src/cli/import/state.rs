//! Reading an OpenClaw state folder: transcripts (SQLite `agents/<id>/agent/
//! openclaw-agent.sqlite` of 2026.9, and `agents/<id>/sessions/*.jsonl` of older versions) and
//! pairing approvals (`state/openclaw.sqlite`, and the older `credentials/<channel>-allowFrom.json`).

use std::io::Read;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::Value;

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
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
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
        if db.is_file() {
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
        .prepare("SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ?1 ORDER BY seq")
        .map_err(err)?;
    let mut out: Vec<ForeignSession> = Vec::new();
    for (session_id, key) in windows {
        let events: Vec<(Option<String>, Option<Vec<u8>>)> = rows
            .query_map([&session_id], |row| Ok((row.get(0)?, row.get(1)?)))
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?;
        let mut lines = Vec::new();
        let mut unreadable = 0;
        for (json, zstd) in events {
            let text = json.or_else(|| zstd.and_then(|bytes| unzstd(&bytes)));
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

/// Decompresses a zstd frame to text.
fn unzstd(bytes: &[u8]) -> Option<String> {
    let mut decoder = ruzstd::decoding::StreamingDecoder::new(bytes).ok()?;
    let mut text = String::new();
    decoder.read_to_string(&mut text).ok()?;
    Some(text)
}

/// The JSONL session files of older versions: `agents/<id>/sessions/*.jsonl`, keyed by
/// `sessions.json` (`{ "<key>": { "sessionId": ... } }`) when it names them.
fn jsonl_sessions(agent_dir: &Path) -> Result<Vec<ForeignSession>, StateError> {
    let dir = agent_dir.join("sessions");
    let Ok(read) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let index: Value = std::fs::read_to_string(dir.join("sessions.json"))
        .ok()
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
        let text = std::fs::read_to_string(&path).map_err(|source| StateError::Io {
            path: path.display().to_string(),
            source,
        })?;
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
    if db.is_file() {
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
            let value: Value = std::fs::read_to_string(&path)
                .ok()
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
