//! Inbound files (docs/media.md): before a turn runs, the files of its messages are
//! downloaded into `<workspace>/media/<session>/`, and the turn's text gets a note per file
//! (its path, so tools can read it); pictures also go with the user message as image blocks
//! naming that path (the agent reads them for a vision model, see `agent::media`).
//!
//! The download happens here, at run time, not in the adapter: the pending turn (stored
//! before the platform is acknowledged) keeps each file's platform reference (and the queued
//! turn carries them, see `QueuedTurn::files`), so a crash
//! before or during a download repeats it when the turn runs again; a file already
//! downloaded (renamed from its `.part` once complete) is not fetched twice. Messages that
//! admission drops are never downloaded.

use std::path::Path;
use std::sync::Weak;

use chela_channel::{Attachment, AttachmentKind, Channel, Conversation};
use tokio_util::sync::CancellationToken;

use super::Handles;
use crate::agent::media::SteerFiles;
use crate::agent::provider::BoxFuture;
use crate::agent::run::Steer;
use crate::agent::tools::confined::read_in_workspace;
use crate::agent::tools::paths::resolve_in_workspace;
use crate::domain::message::{ContentBlock, ImageBlock};
use crate::inbound::attachments::what;
use crate::lane::QueuedTurn;

mod fetch;
mod transcribe;

pub use fetch::{FetchError, download, download_until};

/// The text and image blocks a turn's user message gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    /// The turn's text, with one note per file at the end.
    pub text: String,
    /// An image block per picture that was downloaded.
    pub media: Vec<ContentBlock>,
}

/// Downloads the files of `turn`'s messages (session `key`) and returns what the model gets.
/// Turns without files cost nothing here.
/// A file too big or not downloadable gets a short reply in the chat and a note; `cancel`
/// (`/stop`) cuts a download short and leaves the rest.
pub(super) async fn prepare(
    handles: &Handles,
    key: &str,
    turn: &QueuedTurn,
    cancel: &CancellationToken,
) -> Prepared {
    let files = Files {
        key,
        target: &turn.target,
        cancel,
    };
    files.prepare(handles, &turn.text, &turn.files).await
}

/// Where a message's files go and what stops their download.
struct Files<'a> {
    key: &'a str,
    target: &'a Conversation,
    cancel: &'a CancellationToken,
}

impl Files<'_> {
    /// `text` with a note per file of `files` (each with its message's seq), downloaded.
    async fn prepare(
        &self,
        handles: &Handles,
        text: &str,
        files: &[(u64, Attachment)],
    ) -> Prepared {
        let mut prepared = Prepared {
            text: text.to_owned(),
            media: Vec::new(),
        };
        let folder = format!("media/{}", safe_key(self.key));
        let mut notes = Vec::new();
        let mut index = 0;
        for (n, (seq, attachment)) in files.iter().enumerate() {
            // Numbered within each message: `<seq>-0-...`, `<seq>-1-...`.
            let first = n == 0 || files[n - 1].0 != *seq;
            index = if first { 0 } else { index + 1 };
            let relative = format!("{folder}/{}", file_name(*seq, index, attachment));
            let (note, image) = self.take_file(handles, attachment, relative).await;
            notes.push(note);
            prepared.media.extend(image);
        }
        if !notes.is_empty() {
            let notes = notes.join("\n");
            prepared.text = if prepared.text.trim().is_empty() {
                notes
            } else {
                format!("{}\n\n{notes}", prepared.text)
            };
        }
        prepared
    }
}

/// The files of steered messages, downloaded by the run that takes them (see
/// [`SteerFiles`]).
pub struct SteerDownloads {
    /// The runner's handles (weak: a run must not keep them alive).
    pub(super) handles: Weak<Handles>,
    /// The run's session.
    pub key: String,
    /// Where its replies go (a refusal is said there).
    pub target: Conversation,
    /// The run's stop.
    pub cancel: CancellationToken,
}

impl SteerFiles for SteerDownloads {
    fn prepare<'a>(&'a self, steer: &'a Steer) -> BoxFuture<'a, (String, Vec<ContentBlock>)> {
        Box::pin(async move {
            let Some(handles) = self.handles.upgrade() else {
                return (steer.text.clone(), Vec::new());
            };
            let files = Files {
                key: &self.key,
                target: &self.target,
                cancel: &self.cancel,
            };
            let prepared = files.prepare(&handles, &steer.text, &steer.files).await;
            (prepared.text, prepared.media)
        })
    }
}

