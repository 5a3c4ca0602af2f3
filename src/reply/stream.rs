//! A reply being streamed into a chat: one message sent and then edited as the text grows,
//! parts frozen as the text outgrows the platform limit, the final given priority. With block
//! streaming, finished blocks go out as separate messages instead and nothing is edited.

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{Channel, ChannelError, Conversation, Limits, SentMessage};
use tokio::time::Instant;

use super::split::{Split, block_head, split_head};

#[path = "stream_files.rs"]
mod files;
#[path = "stream_voice.rs"]
mod voice;

pub use files::{FileFailure, FileOpener, FileProgress};
pub use voice::VoiceNote;

/// Attempts at delivering the final text before giving up.
const FINAL_ATTEMPTS: u32 = 6;
/// Longest pause between two parts of one reply.
const MAX_PART_GAP: Duration = Duration::from_secs(3);
/// Block streaming: a block is at least this many chars ...
const BLOCK_MIN_CHARS: usize = 800;
/// The first preview goes out as soon as the text has this many chars, without waiting for
/// the edit interval, so a slow model shows text early; later edits are paced.
const FIRST_PREVIEW_CHARS: usize = 30;
/// ... and at most this many (or the platform's limit, if lower).
const BLOCK_MAX_CHARS: usize = 1200;
/// The answer that means "send nothing" (SPEC 5).
pub const NO_REPLY: &str = "NO_REPLY";

/// Told of every new chat message a reply sends (not of edits), before the reply goes on, so
/// that a restart can take back the messages of a reply cut short.
pub trait SentJournal: Send + Sync {
    /// Message `message` was sent into the reply's conversation. With `durable`, the note is
    /// on disk before this returns; without, it is written at once and made durable by the
    /// store's next flush (a final's delivery mark, which follows right away, flushes).
    fn sent<'a>(
        &'a self,
        message: &'a SentMessage,
        durable: bool,
    ) -> chela_channel::BoxFuture<'a, ()>;

    /// Whether the reply may send a new message now. A cluster node that no longer holds
    /// the session says no: its new holder runs the turn again after reading the journal,
    /// so a message sent from here now could never be taken back.
    fn may_send(&self) -> bool {
        true
    }
}

/// The live state of one streamed reply.
pub struct ReplyStream {
    channel: Arc<dyn Channel>,
    to: Conversation,
    limits: Limits,
    /// The text as streamed (with any `MEDIA:` lines).
    text: String,
    /// What of `text` may be shown: without `MEDIA:` lines ([`super::media_lines::visible`]).
    visible: String,
    /// Bytes of `text` already shown in frozen parts.
    frozen: usize,
    /// Text carried into the current part (a reopened code fence).
    carry: String,
    current: Option<SentMessage>,
    shown: String,
    next_edit: Instant,
    /// Set when the platform answered 429: nothing goes out before this instant.
    limited_until: Option<Instant>,
    break_pending: bool,
    /// The message the first part quotes.
    quote: Option<String>,
    /// Block streaming: finished blocks are sent as messages of their own, never edited.
    blocks: bool,
    /// Told of each new message.
    journal: Option<Arc<dyn SentJournal>>,
    /// The idempotency key of this reply's sends (a final's outbox id): part `n` goes with
    /// `<key>.<n>`, so the same part sent again after a restart is not a second message.
    key: Option<String>,
    /// Parts frozen since the start (numbers the keyed sends).
    parts: usize,
    /// Platform calls made (sends, edits, deletes), for benchmarks and tests.
    pub calls: u32,
    /// Whether a preview was tried (the early first preview is tried once).
    first_tried: bool,
    /// How far the final's files got ([`ReplyStream::deliver_with_files`]).
    files: files::FilesState,
    /// The final's voice note and how far it got ([`ReplyStream::voice`]).
    voice: voice::VoiceState,
    /// When the message this replies to was accepted (ms since the epoch), until the first
    /// text is visible (`chela_first_text_seconds`).
    accepted_ms: Option<u64>,
}

impl ReplyStream {
    /// Starts a reply into `to`; nothing is sent until there is text.
    pub fn new(channel: Arc<dyn Channel>, to: Conversation) -> Self {
        Self::quoting(channel, to, None)
    }

