//! Sessions, their settings and their transcripts.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};

use crate::domain::message::Message;
use crate::store::entry::{Entry, EntryKind};
use crate::store::error::StoreError;

/// The heading of the synthetic message that stands for compacted history.
pub const SUMMARY_HEADING: &str = "[Summary of earlier conversation]";

/// What the store knows about one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionMeta {
    /// The session key (SPEC 1.2).
    pub key: String,
    /// The store's id for this session (a uuid). For a session chela created it is also the id
    /// in the transcript header; an imported transcript keeps the header it was exported with.
    pub session_id: String,
    /// When the session was created, ms since the epoch.
    pub created_ms: u64,
    /// When an entry was last appended, ms since the epoch.
    pub updated_ms: u64,
    /// Number of entries after the header.
    pub entries: u64,
    /// The id of the last entry, `None` while there is only the header.
    #[serde(default)]
    pub last_entry_id: Option<String>,
}

/// One message of the model window and the transcript entry it comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowMessage {
    /// The `message` entry's id; `None` for the synthetic summary of a compaction.
    pub entry_id: Option<String>,
    /// The message.
    pub message: Message,
}

impl WindowMessage {
    /// A window message read from entry `id`.
    pub(crate) fn stored(id: String, message: Message) -> Self {
        WindowMessage {
            entry_id: Some(id),
            message,
        }
    }
}

/// Sessions (key -> [`SessionMeta`]), per-key settings, and each session's transcript: a
/// header line and then entries in the version-4 JSONL schema (`entry.rs`), append-only.
///
/// Transcript writes are *buffered* (see the module page): a run appends as it goes and the
/// flush that records its final makes them durable before the reply is sent. Each append is
/// atomic with the session's metadata (entry count, last id).
pub trait SessionStore {
    /// The metadata of session `key`, if it exists.
    fn get_session(&self, key: &str) -> Result<Option<SessionMeta>, StoreError>;

    /// The metadata of session `key`, creating the session (a fresh uuid session id, the
    /// metadata and the transcript header with working directory `cwd`) on first use.
    /// Concurrent callers get the same session. Buffered.
    fn ensure_session(&self, key: &str, cwd: &str) -> Result<SessionMeta, StoreError>;

    /// Every session, ordered by key.
    fn list_sessions(&self) -> Result<Vec<SessionMeta>, StoreError>;

    /// The settings stored under `key`, as the JSON text they were stored as. Use
    /// `Store::get_settings` for a typed read.
    fn settings_json(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Replaces the settings under `key` with the JSON text `json`. Buffered.
    fn put_settings_json(&self, key: &str, json: &[u8]) -> Result<(), StoreError>;

    /// Removes the settings under `key`. Buffered.
    fn clear_settings(&self, key: &str) -> Result<(), StoreError>;

    /// Appends an entry of `kind` to session `key` and returns its id. Assigns the id (8
    /// lowercase hex chars, unique within the session), `parentId` (the previous entry's) and
    /// the timestamp. Fails with [`StoreError::UnknownSession`] when there is no such session.
    /// Atomic with the metadata; buffered.
    fn append(&self, key: &str, kind: EntryKind) -> Result<String, StoreError>;

    /// Every line of session `key`'s transcript, header first, in append order.
    fn entries(&self, key: &str) -> Result<Vec<Entry>, StoreError>;

    /// The messages the model sees for session `key`, each with the id of its entry: those
    /// after the last `reset`; when a `compaction` follows that reset, a synthetic user
    /// message `"[Summary of earlier conversation]\n<summary>"` (no entry id) and then the
    /// messages from its `firstKeptEntryId` on (restarting after a reset among them). Its
    /// cost must follow the window, not the whole transcript.
    fn window_entries(&self, key: &str) -> Result<Vec<WindowMessage>, StoreError>;

    /// Writes session `key`'s transcript to `out`, header first, one line per entry, each
    /// exactly as stored (byte for byte) and ending in `\n`. Returns the number of lines.
    fn export_jsonl(&self, key: &str, out: &mut dyn Write) -> Result<usize, StoreError>;

    /// Reads a version-4 JSONL transcript into session `key` and returns the number of
    /// entries after the header; the lines are stored byte for byte, so an export gives them
    /// back unchanged. Refuses ([`StoreError::SessionExists`]) when `key` already has entries,
    /// and ([`StoreError::InvalidImport`]) when the first line is not a version-4 header, a
    /// line is not a known entry type, repeats an id, or its `parentId` is not the previous
    /// entry's id (`null` for the first). Blank lines are skipped, a trailing `\r` dropped.
    /// On refusal nothing is stored. Buffered.
    fn import_jsonl(&self, key: &str, input: &mut dyn BufRead) -> Result<usize, StoreError>;

    /// The id of the last entry of session `key` (`None` while it has only its header).
    fn last_entry_id(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self.session_or_err(key)?.last_entry_id)
    }

    /// The metadata of session `key`, or [`StoreError::UnknownSession`].
    fn session_or_err(&self, key: &str) -> Result<SessionMeta, StoreError> {
        self.get_session(key)?
            .ok_or_else(|| StoreError::UnknownSession(key.to_string()))
    }

    /// The messages the model sees for session `key` ([`SessionStore::window_entries`]
    /// without the entry ids).
    fn window(&self, key: &str) -> Result<Vec<Message>, StoreError> {
        Ok(self
            .window_entries(key)?
            .into_iter()
            .map(|w| w.message)
            .collect())
    }

    /// Appends a message to the session's transcript (creating the session if needed, with
    /// the process's working directory as its `cwd`). Buffered.
    fn append_message(&self, key: &str, message: &Message) -> Result<String, StoreError> {
        self.append_creating(key, EntryKind::Message(message.clone()))
    }

    /// Appends a `reset` entry (`/new`, `/reset`): the model window starts after it; nothing
    /// is deleted. Creates the session if needed. Buffered.
    fn append_reset(&self, key: &str, reason: &str) -> Result<(), StoreError> {
        let kind = EntryKind::Reset {
            reason: reason.to_string(),
        };
        self.append_creating(key, kind).map(|_| ())
    }

    /// Appends `kind`, creating the session first when it does not exist.
    fn append_creating(&self, key: &str, kind: EntryKind) -> Result<String, StoreError> {
        if self.get_session(key)?.is_none() {
            let cwd = std::env::current_dir()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            self.ensure_session(key, &cwd)?;
        }
        self.append(key, kind)
    }

    /// Renders session `key`'s transcript as text for `chela sessions show` (see `show.rs`).
    fn render_text(&self, key: &str) -> Result<String, StoreError> {
        Ok(crate::store::show::render(&self.entries(key)?))
    }
}
