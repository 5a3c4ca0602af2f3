//! Files the agent sends into chats (docs/media.md, "Files from the agent"). A file travels
//! inside the text of an outbox record as a directive line, `MEDIA:<path>` (OpenClaw's
//! spelling), so that the outbox, its recovery and its dead letters carry files with no change
//! to the store: the record keeps the path, and the kind follows from it
//! ([`OutboundFile::at`]: pictures, voice notes, documents). The `message` tool writes such a
//! record for its `attachments`; a final answer may carry the same lines itself (when the
//! session's tool policy allows `message`). Every path is checked when it is asked for (a
//! refusal the model reads) and opened again right before each upload ([`FilePolicy::open`]:
//! no symlink followed at the end, the opened file checked to be in the workspace, a regular
//! file within the platform's limit), and the channel sends from that open handle: a file
//! swapped for a symlink between two attempts is refused, never read.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use chela_channel::{Conversation, OutboundFile};

use crate::agent::tools::paths::{PathError, resolve_in_workspace};
use crate::config::Config;
pub use crate::reply::media_lines::{DIRECTIVE, split};

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
    /// A symlink where the file was checked to be (swapped since).
    #[error("refused: {0} is a symlink")]
    Symlink(String),
    /// It could not be opened or read.
    #[error("cannot read {name}: {error}")]
    Unreadable {
        /// The file.
        name: String,
        /// Why.
        error: String,
    },
    /// The session's tool policy does not allow sending files.
    #[error("{0}: this conversation may not send files (tool policy)")]
    NotAllowed(String),
    /// A file another session received.
    #[error("refused: {0} belongs to another conversation")]
    OtherSession(String),
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
    /// The workspaces of the `[[agents]]` agents, by id ([`FilePolicy::for_session`]).
    others: Vec<(String, PathBuf)>,
    private: Vec<PathBuf>,
    /// (device, inode) of chela's own files, so a hard link to one is refused too.
    private_ids: Vec<(u64, u64)>,
}

impl FilePolicy {
    /// Files of `workspace`, but none under `private`.
    pub fn new(workspace: PathBuf, private: Vec<PathBuf>) -> FilePolicy {
        let private: Vec<PathBuf> = private
            .into_iter()
            .flat_map(|p| {
                let real = std::fs::canonicalize(&p).ok();
                std::iter::once(p).chain(real)
            })
            .collect();
        let private_ids = private
            .iter()
            .filter_map(|p| std::fs::metadata(p).ok())
            .filter(std::fs::Metadata::is_file)
            .map(|m| (m.dev(), m.ino()))
            .collect();
        FilePolicy {
            workspace,
            others: Vec::new(),
            private,
            private_ids,
        }
    }

    /// The policy of `config`: its workspace; its store, token, high-water and config files
    /// kept in.
    pub fn from_config(config: &Config) -> FilePolicy {
        let mut policy = FilePolicy::new(
            config.agent.workspace.clone(),
            crate::sandbox::child::hidden(config),
        );
        policy.others = config
            .agents
            .iter()
            .filter_map(|a| Some((a.id.clone(), a.workspace.clone()?)))
            .collect();
        policy
    }

