//! A final's voice note ([`ReplyStream::voice`]): the final's text spoken, sent once as a
//! voice note beside the text, or instead of it (docs/voice.md). A voice note that cannot go
//! (the channel takes no files, the platform refuses it, the file cannot be opened) never
//! costs the reply: beside the text it is left out, instead of the text the text goes.

use chela_channel::{ChannelError, SentMessage};

use super::{FileOpener, ReplyStream, not_held};

/// Uploads of a voice note that may fail for now (5xx, network, 429) before it is given up:
/// a voice note is not worth holding the text (mode instead) or the conversation's next
/// finals for the whole `[delivery] ttl`.
const VOICE_ATTEMPTS: u32 = 3;
/// The longest rate limit a voice note waits out; past it the note is given up.
const VOICE_LONGEST_WAIT_MS: u64 = 10_000;

/// A final's text spoken, to send with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VoiceNote {
    /// The audio (OGG/Opus), opened through the final's [`FileOpener`] right before each
    /// upload.
    pub path: String,
    /// It goes instead of the text (else after the text and the final's files).
    pub instead: bool,
}

/// How far a final's voice note got.
#[derive(Default)]
pub(super) struct VoiceState {
    /// The note, if the final has one.
    note: Option<VoiceNote>,
    /// Sent, or given up for good: not tried again.
    done: bool,
    /// In the chat.
    sent: bool,
    /// Uploads that failed for now.
    failures: u32,
}

impl VoiceState {
    /// A number that grows when the note is done.
    pub(super) fn progress(&self) -> usize {
        usize::from(self.done)
    }

    /// Whether the final has a voice note.
    pub(super) fn is_some(&self) -> bool {
        self.note.is_some()
    }
}

impl ReplyStream {
    /// Sends `note` with the final ([`ReplyStream::deliver_with_files`]), under the key
    /// `<key>.v`, journaled like a part.
    pub fn voice(&mut self, note: VoiceNote) {
        self.voice.note = Some(note);
    }

    /// Whether the voice note takes the text's place: mode instead, nothing of the text shown
    /// for good yet (a frozen part cannot be taken back: the text is completed and the note
    /// goes beside it), and the note not given up.
    pub(super) fn voice_instead(&self) -> bool {
        let instead = self.voice.note.as_ref().is_some_and(|n| n.instead);
        let given_up = self.voice.done && !self.voice.sent;
        instead && self.frozen == 0 && !given_up
    }

    /// Sends the voice note unless done: `Ok(true)` when it is in the chat, `Ok(false)` when it
    /// cannot go (for good, or failed for now [`VOICE_ATTEMPTS`] times); a retryable error is
    /// returned before that (the next attempt sends it whole). A voice note the platform
    /// refuses goes once more as a document.
    pub(super) async fn send_voice(
        &mut self,
        opener: &dyn FileOpener,
    ) -> Result<bool, ChannelError> {
        let Some(note) = self.voice.note.clone().filter(|_| !self.voice.done) else {
            return Ok(self.voice.sent);
        };
        if !self.may_send() {
            return Err(not_held());
        }
        let refused = match self.upload_voice(opener, &note.path, false).await {
            Ok(sent) => return self.voice_sent(sent).await,
            Err(e) if e.is_retryable() => return self.retry(e),
            Err(e @ ChannelError::Unsupported(_)) => return Ok(self.voice_given_up(&e)),
            Err(e) => e,
        };
        tracing::info!(error = %refused, "voice note refused; sending the audio as a document");
        match self.upload_voice(opener, &note.path, true).await {
            Ok(sent) => self.voice_sent(sent).await,
            Err(e) if e.is_retryable() => self.retry(e),
            Err(e) => Ok(self.voice_given_up(&e)),
        }
    }

    /// Opens the note's file and uploads it (as a document with `document`). A file that
    /// cannot be opened fails with [`ChannelError::Rejected`] (for good).
    async fn upload_voice(
        &mut self,
        opener: &dyn FileOpener,
        path: &str,
        document: bool,
    ) -> Result<SentMessage, ChannelError> {
        let file = opener.open(path).await.map_err(ChannelError::Rejected)?;
        let (file, suffix) = match document {
            true => (file.as_document(), "vd"),
            false => (file, "v"),
        };
        let key = self.key.as_ref().map(|k| format!("{k}.{suffix}"));
        self.calls += 1;
        self.channel
            .send_file(&self.to, &file, None, key.as_deref())
            .await
    }

    /// The note is in the chat: journaled durably (it is no part of the text a restart
    /// resends from the record's text alone).
    async fn voice_sent(&mut self, sent: SentMessage) -> Result<bool, ChannelError> {
        self.journal_sent(&sent, false).await;
        self.voice.done = true;
        self.voice.sent = true;
        Ok(true)
    }

    /// The note cannot go: given up, logged.
    fn voice_given_up(&mut self, why: &ChannelError) -> bool {
        match why {
            ChannelError::Unsupported(_) => {
                tracing::debug!(
                    channel = self.channel.name(),
                    "no voice notes here; text only"
                );
            }
            e => tracing::warn!(error = %e, "the voice note of a reply cannot be sent; text only"),
        }
        self.voice.done = true;
        false
    }

    /// A retryable error of an upload (a rate limit counted in the metrics): returned for the
    /// next attempt, or the note given up after [`VOICE_ATTEMPTS`] of them, or at once for a
    /// rate limit longer than [`VOICE_LONGEST_WAIT_MS`] (it would hold the chat's next
    /// replies).
    fn retry(&mut self, error: ChannelError) -> Result<bool, ChannelError> {
        let mut too_long = false;
        if let ChannelError::RateLimited { retry_after_ms } = error {
            crate::metrics::global().rate_limited(self.channel.name());
            too_long = retry_after_ms > VOICE_LONGEST_WAIT_MS;
        }
        self.voice.failures += 1;
        if too_long || self.voice.failures >= VOICE_ATTEMPTS {
            return Ok(self.voice_given_up(&error));
        }
        Err(error)
    }
}