impl Files<'_> {
    /// Downloads one file to `relative` (in the workspace); its note for the model and, for
    /// a picture, its image block. A refusal is answered in the chat; a stopped download is
    /// only noted.
    async fn take_file(
        &self,
        handles: &Handles,
        attachment: &Attachment,
        relative: String,
    ) -> (String, Option<ContentBlock>) {
        let limit = handles.config.media.max_bytes();
        // A coding agent's turn reads its pictures from the default agent's workspace (the
        // ACP manager's); every other turn from its own agent's.
        let workspace = match handles.acp.binding(self.key) {
            Some(_) => &handles.agents.default_agent().tool_context.workspace,
            None => &handles.agents.for_key(self.key).tool_context.workspace,
        };
        // Resolved as the file tools resolve paths: a `media` folder, session folder or
        // file the agent linked out of the workspace is refused, never written nor read.
        let file = match resolve_in_workspace(workspace, &relative) {
            Ok(file) => file,
            Err(error) => {
                tracing::warn!(file = %relative, "refused: a media path leads outside the workspace");
                return (format!("[{} not saved: {error}]", what(attachment)), None);
            }
        };
        let channel = handles.notices.channel(&self.target.channel);
        let fetched = fetch_once_until(channel, attachment, workspace, &file, limit, self.cancel);
        let size = match fetched.await {
            Ok(size) => size,
            Err(FetchError::Stopped) => {
                return (
                    format!("[{} not downloaded: stopped]", what(attachment)),
                    None,
                );
            }
            Err(error) => {
                tracing::warn!(error = %error, kind = attachment.kind.as_str(), "attachment not downloaded");
                let (note, reply) = refusal(attachment, &error, limit);
                handles.notices.say(self.target, &reply).await;
                return (note, None);
            }
        };
        note_and_block(handles, attachment, relative, workspace, size).await
    }
}

/// The note and (for a picture) the image block of `attachment`, saved at `relative` (in
/// `workspace`), `size` bytes; a voice note or audio file is transcribed when configured.
async fn note_and_block(
    handles: &Handles,
    attachment: &Attachment,
    relative: String,
    workspace: &Path,
    size: u64,
) -> (String, Option<ContentBlock>) {
    let note = saved_note(attachment, &relative, size);
    match attachment.kind {
        AttachmentKind::Image => {
            let image = ContentBlock::Image(ImageBlock {
                data: String::new(),
                mime_type: image_mime(attachment),
                path: Some(relative),
            });
            (note, Some(image))
        }
        AttachmentKind::Voice | AttachmentKind::Audio
            if !handles.config.media.transcribe_url.trim().is_empty() =>
        {
            let mime = attachment.mime_type.as_deref().unwrap_or("audio/ogg");
            let audio = read_saved(workspace, &relative, handles.config.media.max_bytes()).await;
            let heard = match audio {
                Ok(bytes) => {
                    transcribe::transcribe(&handles.config.media, bytes, &relative, mime).await
                }
                Err(e) => Err(e),
            };
            match heard {
                Ok(text) => (format!("({}) {text}\n{note}", what(attachment)), None),
                Err(error) => {
                    tracing::warn!(error = %error, "transcription failed; the model gets the path");
                    (note, None)
                }
            }
        }
        _ => (note, None),
    }
}

/// The bytes of the file saved at `relative` in `workspace`, opened as
/// [`read_in_workspace`] opens it (no symlink out of the workspace followed).
async fn read_saved(workspace: &Path, relative: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
    let (root, relative) = (workspace.to_path_buf(), relative.to_owned());
    tokio::task::spawn_blocking(move || read_in_workspace(&root, &relative, limit))
        .await
        .map_err(std::io::Error::other)?
        .map_err(|e| FetchError::Io(std::io::Error::other(e.to_string())))
}

