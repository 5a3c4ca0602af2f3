//! A final that carries files ([`ReplyStream::deliver_with_files`]): its text, then each
//! file, opened right before each upload by a [`FileOpener`] (the gateway checks it there)
//! and sent from that open handle. A file the platform refuses as a picture or voice note is
//! sent once more as a document; a file that still cannot go either fails the delivery
//! ([`FileFailure::Fail`]) or becomes a short note after the reply ([`FileFailure::Note`]),
//! the text and the other files delivered all the same.

use std::sync::Arc;

use chela_channel::{AttachmentKind, BoxFuture, ChannelError, OutboundFile, SentMessage};

use super::{NO_REPLY, ReplyStream};

/// Opens a final's files for an upload.
pub trait FileOpener: Send + Sync {
    /// The file `path` names, opened and checked now; `Err`: why it cannot be sent (for
    /// good).
    fn open<'a>(&'a self, path: &'a str) -> BoxFuture<'a, Result<OutboundFile, String>>;
}

/// Notes, durably, each item of a final with files that is in the chat: `text`, or `f<n>`
/// (file `n`, with the text as its caption when `n` is 0 and the text rode on it). What was
/// noted is given back with [`ReplyStream::resume_files`] after a restart.
pub trait FileProgress: Send + Sync {
    /// `item` is in the chat; returns once that is durable.
    fn done<'a>(&'a self, item: &'a str) -> BoxFuture<'a, ()>;
}

/// What a file that cannot be sent (for good) does to the delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFailure {
    /// The delivery fails with the file's error (whoever sent the files is told).
    Fail,
    /// The file is left out with a note after the reply; the rest is delivered.
    Note,
}

/// How far a final's files got.
#[derive(Default)]
pub(super) struct FilesState {
    /// Files done (sent or given up), in order.
    sent: usize,
    /// The text is delivered, or rides as the first file's caption.
    text_done: bool,
    /// The text is the first file's caption.
    captioned: bool,
    /// The text rode on a file that could not be sent: it still has to go.
    text_owed: bool,
    /// Notes of files given up.
    notes: Vec<String>,
    /// The notes are sent.
    notes_sent: bool,
    /// Told of each item delivered.
    progress: Option<Arc<dyn FileProgress>>,
}

impl FilesState {
    /// A number that grows with every item delivered.
    pub(super) fn progress(&self) -> usize {
        self.sent + usize::from(self.text_done) + usize::from(self.notes_sent)
    }
}

/// Why one file did not go.
enum Failed {
    /// A retryable error: the delivery is tried again.
    Retry(ChannelError),
    /// For good, with the reason.
    ForGood(ChannelError),
}

impl ReplyStream {
    /// Notes each item of the final's files with `progress` as it is delivered, and skips
    /// what a previous attempt noted (`done`: its items, see [`FileProgress`]).
    pub fn resume_files(&mut self, progress: Arc<dyn FileProgress>, done: &[String]) {
        let has = |item: &str| done.iter().any(|d| d == item);
        self.files.text_done = has("text") || has("f0");
        self.files.sent = (0..).take_while(|n| has(&format!("f{n}"))).count();
        self.files.progress = Some(progress);
    }

    /// [`ReplyStream::deliver_once`] for a final that carries files (`paths`, opened with
    /// `opener` right before each upload): the text first (the preview completed, or as new
    /// messages), then each file, then the voice note ([`ReplyStream::voice`]; one that goes
    /// instead of the text goes first, and the preview is deleted). A short text with no
    /// preview shown rides as the first file's caption instead (at most the channel's caption
    /// limit; longer text goes as a message of its own). Call it again after a retryable
    /// error: the text and the files that got through are not sent again, a failed upload is
    /// repeated whole. Each file is sent under the key `<key>.f<n>` and journaled like a
    /// part.
    pub async fn deliver_with_files(
        &mut self,
        final_text: &str,
        paths: &[String],
        opener: &dyn FileOpener,
        failure: FileFailure,
    ) -> Result<(), ChannelError> {
        if paths.is_empty() && !self.voice.is_some() {
            return self.deliver_once(final_text).await;
        }
        if failure == FileFailure::Fail && !self.files.text_done {
            // Nothing goes when a file cannot: each is checked before the text is sent (and
            // opened again right before its upload).
            for path in paths {
                opener.open(path).await.map_err(ChannelError::Rejected)?;
            }
        }
        let body = final_text.trim();
        self.deliver_text_first(final_text, !paths.is_empty(), opener)
            .await?;
        while let Some(path) = paths.get(self.files.sent) {
            let n = self.files.sent;
            let caption = (self.files.captioned && n == 0).then_some(body);
            match self.send_one(path, n, caption, opener).await {
                Ok(sent) => {
                    self.journal_sent(&sent, true).await;
                    self.item_done(&format!("f{n}")).await;
                }
                Err(Failed::Retry(e)) => {
                    if let ChannelError::RateLimited { .. } = e {
                        crate::metrics::global().rate_limited(self.channel.name());
                    }
                    return Err(e);
                }
                Err(Failed::ForGood(e)) if failure == FileFailure::Fail => return Err(e),
                Err(Failed::ForGood(e)) => {
                    tracing::warn!(error = %e, file = %path, "a file of a reply cannot be sent; left out with a note");
                    self.files.notes.push(note(path, &e));
                    self.files.text_owed = caption.is_some();
                }
            }
            self.files.sent += 1;
            if self.files.text_owed {
                self.deliver_once(final_text).await?;
                self.files.text_owed = false;
            }
        }
        // The voice note beside the text (done already when it took the text's place).
        self.send_voice(opener).await?;
        if !self.files.notes.is_empty() && !self.files.notes_sent {
            let notes = self.files.notes.join("\n");
            let sent = match self.key.as_ref().map(|k| format!("{k}.n")) {
                Some(key) => {
                    self.channel
                        .send_keyed(&self.to, &notes, None, &key)
                        .await?
                }
                None => self.channel.send(&self.to, &notes).await?,
            };
            self.calls += 1;
            self.journal_sent(&sent, true).await;
            self.files.notes_sent = true;
        }
        self.channel.reply_done(&self.to).await;
        Ok(())
    }

