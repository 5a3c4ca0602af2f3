//! The model's reasoning in the chat (`/reasoning on`): one message of its own before the
//! answer, collapsed where the platform can ([`Channel::collapsed`]: Telegram's expandable
//! quote, Discord's spoiler), sent with the first reasoning and edited as it grows, no more
//! often than the channel's edit interval. Only the reasoning's tail is shown when it outgrows
//! one message. It is a preview, not a reply part: it is not journaled, never part of the
//! final, and a failed send or edit is dropped (the answer does not wait for it).

use std::sync::Arc;
use std::time::Duration;

use chela_channel::{Channel, ChatKind, Conversation, SentMessage};
use tokio::time::Instant;

/// The title above the reasoning.
pub const TITLE: &str = "💭 Reasoning";

/// Characters of a message kept for the title and the quoting around the reasoning.
const FRAME: usize = 64;

/// The reasoning preview of one run.
pub struct ReasoningPreview {
    channel: Arc<dyn Channel>,
    to: Conversation,
    text: String,
    message: Option<SentMessage>,
    shown: usize,
    next_at: Instant,
    every: Duration,
    max_chars: usize,
    failed: bool,
    /// The platform said to wait until then (429).
    limited_until: Option<Instant>,
}

impl ReasoningPreview {
    /// A preview in `to`, nothing sent yet.
    pub fn new(channel: Arc<dyn Channel>, to: Conversation) -> ReasoningPreview {
        let limits = channel.limits();
        let every = match to.kind {
            ChatKind::Direct => limits.edit_interval_ms,
            _ => limits.group_edit_interval_ms,
        };
        ReasoningPreview {
            channel,
            to,
            text: String::new(),
            message: None,
            shown: 0,
            next_at: Instant::now(),
            every: Duration::from_millis(every.max(500)),
            max_chars: limits.max_chars.saturating_sub(FRAME).max(FRAME),
            failed: false,
            limited_until: None,
        }
    }

    /// Adds reasoning.
    pub fn push(&mut self, delta: &str) {
        self.text.push_str(delta);
    }

    /// When the next show is due, if there is something new to show.
    pub fn due(&self) -> Option<Instant> {
        (!self.failed && self.text.len() > self.shown && !self.text.trim().is_empty())
            .then_some(self.next_at)
    }

    /// Shows what is new now, whatever its pace, as the answer's first text comes; when the
    /// platform said to wait and nothing was shown yet, the reasoning is given up for this
    /// run rather than shown below the answer.
    pub async fn flush(&mut self) {
        let now = Instant::now();
        if self.limited_until.is_some_and(|until| until > now) {
            self.failed |= self.message.is_none();
            return;
        }
        self.next_at = now;
        self.show().await;
    }

    /// Sends or edits the message to show the reasoning so far, when due.
    pub async fn show(&mut self) {
        if self.due().is_none_or(|at| at > Instant::now()) {
            return;
        }
        let body = tail(&self.text, self.max_chars);
        let text = self.channel.collapsed(TITLE, &body);
        let result = match &self.message {
            None => self.channel.send(&self.to, &text).await.map(Some),
            Some(sent) => self
                .channel
                .edit(&self.to, sent, &text)
                .await
                .map(|()| None),
        };
        match result {
            Ok(Some(sent)) => self.message = Some(sent),
            Ok(None) => {}
            Err(chela_channel::ChannelError::RateLimited { retry_after_ms }) => {
                // Shown later, after the platform's wait: the answer's edits come first.
                let until = Instant::now() + Duration::from_millis(retry_after_ms).max(self.every);
                self.limited_until = Some(until);
                self.next_at = until;
                return;
            }
            Err(e) => {
                tracing::debug!(error = %e, "the reasoning preview could not be shown");
                self.failed = self.message.is_none();
            }
        }
        self.shown = self.text.len();
        self.next_at = Instant::now() + self.every;
    }
}

/// The last `max` characters of `text`, cut at a line or word when it is longer, marked `…`.
fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    let count = text.chars().count();
    if count <= max {
        return text.to_owned();
    }
    let start = text.char_indices().nth(count - max).map_or(0, |(i, _)| i);
    let rest = &text[start..];
    // Cut inside a word: start after it.
    let rest = match text[..start].ends_with(char::is_whitespace) {
        true => rest,
        false => rest
            .find(char::is_whitespace)
            .map_or(rest, |i| rest[i..].trim_start()),
    };
    format!("…{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_is_kept_and_marked() {
        assert_eq!(tail("  short  ", 10), "short");
        assert_eq!(tail("one two three four", 10), "…three four");
        assert_eq!(tail("one two three four", 9), "…four");
        assert_eq!(tail("ééééé ééé", 4), "…ééé");
    }
}