    /// Starts a reply into `to` whose first message quotes `quote`.
    pub fn quoting(channel: Arc<dyn Channel>, to: Conversation, quote: Option<String>) -> Self {
        let mut limits = channel.limits();
        if to.kind != chela_channel::ChatKind::Direct {
            limits.edit_interval_ms = limits.group_edit_interval_ms;
        }
        let next_edit = Instant::now() + Duration::from_millis(limits.edit_interval_ms);
        let blocks = channel.block_streaming();
        ReplyStream {
            channel,
            to,
            limits,
            text: String::new(),
            visible: String::new(),
            frozen: 0,
            carry: String::new(),
            current: None,
            shown: String::new(),
            next_edit,
            limited_until: None,
            break_pending: false,
            quote,
            blocks,
            journal: None,
            key: None,
            parts: 0,
            calls: 0,
            first_tried: false,
            files: files::FilesState::default(),
            voice: voice::VoiceState::default(),
            accepted_ms: None,
        }
    }

    /// This reply, answering a message accepted at `ms` (ms since the epoch; 0: unknown):
    /// its first visible text is measured from then.
    pub fn accepted_at(mut self, ms: u64) -> Self {
        self.accepted_ms = (ms > 0).then_some(ms);
        self
    }

    /// Sends new messages from now on with idempotency keys derived from `key`
    /// ([`chela_channel::Channel::send_keyed`]).
    pub fn keyed(&mut self, key: String) {
        self.key = Some(key);
    }

    /// Tells `journal` of every new message this reply sends.
    pub fn journaled(mut self, journal: Option<Arc<dyn SentJournal>>) -> Self {
        self.journal = journal;
        self
    }

    /// The full text so far (`MEDIA:` lines included; the shown text leaves them out).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Adds streamed text. Previews and early parts show it without `MEDIA:` lines, so what
    /// they showed stays a prefix of the final the outbox sends without them.
    pub fn push(&mut self, delta: &str) {
        let mut added = String::new();
        if self.break_pending && !self.text.is_empty() && !delta.trim().is_empty() {
            added.push_str("\n\n");
        }
        self.break_pending = false;
        added.push_str(delta);
        let same = self.text.len() == self.visible.len();
        self.text.push_str(&added);
        match super::media_lines::visible(&self.text) {
            std::borrow::Cow::Borrowed(_) if same => self.visible.push_str(&added),
            shown => self.visible = shown.into_owned(),
        }
    }

    /// Marks a boundary between two model calls (a tool ran): the next text starts a paragraph.
    pub fn mark_break(&mut self) {
        self.break_pending = true;
    }

    /// When the next preview edit may go out, if one is due.
    pub fn preview_due(&self) -> Option<Instant> {
        if self.blocks {
            return self.next_block().map(|_| self.next_edit);
        }
        let pending = self.carry.clone() + &self.visible[self.frozen..];
        (pending != self.shown && !holds_back(&self.visible)).then_some(self.earliest_preview())
    }

    /// When the next preview may go: at the edit pace, or at once for a first preview with
    /// enough text (after a rate limit, never before the platform allows).
    fn earliest_preview(&self) -> Instant {
        let first = self.current.is_none()
            && !self.first_tried
            && self.frozen == 0
            && self.limited_until.is_none()
            && self.limits.previews()
            && self.visible.chars().nth(FIRST_PREVIEW_CHARS - 1).is_some();
        if first {
            self.next_edit.min(Instant::now())
        } else {
            self.next_edit
        }
    }

    /// Shows the text so far (paced; a rate limit only delays the next preview). With block
    /// streaming: sends the next finished block, if there is one.
    pub async fn preview(&mut self) {
        let due = if self.blocks {
            self.next_edit
        } else {
            self.earliest_preview()
        };
        if Instant::now() < due || holds_back(&self.visible) {
            return;
        }
        // Only the first attempt skips the pace: a refused first send waits like an edit.
        self.first_tried = true;
        if self.blocks {
            return self.send_block().await;
        }
        if let Err(ChannelError::RateLimited { retry_after_ms }) = self.show_all(false).await {
            self.next_edit = crate::domain::deadline::after(Duration::from_millis(retry_after_ms));
            self.limited_until = Some(self.next_edit);
            return;
        }
        self.next_edit = Instant::now() + Duration::from_millis(self.limits.edit_interval_ms);
    }