    /// Delivers the text of a final with files, unless it rides as the first file's caption
    /// (when `may_caption`: the final has files) or its voice note goes instead of it (the
    /// preview then goes).
    async fn deliver_text_first(
        &mut self,
        final_text: &str,
        may_caption: bool,
        opener: &dyn FileOpener,
    ) -> Result<(), ChannelError> {
        if self.files.text_done {
            return Ok(());
        }
        if self.voice_instead() && self.send_voice(opener).await? {
            self.deliver_once(NO_REPLY).await?;
            self.item_done("text").await;
            self.files.text_done = true;
            return Ok(());
        }
        let body = final_text.trim();
        let silent = body.is_empty() || body.eq_ignore_ascii_case(NO_REPLY);
        let fits = body.chars().count() <= self.channel.caption_limit();
        let first = self.current.is_none() && self.frozen == 0 && self.files.sent == 0;
        if may_caption && !silent && fits && first {
            self.files.captioned = true;
        } else {
            self.deliver_once(if silent { NO_REPLY } else { final_text })
                .await?;
            self.item_done("text").await;
        }
        self.files.text_done = true;
        Ok(())
    }

    /// Opens and sends file `n` (`path`); a picture or voice note the platform refuses goes
    /// once more as a document.
    async fn send_one(
        &mut self,
        path: &str,
        n: usize,
        caption: Option<&str>,
        opener: &dyn FileOpener,
    ) -> Result<SentMessage, Failed> {
        let key = self.key.as_ref().map(|k| format!("{k}.f{n}"));
        let file = opener
            .open(path)
            .await
            .map_err(|why| Failed::ForGood(ChannelError::Rejected(why)))?;
        self.calls += 1;
        let refused = match self
            .channel
            .send_file(&self.to, &file, caption, key.as_deref())
            .await
        {
            Ok(sent) => return Ok(sent),
            // A channel without files (the terminal) names the file instead.
            Err(ChannelError::Unsupported(_)) => {
                let note = format!("[file: {path}]");
                let text = caption.map_or(note.clone(), |c| format!("{c}\n{note}"));
                self.calls += 1;
                return self.channel.send(&self.to, &text).await.map_err(classify);
            }
            Err(e) if e.is_retryable() || file.kind == AttachmentKind::Document => {
                return Err(classify(e));
            }
            Err(e) => e,
        };
        tracing::info!(error = %refused, file = %path, "refused as a picture or voice note; sending it as a document");
        // Opened (and checked) again: every upload reads what was checked right before it.
        let file = opener
            .open(path)
            .await
            .map_err(|why| Failed::ForGood(ChannelError::Rejected(why)))?
            .as_document();
        let key = key.map(|k| format!("{k}d"));
        self.calls += 1;
        self.channel
            .send_file(&self.to, &file, caption, key.as_deref())
            .await
            .map_err(classify)
    }

    /// Notes `item` as delivered, when the final's progress is kept.
    async fn item_done(&self, item: &str) {
        if let Some(progress) = &self.files.progress {
            progress.done(item).await;
        }
    }
}

/// A send's error as the file loop sees it.
fn classify(error: ChannelError) -> Failed {
    if error.is_retryable() {
        Failed::Retry(error)
    } else {
        Failed::ForGood(error)
    }
}

/// The note a file left out becomes.
fn note(path: &str, error: &ChannelError) -> String {
    let name = std::path::Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned());
    let why = match error {
        ChannelError::Rejected(why) => why.clone(),
        other => other.to_string(),
    };
    format!("(file not sent: {name}: {why})")
}
