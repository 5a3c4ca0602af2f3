//! The voice notes of finals (docs/voice.md). Before the outbox worker delivers a final of a
//! session with voice replies on, its text is read as plain text ([`super::spoken`]),
//! synthesized ([`super::speech`]) and kept in the session's workspace as
//! `media/tts/reply-<outbox id>.ogg` until the final is delivered or dead-lettered; the reply
//! stream sends it once, as a voice note beside the text or instead of it. A recovered final
//! (the previous process was cut short) is spoken again: a file left at that path in the
//! workspace, which the agent's other sessions can write, is never trusted. A voice note that
//! cannot be made leaves the final text only.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chela_channel::Channel;
use tokio_util::sync::CancellationToken;

use super::speech::{Speech, SpeechError};
use crate::agent::tools::beneath::{self, BeneathError};
use crate::config::{TtsConfig, TtsDefault, TtsMode};
use crate::reply::{NO_REPLY, VoiceNote};
use crate::store::Store;

/// The folder of the voice notes, relative to a workspace.
const FOLDER: &str = "media/tts";

/// Why a final got no voice note.
#[derive(Debug, thiserror::Error)]
enum NoteError {
    /// Synthesis failed.
    #[error(transparent)]
    Speech(#[from] SpeechError),
    /// The audio could not be kept in the workspace.
    #[error("cannot keep the audio in the workspace: {0}")]
    File(#[from] BeneathError),
    /// The blocking task ended early.
    #[error("the audio was not written: {0}")]
    Task(String),
}

/// What the outbox needs to speak finals: `[tts]`, its endpoint.
pub struct Voices {
    speech: Speech,
    mode: TtsMode,
    max_chars: usize,
    default: TtsDefault,
}

/// One final to speak.
pub struct Spoken<'a> {
    /// Its outbox id (names its audio file).
    pub id: u64,
    /// The session it answers.
    pub session_key: &'a str,
    /// Its text, without file lines.
    pub text: &'a str,
    /// The workspace of the session's agent.
    pub workspace: &'a Path,
}

impl Voices {
    /// The voice notes of `config`; `None` when voice replies are off (no URL) or their client
    /// cannot be built (logged).
    pub fn from_config(config: &TtsConfig) -> Option<Arc<Voices>> {
        let speech = match Speech::new(config) {
            Ok(speech) => speech?,
            Err(e) => {
                tracing::error!(error = %e, "voice replies are off");
                return None;
            }
        };
        Some(Arc::new(Voices {
            speech,
            mode: config.mode,
            max_chars: config.max_chars,
            default: config.default,
        }))
    }

    /// The voice note of `spoken`, if its session has voice replies on and its text is worth
    /// speaking (not empty, not `NO_REPLY`, at most `[tts] max_chars`); `None` too when
    /// synthesis fails (logged) or `cancel` fires meanwhile.
    pub async fn note(
        &self,
        store: &Store,
        spoken: Spoken<'_>,
        cancel: &CancellationToken,
    ) -> Option<VoiceNote> {
        if !super::tts_choice::is_on(store, spoken.session_key, self.default) {
            return None;
        }
        let text = super::spoken::spoken(spoken.text);
        let silent = text.is_empty() || text.eq_ignore_ascii_case(NO_REPLY);
        if silent || text.chars().count() > self.max_chars {
            return None;
        }
        let made = tokio::select! {
            made = self.make(&text, spoken.workspace, spoken.id) => made,
            () = cancel.cancelled() => return None,
        };
        if let Err(e) = made {
            tracing::warn!(error = %e, id = spoken.id, "no voice note for a reply; text only");
            return None;
        }
        Some(VoiceNote {
            path: relative(spoken.id).display().to_string(),
            // A voice note stands in for the text only when it says all of it.
            instead: self.mode == TtsMode::Instead && super::spoken::says_all(spoken.text),
        })
    }

    /// Speaks `text` into final `id`'s audio file in `workspace`.
    async fn make(&self, text: &str, workspace: &Path, id: u64) -> Result<(), NoteError> {
        let audio = self.speech.synthesize(text).await?;
        let workspace = workspace.to_path_buf();
        tokio::task::spawn_blocking(move || write(&workspace, id, &audio))
            .await
            .map_err(|e| NoteError::Task(e.to_string()))??;
        Ok(())
    }
}

/// Whether `channel` may get voice notes: one that states neither a caption limit nor a file
/// size limit takes no files at all (the terminal, the RPC), so nothing is spoken for it.
pub fn may_speak_into(channel: &dyn Channel) -> bool {
    channel.caption_limit() > 0 || channel.max_file_bytes().is_some()
}

/// Removes final `id`'s audio file from `workspace`, if any (delivered or dead-lettered).
pub async fn discard(workspace: PathBuf, id: u64) {
    let removed = tokio::task::spawn_blocking(move || -> Result<(), BeneathError> {
        let root = std::fs::canonicalize(&workspace)?;
        let dir = match beneath::open_dir(&root, Path::new(FOLDER), false) {
            Err(BeneathError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            dir => dir?,
        };
        beneath::remove_in(&dir, &file_name(id))?;
        Ok(())
    })
    .await;
    if let Ok(Err(e)) = removed {
        tracing::warn!(error = %e, id, "cannot remove the audio of a voice note");
    }
}

/// Final `id`'s audio file, relative to the workspace.
fn relative(id: u64) -> PathBuf {
    Path::new(FOLDER).join(file_name(id))
}

fn file_name(id: u64) -> OsString {
    OsString::from(format!("reply-{id}.ogg"))
}

/// Writes `audio` as final `id`'s audio file beneath `workspace`: a `.part` file made in the
/// folder opened one step at a time without following a link, synced, then renamed, so the
/// file is whole whenever it is there.
fn write(workspace: &Path, id: u64, audio: &[u8]) -> Result<(), BeneathError> {
    let root = std::fs::canonicalize(workspace)?;
    let dir = beneath::open_dir(&root, Path::new(FOLDER), true)?;
    let name = file_name(id);
    let mut part = name.clone();
    part.push(".part");
    beneath::remove_in(&dir, &part)?;
    let written = beneath::open_for_writing(&dir, &part, true).and_then(|mut file| {
        file.write_all(audio)?;
        file.sync_all()
    });
    match written.and_then(|()| beneath::rename_in(&dir, &part, &name)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = beneath::remove_in(&dir, &part);
            Err(e.into())
        }
    }
}

#[cfg(test)]
#[path = "voice_tests.rs"]
mod tests;