/// Downloads `attachment` to `dest` unless an earlier run of the turn did; its size.
#[cfg(test)]
async fn fetch_once(
    channel: Option<std::sync::Arc<dyn Channel>>,
    attachment: &Attachment,
    workspace: &Path,
    dest: &Path,
    limit: u64,
) -> Result<u64, FetchError> {
    let cancel = CancellationToken::new();
    fetch_once_until(channel, attachment, workspace, dest, limit, &cancel).await
}

/// [`fetch_once`] that `cancel` cuts short.
async fn fetch_once_until(
    channel: Option<std::sync::Arc<dyn Channel>>,
    attachment: &Attachment,
    workspace: &Path,
    dest: &Path,
    limit: u64,
    cancel: &CancellationToken,
) -> Result<u64, FetchError> {
    if let Some(size) = attachment.size.filter(|&s| s > limit) {
        return Err(FetchError::TooBig(size));
    }
    // `dest` was resolved inside the workspace: what is there now is looked at, not followed.
    match tokio::fs::symlink_metadata(dest).await {
        Ok(meta) if meta.is_file() => return Ok(meta.len()),
        Ok(_) => {
            return Err(FetchError::Io(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "something other than a regular file is in its place",
            )));
        }
        Err(_) => {}
    }
    let channel = channel.ok_or(FetchError::NoChannel)?;
    let url = channel.media_url(attachment).await?;
    let authorization = channel.media_authorization();
    download_until(
        &url,
        authorization.as_deref(),
        workspace,
        dest,
        limit,
        cancel,
    )
    .await
}

/// `agent:main:direct:42` -> `agent_main_direct_42`: a folder name.
pub fn safe_key(key: &str) -> String {
    sanitized(key, 120)
}

/// The file's name in the session's folder: `<seq>-<index>-<sender's name or kind.ext>`.
pub fn file_name(seq: u64, index: usize, attachment: &Attachment) -> String {
    let name = attachment
        .file_name
        .as_deref()
        .map(|n| sanitized(n, 80))
        .filter(|n| !n.trim_matches(['_', '.']).is_empty())
        .unwrap_or_else(|| {
            let ext = extension(attachment.mime_type.as_deref().unwrap_or_default());
            format!("{}.{ext}", attachment.kind.as_str())
        });
    format!("{seq}-{index}-{name}")
}

fn sanitized(name: &str, max: usize) -> String {
    let clean: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '_',
        })
        .take(max)
        .collect();
    clean.trim_start_matches('.').to_owned()
}

fn extension(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/ogg" => "ogg",
        "audio/mpeg" => "mp3",
        "audio/mp4" | "audio/x-m4a" => "m4a",
        "video/mp4" => "mp4",
        "video/webm" => "webm",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "application/x-tgsticker" => "tgs",
        _ => "bin",
    }
}

fn image_mime(attachment: &Attachment) -> String {
    attachment
        .mime_type
        .clone()
        .filter(|m| m.starts_with("image/"))
        .unwrap_or_else(|| "image/jpeg".to_owned())
}

fn saved_note(attachment: &Attachment, relative: &str, size: u64) -> String {
    let mime = attachment.mime_type.as_deref().unwrap_or("unknown type");
    format!(
        "[{} attached, saved as {relative} ({mime}, {})]",
        what(attachment),
        human(size)
    )
}

/// The note for the model and the reply for the chat when a file was not downloaded.
fn refusal(attachment: &Attachment, error: &FetchError, limit: u64) -> (String, String) {
    let what = what(attachment);
    match error {
        FetchError::TooBig(size) => (
            format!(
                "[{what} ({}) not downloaded: bigger than the {} limit]",
                human(*size),
                human(limit)
            ),
            format!(
                "The {what} is too big for me ({}; the limit is {}). I'll answer without it.",
                human(*size),
                human(limit)
            ),
        ),
        _ => (
            format!("[{what} could not be downloaded]"),
            format!("I could not download the {what}. I'll answer without it."),
        ),
    }
}

/// `1536` -> `1.5 KB`, `31457280` -> `30 MB`.
pub fn human(bytes: u64) -> String {
    const KB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KB {
        format!("{bytes} B")
    } else if b < KB * KB {
        format!("{} KB", trim(b / KB))
    } else {
        format!("{} MB", trim(b / KB / KB))
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

#[cfg(test)]
mod tests;
