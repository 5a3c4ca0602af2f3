//! Files the agent sends into chats (README "Media", "Files from the agent"). A file travels
//! inside the text of an outbox record as a directive line, `MEDIA:<path>` (OpenClaw's
//! spelling), so that the outbox, its recovery and its dead letters carry files with no change
//! to the store: the record keeps the path, and the kind follows from it
//! ([`OutboundFile::at`]: pictures, voice notes, documents). The `message` tool writes such a
//! record for its `attachments`; a final answer may carry the same lines itself. Every path is
//! checked twice: when it is asked for (a refusal the model reads) and again when it is sent
//! (a file gone or moved out by then is a dead letter, never a stuck queue).

use std::path::PathBuf;

use chela_channel::{Conversation, OutboundFile};

use crate::agent::tools::paths::{PathError, resolve_in_workspace};
use crate::config::Config;

/// The directive that starts a file line.
pub const DIRECTIVE: &str = "MEDIA:";

/// Why a file may not be sent.
#[derive(Debug, thiserror::Error)]
pub enum FileRefusal {
    /// Outside the workspace (or through a symlink out of it).
    #[error(transparent)]
    Path(#[from] PathError),
    /// One of chela's own files (store, token file, config).
    #[error("refused: {0} is one of chela's own files")]
    Private(String),
    /// Nothing there.
    #[error("{0} does not exist")]
    Missing(String),
    /// A folder or a device, not a file.
    #[error("{0} is not a regular file")]
    NotAFile(String),
    /// Bigger than the channel takes.
    #[error("{name} is {mb} MB; {channel} takes files up to {limit_mb} MB")]
    TooBig {
        /// The file.
        name: String,
        /// Its size, in MB rounded up.
        mb: u64,
        /// The channel.
        channel: String,
        /// The channel's limit, in MB.
        limit_mb: u64,
    },
}

/// Which files may leave: regular files inside the workspace, none of chela's own.
#[derive(Debug, Clone)]
pub struct FilePolicy {
    workspace: PathBuf,
    private: Vec<PathBuf>,
}

impl FilePolicy {
    /// Files of `workspace`, but none under `private`.
    pub fn new(workspace: PathBuf, private: Vec<PathBuf>) -> FilePolicy {
        let private = private
            .into_iter()
            .flat_map(|p| {
                let real = std::fs::canonicalize(&p).ok();
                std::iter::once(p).chain(real)
            })
            .collect();
        FilePolicy { workspace, private }
    }

    /// The policy of `config`: its workspace; its store, token, high-water and config files
    /// kept in.
    pub fn from_config(config: &Config) -> FilePolicy {
        FilePolicy::new(
            config.agent.workspace.clone(),
            crate::sandbox::child::hidden(config),
        )
    }

    /// The real path of `requested` (relative to the workspace, or absolute inside it) if it
    /// may be sent.
    pub fn resolve(&self, requested: &str) -> Result<PathBuf, FileRefusal> {
        let path = resolve_in_workspace(&self.workspace, requested.trim())?;
        if self.private.iter().any(|p| path.starts_with(p)) {
            return Err(FileRefusal::Private(requested.to_owned()));
        }
        match std::fs::metadata(&path) {
            Err(_) => Err(FileRefusal::Missing(requested.to_owned())),
            Ok(meta) if !meta.is_file() => Err(FileRefusal::NotAFile(requested.to_owned())),
            Ok(_) => Ok(path),
        }
    }

    /// `requested` resolved, as the file to send, if it is at most `max_bytes` (the limit of
    /// `channel`).
    pub fn outbound(
        &self,
        requested: &str,
        channel: &str,
        max_bytes: Option<u64>,
    ) -> Result<OutboundFile, FileRefusal> {
        let path = self.resolve(requested)?;
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if let Some(limit) = max_bytes.filter(|limit| size > *limit) {
            return Err(FileRefusal::TooBig {
                name: requested.to_owned(),
                mb: size.div_ceil(1 << 20),
                channel: channel.to_owned(),
                limit_mb: limit >> 20,
            });
        }
        Ok(OutboundFile::at(path))
    }
}

/// Splits `text` into the text without file lines and the paths those lines name, in order.
/// A file line is `MEDIA:<path>` alone on its line (leading spaces allowed), outside code
/// fences.
pub fn split(text: &str) -> (String, Vec<String>) {
    if !text.contains(DIRECTIVE) {
        return (text.to_owned(), Vec::new());
    }
    let mut fence = false;
    let mut kept = Vec::new();
    let mut paths = Vec::new();
    for line in text.split('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            fence = !fence;
        }
        match trimmed.strip_prefix(DIRECTIVE).map(str::trim) {
            Some(path) if !fence && !path.is_empty() => paths.push(path.to_owned()),
            _ => kept.push(line),
        }
    }
    (kept.join("\n").trim_end().to_owned(), paths)
}

/// A record's text: `caption`, then one file line per path.
pub fn compose(caption: &str, paths: &[PathBuf]) -> String {
    let mut text = caption.trim_end().to_owned();
    for path in paths {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(DIRECTIVE);
        text.push_str(&path.display().to_string());
    }
    text
}

/// A final answer's file lines checked before it is recorded: each path that may be sent is
/// written out resolved (absolute), each other one becomes a short note in the text, so what
/// the outbox later reads as a file line was checked.
pub fn check_final(policy: &FilePolicy, text: &str) -> String {
    let (body, paths) = split(text);
    if paths.is_empty() {
        return text.to_owned();
    }
    let mut notes = Vec::new();
    let mut files = Vec::new();
    for path in paths {
        match policy.resolve(&path) {
            Ok(real) => files.push(real),
            Err(e) => {
                tracing::warn!(path = %path, error = %e, "a file named in a reply cannot be sent");
                notes.push(format!("(file not sent: {e})"));
            }
        }
    }
    let mut caption = body;
    for note in notes {
        caption.push_str(if caption.is_empty() { "" } else { "\n" });
        caption.push_str(&note);
    }
    compose(&caption, &files)
}

/// The dedupe mark of run `run_id` sending the record `text` into `to`.
pub fn send_mark(run_id: &str, to: &Conversation, text: &str) -> String {
    let thread = to.thread_id.as_deref().unwrap_or("");
    let what = format!(
        "{}|{}|{}|{thread}|{text}",
        to.channel, to.account, to.chat_id
    );
    let hash = what.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("out|{run_id}|{hash:016x}")
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