    /// Delivers `final_text` (replacing what was streamed) and ends the reply, retrying a
    /// few times in place (notices and answers outside the outbox). Text already visible is
    /// never sent again; a final edit the platform refuses replaces the preview (see
    /// [`ReplyStream::deliver_once`]).
    pub async fn finish(&mut self, final_text: &str) -> Result<(), ChannelError> {
        // A preview was refused with 429: the final waits as long as the platform asked.
        if let Some(until) = self.take_limit() {
            tokio::time::sleep_until(until).await;
        }
        // Attempts count only failures that made no progress: a long final of many parts
        // under a rate limit keeps going as long as parts get through.
        let mut attempt = 0;
        loop {
            let before = self.progress();
            let result = self.deliver_once(final_text).await;
            if before != self.progress() {
                attempt = 0;
            }
            match result {
                Ok(()) => return Ok(()),
                Err(ChannelError::RateLimited { retry_after_ms }) if attempt < FINAL_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(retry_after_ms)).await;
                }
                Err(e) if e.is_retryable() && attempt < FINAL_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                }
                Err(e) => return Err(e),
            }
            attempt += 1;
        }
    }

    /// One attempt at bringing the chat to `final_text` (replacing what was streamed); on
    /// success the reply is complete. Call it again after a retryable error: what got through
    /// is kept, never sent twice. When the platform refuses the final edit of the preview,
    /// the preview is deleted and the text sent once as a new message, so the chat never
    /// holds the preview and a second copy.
    pub async fn deliver_once(&mut self, final_text: &str) -> Result<(), ChannelError> {
        if final_text.trim().eq_ignore_ascii_case(NO_REPLY) {
            if let Some(message) = self.current.take() {
                self.calls += 1;
                if let Err(e) = self.channel.delete(&self.to, &message).await {
                    if e.is_retryable() {
                        self.current = Some(message);
                        return Err(e);
                    }
                    tracing::debug!(error = %e, "cannot delete the preview of a silent reply");
                }
            }
            return Ok(());
        }
        if !final_text.starts_with(&self.visible[..self.frozen]) {
            // The final does not extend what froze: keep the frozen parts, start fresh below.
            self.current = None;
            self.shown.clear();
            self.frozen = 0;
            self.carry.clear();
            self.visible.clear();
        }
        final_text.clone_into(&mut self.visible);
        final_text.clone_into(&mut self.text);
        self.show_all(true).await?;
        self.channel.reply_done(&self.to).await;
        Ok(())
    }

    /// The instant a refused preview asked the platform to be left alone until, once.
    pub fn take_limit(&mut self) -> Option<Instant> {
        self.limited_until.take()
    }

    /// What has been shown so far (frozen bytes, shown bytes, a message open, files and voice
    /// note sent):
    /// a change between two attempts means the second one made progress.
    pub fn progress(&self) -> (usize, usize, bool, usize) {
        (
            self.frozen,
            self.shown.len(),
            self.current.is_some(),
            self.files.progress() + self.voice.progress(),
        )
    }

    /// The next finished block of the text not sent yet, if there is one.
    fn next_block(&self) -> Option<Split> {
        let pending = self.carry.clone() + &self.visible[self.frozen..];
        let max = BLOCK_MAX_CHARS.min(self.limits.max_chars);
        block_head(&pending, BLOCK_MIN_CHARS, max, self.limits.max_lines)
    }

    /// Sends the next finished block as a message of its own (one per pacing interval).
    async fn send_block(&mut self) {
        let Some(split) = self.next_block() else {
            return;
        };
        let pause = match self.show(&split.head, false).await {
            Ok(()) => {
                self.freeze(split);
                self.limits.edit_interval_ms
            }
            Err(ChannelError::RateLimited { retry_after_ms }) => {
                let until = crate::domain::deadline::after(Duration::from_millis(retry_after_ms));
                self.limited_until = Some(until);
                retry_after_ms
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot send a block; trying again");
                self.limits.edit_interval_ms
            }
        };
        self.next_edit = crate::domain::deadline::after(Duration::from_millis(pause));
    }

    /// Marks `split`'s head as shown for good: what follows starts a new message.
    fn freeze(&mut self, split: Split) {
        let consumed = split.rest_at.saturating_sub(self.carry.len());
        self.frozen += consumed;
        self.parts += 1;
        self.carry = split.reopen.map(|f| f + "\n").unwrap_or_default();
        self.current = None;
        self.shown.clear();
    }

    /// Brings the chat up to date with `text`, freezing full parts.
    async fn show_all(&mut self, is_final: bool) -> Result<(), ChannelError> {
        let mut parts = 0;
        loop {
            let pending = self.carry.clone() + &self.visible[self.frozen..];
            match split_head(&pending, self.limits.max_chars, self.limits.max_lines) {
                Some(split) => {
                    self.pace(parts).await;
                    parts += 1;
                    self.show(&split.head, is_final).await?;
                    self.freeze(split);
                }
                None => {
                    if pending != self.shown && !pending.trim().is_empty() {
                        self.pace(parts).await;
                        self.show(&pending, is_final).await?;
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Spaces the parts of one update by the channel's edit interval, at most [`MAX_PART_GAP`]
    /// (a channel with previews off has a huge edit interval); the first part goes at once.
    async fn pace(&self, parts_sent: usize) {
        let gap = Duration::from_millis(self.limits.edit_interval_ms).min(MAX_PART_GAP);
        if parts_sent > 0 && !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
    }

    /// [`ReplyStream::show_now`], counted: 429s, and the first visible text.
    async fn show(&mut self, text: &str, is_final: bool) -> Result<(), ChannelError> {
        let shown = self.show_now(text, is_final).await;
        let metrics = crate::metrics::global();
        match &shown {
            Ok(()) => {
                if let Some(accepted) = self.accepted_ms.take() {
                    let ms = crate::domain::message::now_ms().saturating_sub(accepted);
                    metrics.first_text(ms as f64 / 1000.0);
                }
            }
            Err(ChannelError::RateLimited { .. }) => metrics.rate_limited(self.channel.name()),
            Err(_) => {}
        }
        shown
    }

    async fn show_now(&mut self, text: &str, is_final: bool) -> Result<(), ChannelError> {
        if self.current.is_none() && !self.may_send() {
            return Err(not_held());
        }
        self.calls += 1;
        match &self.current {
            None => {
                // The quote is used up only once a send got through.
                let sent = match &self.key {
                    Some(key) => {
                        let key = format!("{key}.{}", self.parts);
                        self.channel
                            .send_keyed(&self.to, text, self.quote.as_deref(), &key)
                            .await?
                    }
                    None => {
                        self.channel
                            .send_reply(&self.to, text, self.quote.as_deref())
                            .await?
                    }
                };
                self.quote = None;
                self.journal_sent(&sent, is_final).await;
                self.current = Some(sent);
            }
            Some(message) => match self.channel.edit(&self.to, message, text).await {
                Ok(()) => {}
                Err(e) if is_final && !e.is_retryable() => {
                    tracing::warn!(error = %e, "final edit refused; replacing the preview with the final");
                    self.replace_preview(text).await?;
                }
                Err(e) => return Err(e),
            },
        }
        self.shown = text.to_string();
        Ok(())
    }

    /// The final edit of the current message was refused: the message goes and `text` is
    /// sent once as a new one (never both). A retryable failure of the delete keeps the
    /// message for the next attempt.
    async fn replace_preview(&mut self, text: &str) -> Result<(), ChannelError> {
        if let Some(message) = self.current.take() {
            self.calls += 1;
            match self.channel.delete(&self.to, &message).await {
                Ok(()) => {}
                Err(e) if e.is_retryable() => {
                    self.current = Some(message);
                    return Err(e);
                }
                Err(e) => tracing::warn!(error = %e, "cannot delete the refused preview"),
            }
        }
        if !self.may_send() {
            return Err(not_held());
        }
        self.calls += 1;
        let sent = match &self.key {
            // Not the part's own key: that one may answer with the message just deleted.
            Some(key) => {
                let key = format!("{key}.{}r", self.parts);
                self.channel.send_keyed(&self.to, text, None, &key).await?
            }
            None => self.channel.send(&self.to, text).await?,
        };
        self.journal_sent(&sent, true).await;
        self.current = Some(sent);
        Ok(())
    }

    /// Whether a new message may go ([`SentJournal::may_send`]).
    fn may_send(&self) -> bool {
        self.journal.as_ref().is_none_or(|j| j.may_send())
    }

    /// Notes a new message; a preview's note is durable at once, a final's rides on the
    /// delivery mark's flush (no extra disk sync on the reply path).
    async fn journal_sent(&self, sent: &SentMessage, is_final: bool) {
        if let Some(journal) = &self.journal {
            journal.sent(sent, !is_final).await;
        }
    }
}

/// Why a reply whose node no longer holds its session sends nothing new (retryable: the
/// outbox then finds the session moved, and its new holder delivers).
fn not_held() -> ChannelError {
    ChannelError::Transport("this node no longer holds the session; its new holder replies".into())
}

/// True while the text could still become `NO_REPLY`: such text is not previewed.
fn holds_back(text: &str) -> bool {
    let t = text.trim();
    !t.is_empty() && NO_REPLY.len() >= t.len() && NO_REPLY[..t.len()].eq_ignore_ascii_case(t)
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
