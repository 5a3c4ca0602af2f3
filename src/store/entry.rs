//! Transcript entries in the OpenClaw/pi JSONL schema, version 4 (SPEC 6).
//!
//! A transcript is a header line (`{"type":"session","version":4,"id","timestamp","cwd"}`)
//! followed by entries, each with `type`, `id` (8 lowercase hex chars), `parentId` (the previous
//! entry's id, `null` for the first) and `timestamp` (ISO 8601 UTC with milliseconds), then the
//! fields of its kind. Fields are written in that order; unknown fields are ignored on reading.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};

use crate::domain::message::Message;

/// The transcript schema version chela writes and accepts.
pub const TRANSCRIPT_VERSION: u32 = 4;

/// One line of a transcript.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "Wire")]
pub enum Entry {
    /// The header, always the first line.
    Session(SessionHeader),
    /// Any later line.
    Item(Item),
}

/// The transcript header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHeader {
    /// Schema version ([`TRANSCRIPT_VERSION`]).
    pub version: u32,
    /// Session id (a uuid for sessions chela created).
    pub id: String,
    /// When the session started, ISO 8601 UTC.
    pub timestamp: String,
    /// Working directory of the session.
    pub cwd: String,
}

/// A transcript entry after the header.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// 8 lowercase hex chars, unique within the session.
    pub id: String,
    /// The previous entry's id; `None` for the first entry after the header.
    pub parent_id: Option<String>,
    /// When it was written, ISO 8601 UTC with milliseconds.
    pub timestamp: String,
    /// What it records.
    pub kind: EntryKind,
}

/// What an entry records.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    /// `message`: one conversation message.
    Message(Message),
    /// `model_change`: the session switched model.
    ModelChange {
        /// Provider name.
        provider: String,
        /// Model id.
        model_id: String,
    },
    /// `compaction`: older messages are replaced by `summary` in the model window.
    Compaction {
        /// Summary of the messages before `first_kept_entry_id`.
        summary: String,
        /// The first entry kept verbatim after the summary.
        first_kept_entry_id: String,
        /// Context size before compaction, in tokens.
        tokens_before: u64,
    },
    /// `reset`: `/new` or `/reset`; the model window starts after it.
    Reset {
        /// Why (the command, or a note).
        reason: String,
    },
}

impl EntryKind {
    /// The `type` tag of this kind.
    pub fn type_name(&self) -> &'static str {
        match self {
            EntryKind::Message(_) => "message",
            EntryKind::ModelChange { .. } => "model_change",
            EntryKind::Compaction { .. } => "compaction",
            EntryKind::Reset { .. } => "reset",
        }
    }
}

impl Serialize for Entry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match self {
            Entry::Session(h) => {
                m.serialize_entry("type", "session")?;
                m.serialize_entry("version", &h.version)?;
                m.serialize_entry("id", &h.id)?;
                m.serialize_entry("timestamp", &h.timestamp)?;
                m.serialize_entry("cwd", &h.cwd)?;
            }
            Entry::Item(item) => {
                m.serialize_entry("type", item.kind.type_name())?;
                m.serialize_entry("id", &item.id)?;
                m.serialize_entry("parentId", &item.parent_id)?;
                m.serialize_entry("timestamp", &item.timestamp)?;
                match &item.kind {
                    EntryKind::Message(message) => m.serialize_entry("message", message)?,
                    EntryKind::ModelChange { provider, model_id } => {
                        m.serialize_entry("provider", provider)?;
                        m.serialize_entry("modelId", model_id)?;
                    }
                    EntryKind::Compaction {
                        summary,
                        first_kept_entry_id,
                        tokens_before,
                    } => {
                        m.serialize_entry("summary", summary)?;
                        m.serialize_entry("firstKeptEntryId", first_kept_entry_id)?;
                        m.serialize_entry("tokensBefore", tokens_before)?;
                    }
                    EntryKind::Reset { reason } => m.serialize_entry("reason", reason)?,
                }
            }
        }
        m.end()
    }
}

/// The reading shape: unknown fields are ignored, unknown types are refused.
#[derive(Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
enum Wire {
    Session {
        version: u32,
        id: String,
        timestamp: String,
        #[serde(default)]
        cwd: String,
    },
    Message {
        id: String,
        parent_id: Option<String>,
        timestamp: String,
        message: Message,
    },
    ModelChange {
        id: String,
        parent_id: Option<String>,
        timestamp: String,
        provider: String,
        model_id: String,
    },
    Compaction {
        id: String,
        parent_id: Option<String>,
        timestamp: String,
        summary: String,
        first_kept_entry_id: String,
        tokens_before: u64,
    },
    Reset {
        id: String,
        parent_id: Option<String>,
        timestamp: String,
        #[serde(default)]
        reason: String,
    },
}

impl From<Wire> for Entry {
    fn from(w: Wire) -> Entry {
        let item = |id, parent_id, timestamp, kind| {
            Entry::Item(Item {
                id,
                parent_id,
                timestamp,
                kind,
            })
        };
        match w {
            Wire::Session {
                version,
                id,
                timestamp,
                cwd,
            } => Entry::Session(SessionHeader {
                version,
                id,
                timestamp,
                cwd,
            }),
            Wire::Message {
                id,
                parent_id,
                timestamp,
                message,
            } => item(id, parent_id, timestamp, EntryKind::Message(message)),
            Wire::ModelChange {
                id,
                parent_id,
                timestamp,
                provider,
                model_id,
            } => item(
                id,
                parent_id,
                timestamp,
                EntryKind::ModelChange { provider, model_id },
            ),
            Wire::Compaction {
                id,
                parent_id,
                timestamp,
                summary,
                first_kept_entry_id,
                tokens_before,
            } => item(
                id,
                parent_id,
                timestamp,
                EntryKind::Compaction {
                    summary,
                    first_kept_entry_id,
                    tokens_before,
                },
            ),
            Wire::Reset {
                id,
                parent_id,
                timestamp,
                reason,
            } => item(id, parent_id, timestamp, EntryKind::Reset { reason }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn entries_serialize_in_pi_field_order() {
        let e = Entry::Item(Item {
            id: "0a1b2c3d".into(),
            parent_id: None,
            timestamp: "2025-01-02T03:04:05.678Z".into(),
            kind: EntryKind::Compaction {
                summary: "s".into(),
                first_kept_entry_id: "deadbeef".into(),
                tokens_before: 12,
            },
        });
        let line = serde_json::to_string(&e).unwrap();
        assert_eq!(
            line,
            r#"{"type":"compaction","id":"0a1b2c3d","parentId":null,"timestamp":"2025-01-02T03:04:05.678Z","summary":"s","firstKeptEntryId":"deadbeef","tokensBefore":12}"#
        );
        let back: Entry = serde_json::from_str(&line).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn unknown_fields_are_tolerated_and_unknown_types_refused() {
        let line = r#"{"type":"reset","id":"00000001","parentId":"00000000","timestamp":"t","reason":"/new","extra":{"a":1}}"#;
        let e: Entry = serde_json::from_str(line).unwrap();
        assert!(matches!(
            e,
            Entry::Item(Item {
                kind: EntryKind::Reset { .. },
                ..
            })
        ));
        let header = r#"{"type":"session","version":4,"id":"x","timestamp":"t","cwd":"/","parentSession":"y"}"#;
        assert!(serde_json::from_str::<Entry>(header).is_ok());
        let bad = r#"{"type":"label","id":"00000001","parentId":null,"timestamp":"t"}"#;
        assert!(serde_json::from_str::<Entry>(bad).is_err());
    }
}