    /// This policy for session `key`: the workspace of its agent (`agent:<id>:`).
    pub fn for_session(&self, key: &str) -> FilePolicy {
        let agent = crate::domain::session_key::SessionKey::parse(key).map(|k| k.agent);
        let own = self
            .others
            .iter()
            .find(|(id, _)| agent.as_deref() == Ok(id.as_str()));
        match own {
            Some((_, workspace)) => FilePolicy {
                workspace: workspace.clone(),
                ..self.clone()
            },
            None => self.clone(),
        }
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The real path of `requested` (relative to the workspace, or absolute inside it) if it
    /// may be sent. Blocking (file system calls).
    pub fn resolve(&self, requested: &str) -> Result<PathBuf, FileRefusal> {
        let path = self.inside(requested)?;
        match std::fs::metadata(&path) {
            Err(_) => Err(FileRefusal::Missing(requested.to_owned())),
            Ok(meta) if !meta.is_file() => Err(FileRefusal::NotAFile(requested.to_owned())),
            Ok(_) => Ok(path),
        }
    }

    /// `requested` resolved inside the workspace (symlinks on the way followed and checked)
    /// and not one of chela's own files.
    fn inside(&self, requested: &str) -> Result<PathBuf, FileRefusal> {
        let path = resolve_in_workspace(&self.workspace, requested.trim())?;
        if self.is_private(&path) {
            return Err(FileRefusal::Private(requested.to_owned()));
        }
        Ok(path)
    }

    fn is_private(&self, path: &Path) -> bool {
        self.private.iter().any(|p| path.starts_with(p))
    }

    /// Opens `requested` to send it into `channel` (right before each upload): its parent
    /// resolved and checked inside the workspace, the file itself opened without following a
    /// symlink (nor blocking on a FIFO), then the open file checked: a regular file, not one
    /// of chela's own (also through a hard link), at most `max_bytes`, and (where
    /// `/proc/self/fd` tells) still inside the workspace, so a folder swapped for a symlink
    /// after the check is caught. Blocking (file system calls).
    pub fn open(
        &self,
        requested: &str,
        channel: &str,
        max_bytes: Option<u64>,
    ) -> Result<(PathBuf, OutboundFile), FileRefusal> {
        let path = self.inside(requested)?;
        let file = self.open_resolved(&path, requested, channel, max_bytes)?;
        Ok((path, file))
    }

    /// Opens `path`, resolved by [`FilePolicy::inside`] a moment ago (it may have been
    /// swapped since), as [`FilePolicy::open`] says.
    pub(super) fn open_resolved(
        &self,
        path: &Path,
        requested: &str,
        channel: &str,
        max_bytes: Option<u64>,
    ) -> Result<OutboundFile, FileRefusal> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| FileRefusal::NotAFile(requested.to_owned()))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => FileRefusal::Missing(requested.to_owned()),
                _ if e.raw_os_error() == Some(nix::libc::ELOOP) => {
                    FileRefusal::Symlink(requested.to_owned())
                }
                _ => FileRefusal::Unreadable {
                    name: requested.to_owned(),
                    error: e.to_string(),
                },
            })?;
        let meta = file.metadata().map_err(|e| FileRefusal::Unreadable {
            name: requested.to_owned(),
            error: e.to_string(),
        })?;
        if !meta.is_file() {
            return Err(FileRefusal::NotAFile(requested.to_owned()));
        }
        if self.private_ids.contains(&(meta.dev(), meta.ino())) {
            return Err(FileRefusal::Private(requested.to_owned()));
        }
        self.check_opened(&file, requested)?;
        if let Some(limit) = max_bytes.filter(|limit| meta.len() > *limit) {
            return Err(FileRefusal::TooBig {
                name: requested.to_owned(),
                mb: meta.len().div_ceil(1 << 20),
                channel: channel.to_owned(),
                limit_mb: limit >> 20,
            });
        }
        Ok(OutboundFile::new(file, meta.len(), name))
    }

    /// [`FilePolicy::open`] on the blocking pool.
    pub async fn open_blocking(
        &self,
        requested: &str,
        channel: &str,
        max_bytes: Option<u64>,
    ) -> Result<(PathBuf, OutboundFile), FileRefusal> {
        let (policy, requested, channel) = (self.clone(), requested.to_owned(), channel.to_owned());
        let name = requested.clone();
        tokio::task::spawn_blocking(move || policy.open(&requested, &channel, max_bytes))
            .await
            .unwrap_or_else(|e| {
                Err(FileRefusal::Unreadable {
                    name,
                    error: e.to_string(),
                })
            })
    }

    /// Where the open `file` really is, checked again (Linux: `/proc/self/fd`; elsewhere the
    /// check of the path before opening stands).
    fn check_opened(&self, file: &std::fs::File, requested: &str) -> Result<(), FileRefusal> {
        use std::os::fd::AsRawFd;
        let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) else {
            return Ok(());
        };
        let root = std::fs::canonicalize(&self.workspace).map_err(|e| FileRefusal::Unreadable {
            name: requested.to_owned(),
            error: e.to_string(),
        })?;
        if !real.starts_with(&root) {
            return Err(FileRefusal::Path(PathError::SymlinkEscape {
                requested: requested.to_owned(),
                target: real,
            }));
        }
        if self.is_private(&real) {
            return Err(FileRefusal::Private(requested.to_owned()));
        }
        Ok(())
    }
}

/// A record's text: `caption`, then one file line per path. A caption that ends inside a code
/// fence has the fence closed first, so the file lines are read as such.
pub fn compose(caption: &str, paths: &[PathBuf]) -> String {
    let mut text = caption.trim_end().to_owned();
    if !paths.is_empty() && crate::reply::media_lines::open_fence(&text) {
        text.push_str("\n```");
    }
    for path in paths {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(DIRECTIVE);
        text.push_str(&path.display().to_string());
    }
    text
}

/// What a final's file lines are checked against ([`check_final`]).
#[derive(Debug, Clone)]
pub struct FinalFiles {
    /// Which files may leave.
    pub policy: FilePolicy,
    /// The channel the final goes to.
    pub channel: String,
    /// Its largest file, in bytes.
    pub max_bytes: Option<u64>,
    /// Whether the session's tool policy allows the `message` tool (a conversation that may
    /// not send files through the tool may not through its answer either).
    pub may_send: bool,
    /// The session's own media folder, relative to the workspace (`media/<session>`): files
    /// other sessions received (`media/<other>/...`) are never sent.
    pub own_media: String,
}

/// A final answer's file lines checked before it is recorded: each path that may be sent is
/// written out resolved (absolute), each other one becomes a short note in the text, so what
/// the outbox later reads as a file line was checked. Runs on the blocking pool.
pub async fn check_final(files: FinalFiles, text: String) -> String {
    if !text.contains(DIRECTIVE) {
        return text;
    }
    let fallback = text.clone();
    tokio::task::spawn_blocking(move || check_final_now(&files, &text))
        .await
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot check the files of a reply; none is sent");
            split(&fallback).0
        })
}

/// [`check_final`], blocking.
fn check_final_now(files: &FinalFiles, text: &str) -> String {
    let (body, paths) = split(text);
    if paths.is_empty() {
        return text.to_owned();
    }
    let mut notes = Vec::new();
    let mut sendable = Vec::new();
    for path in paths {
        match final_file(files, &path) {
            Ok(real) => sendable.push(real),
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
    compose(&caption, &sendable)
}

/// The real path of the file a final's line names, if the final may send it.
fn final_file(files: &FinalFiles, requested: &str) -> Result<PathBuf, FileRefusal> {
    if !files.may_send {
        return Err(FileRefusal::NotAllowed(requested.to_owned()));
    }
    let (real, _) = files
        .policy
        .open(requested, &files.channel, files.max_bytes)?;
    let root = std::fs::canonicalize(&files.policy.workspace).unwrap_or_default();
    let relative = real.strip_prefix(&root).unwrap_or(&real);
    let mut parts = relative.components();
    let in_media = parts.next().is_some_and(|c| c.as_os_str() == "media");
    if in_media && !relative.starts_with(&files.own_media) {
        return Err(FileRefusal::OtherSession(requested.to_owned()));
    }
    Ok(real)
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
