//! Compaction (SPEC 7): when a session's prompt nears the model's context window, the older
//! part of its window is summarized by the model and one `compaction` entry is appended
//! (`summary`, `firstKeptEntryId`, `tokensBefore`). History is never rewritten: every entry
//! stays in the store and in `chela sessions export`; only the model window
//! ([`SessionStore::window`](crate::store::SessionStore::window)) starts from the summary, followed by the kept entries.
//!
//! # When
//! Before each model call of a run, the prompt is estimated; above `model.context_window -
//! agent.compaction_reserve_tokens` the window is compacted first. `/compact` forces it.
//!
//! # Token estimate
//! Providers report the prompt tokens of every call (`usage.input` plus cache reads and
//! writes). The next prompt is estimated as the figure of the last assistant message in the
//! window plus chars / 4 (rounded up, plus 4 tokens per message) for that message and every
//! message after it. Without a usable report (the `echo` provider, a server that sends no
//! usage, or only reports older than the last compaction), the whole prompt is estimated at
//! chars / 4: system prompt, tool schemas and messages. Chars / 4 is the usual rule of thumb
//! for English text with GPT and Claude tokenizers; it undercounts code and non-Latin scripts,
//! which the reserve absorbs.
//!
//! # What is kept
//! The split is at the start of a user message, never between a tool call and its result and
//! never after the newest user message: the newest turn is always kept verbatim. Of the
//! possible splits, the earliest whose kept part fits in a quarter of the conversation's
//! budget (the threshold minus the system prompt and tools) wins; when none does, only the
//! newest turn is kept. An earlier summary is summarized again with the messages after it.

use crate::agent::provider::ToolSpec;
use crate::domain::message::{ContentBlock, Message, text_of};
use crate::store::{SUMMARY_HEADING, StoreError};

/// The system prompt of a summary request.
pub const SUMMARY_SYSTEM: &str = "You are a context summarization assistant. You read a \
conversation between a user and an AI assistant and write a summary the assistant will use \
to continue the conversation. Do not continue the conversation and do not answer questions \
in it; output only the summary.";

/// The instruction after the conversation in a summary request.
pub const SUMMARY_INSTRUCTION: &str = "Summarize the conversation above for the assistant \
who will continue it. Keep the user's goals and requests, decisions made, facts learned \
(names, paths, numbers, commands and their results), work done and what is still open. \
Be concise: short bullet points, in the language of the conversation.";

/// Characters per token of the estimate.
const CHARS_PER_TOKEN: u64 = 4;
/// Tokens added per message for its role and framing.
const MESSAGE_OVERHEAD_TOKENS: u64 = 4;
/// The kept part aims at 1 / this of the conversation's budget.
const KEEP_SHARE: u64 = 4;
/// Most chars of one message quoted in a summary request (head and tail kept).
const QUOTE_CHARS: usize = 4_000;
/// Least output tokens of a summary request (when `max_tokens` allows).
pub(crate) const MIN_SUMMARY_TOKENS: u64 = 256;

/// The context budget of the model (from `model.context_window` and
/// `agent.compaction_reserve_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// The model's context window in tokens; 0 turns compaction off.
    pub context_window: u64,
    /// Tokens kept free for the answer.
    pub reserve_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            context_window: 128_000,
            reserve_tokens: 20_000,
        }
    }
}

impl CompactionSettings {
    /// True unless `context_window` is 0.
    pub fn enabled(&self) -> bool {
        self.context_window > 0
    }

    /// These settings with `extra` more tokens kept free (a call's thinking budget), but the
    /// reserve never above half the window unless it already was.
    pub fn with_room(mut self, extra: u64) -> Self {
        let grown = self
            .reserve_tokens
            .saturating_add(extra)
            .min(self.context_window / 2);
        self.reserve_tokens = self.reserve_tokens.max(grown);
        self
    }

    /// Estimated prompt tokens above which a run compacts before its next model call.
    pub fn threshold(&self) -> u64 {
        self.context_window.saturating_sub(self.reserve_tokens)
    }

    /// Tokens of recent messages kept verbatim, given `base` tokens of system prompt and tools.
    pub fn keep_tokens(&self, base: u64) -> u64 {
        self.threshold().saturating_sub(base) / KEEP_SHARE
    }

    /// Most chars of conversation quoted in a summary request: 3 per token of the
    /// threshold, so the request stays well inside the window.
    pub(crate) fn summary_input_chars(&self) -> usize {
        usize::try_from(self.threshold().saturating_mul(3)).unwrap_or(usize::MAX)
    }
}

/// Why a compaction did not happen. The texts are short and safe for chat.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// The store failed.
    #[error("storage error: {0}")]
    Store(#[from] StoreError),
    /// The summary call failed.
    #[error("the summary request failed: {0}")]
    Model(String),
    /// The model answered with no text.
    #[error("the model returned an empty summary")]
    EmptySummary,
    /// The run or the gateway was stopped meanwhile.
    #[error("cancelled")]
    Cancelled,
}

/// `ceil(chars / 4)`.
pub fn tokens_of_chars(chars: usize) -> u64 {
    (chars as u64).div_ceil(CHARS_PER_TOKEN)
}

/// Estimated tokens of one message: its text, thinking and tool calls at chars / 4, plus a
/// small overhead.
pub fn message_tokens(message: &Message) -> u64 {
    let chars: usize = content(message)
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.chars().count(),
            ContentBlock::Thinking { thinking, .. } => thinking.chars().count(),
            ContentBlock::ToolCall(call) => {
                call.id.len() + call.name.len() + call.arguments.to_string().chars().count()
            }
            // About 1,600 tokens, what a large picture costs a vision model.
            ContentBlock::Image(_) => IMAGE_CHARS,
        })
        .sum();
    tokens_of_chars(chars) + MESSAGE_OVERHEAD_TOKENS
}

/// What one image counts for in the estimate, in chars (about 1,600 tokens).
const IMAGE_CHARS: usize = 6_400;

/// Estimated tokens of the system prompt and the tool list.
pub fn base_tokens(system: &str, tools: &[ToolSpec]) -> u64 {
    base_tokens_of(system, crate::agent::tool_specs::spec_chars(tools.iter()))
}

/// Estimated tokens of the system prompt and a tool list of `tool_chars` characters
/// ([`crate::agent::tool_specs::spec_chars`]).
pub fn base_tokens_of(system: &str, tool_chars: usize) -> u64 {
    tokens_of_chars(system.chars().count() + tool_chars)
}

/// Estimated prompt tokens of a call with `messages`, `base` being the system prompt and
/// tools: the last usable reported prompt plus what came since, else everything at chars / 4.
pub fn estimate_prompt(base: u64, messages: &[Message]) -> u64 {
    match last_report(messages) {
        Some((i, reported)) => reported + messages[i..].iter().map(message_tokens).sum::<u64>(),
        None => base + messages.iter().map(message_tokens).sum::<u64>(),
    }
}

/// The index and reported prompt tokens of the last assistant message with a report made
/// after the window's summary (a kept message's report counts the history that was
/// summarized since).
fn last_report(messages: &[Message]) -> Option<(usize, u64)> {
    let floor = match messages.first() {
        Some(Message::User(u)) if is_summary(&messages[0]) => Some(u.timestamp),
        _ => None,
    };
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m {
            Message::Assistant(a) if floor.is_none_or(|f| a.timestamp > f) => {
                let prompt = a.usage.input + a.usage.cache_read + a.usage.cache_write;
                (prompt > 0).then_some((i, prompt))
            }
            _ => None,
        })
}

/// True for the synthetic user message a compaction puts first in the window.
pub fn is_summary(message: &Message) -> bool {
    match message {
        Message::User(u) => matches!(
            u.content.first(),
            Some(ContentBlock::Text { text }) if text.starts_with(SUMMARY_HEADING)
        ),
        _ => false,
    }
}

/// Where the kept part of `messages` starts, or `None` when nothing before the newest turn
/// can be summarized (see the module docs for the rule).
pub fn split_point(messages: &[Message], keep_tokens: u64) -> Option<usize> {
    let first = usize::from(messages.first().is_some_and(is_summary));
    let last_user = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(_)))?;
    let straddled = straddled(messages);
    let mut tail = vec![0u64; messages.len() + 1];
    for i in (0..messages.len()).rev() {
        tail[i] = tail[i + 1] + message_tokens(&messages[i]);
    }
    let candidates: Vec<usize> = (first + 1..=last_user)
        .filter(|&i| matches!(messages[i], Message::User(_)) && !straddled[i])
        .collect();
    candidates
        .iter()
        .copied()
        .find(|&i| tail[i] <= keep_tokens)
        .or_else(|| candidates.last().copied())
}

/// `straddled[i]` is true when splitting before message `i` would separate a tool call from
/// its result.
fn straddled(messages: &[Message]) -> Vec<bool> {
    let mut calls = std::collections::HashMap::new();
    let mut delta = vec![0i64; messages.len() + 2];
    for (i, m) in messages.iter().enumerate() {
        match m {
            Message::Assistant(a) => {
                for block in &a.content {
                    if let ContentBlock::ToolCall(call) = block {
                        calls.insert(call.id.as_str(), i);
                    }
                }
            }
            Message::ToolResult(r) => {
                if let Some(&a) = calls.get(r.tool_call_id.as_str()) {
                    delta[a + 1] += 1;
                    delta[i + 1] -= 1;
                }
            }
            Message::User(_) => {}
        }
    }
    let mut open = 0;
    delta
        .iter()
        .take(messages.len() + 1)
        .map(|d| {
            open += d;
            open > 0
        })
        .collect()
}

/// The user text of a summary request for `messages`: the conversation as `[role]: text`
/// lines inside `<conversation>` tags (each message at most 4,000 chars, all of them at most
/// `max_chars`, head and tail kept), then [`SUMMARY_INSTRUCTION`].
pub fn summary_input(messages: &[Message], max_chars: usize) -> String {
    let mut lines = Vec::new();
    for m in messages {
        match m {
            Message::User(u) => lines.push(format!("[user]: {}", clip(&text_of(&u.content)))),
            Message::Assistant(a) => {
                let text = text_of(&a.content);
                if !text.is_empty() {
                    lines.push(format!("[assistant]: {}", clip(&text)));
                }
                for block in &a.content {
                    if let ContentBlock::ToolCall(call) = block {
                        let args = call.arguments.to_string();
                        lines.push(format!("[assistant calls {}]: {}", call.name, clip(&args)));
                    }
                }
            }
            Message::ToolResult(r) => {
                let error = if r.is_error { " (error)" } else { "" };
                let text = clip(&text_of(&r.content));
                lines.push(format!("[{} result{error}]: {text}", r.tool_name));
            }
        }
    }
    let conversation = clip_to(&lines.join("\n"), max_chars.max(QUOTE_CHARS));
    format!("<conversation>\n{conversation}\n</conversation>\n\n{SUMMARY_INSTRUCTION}")
}

fn clip(text: &str) -> String {
    clip_to(text, QUOTE_CHARS)
}

/// `text` if at most `max` chars, else its head and tail around a marker.
fn clip_to(text: &str, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let head = max / 4;
    let tail = max - head;
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(total - tail).collect();
    format!(
        "{start}\n[... {} of {total} chars left out ...]\n{end}",
        total - head - tail
    )
}

fn content(message: &Message) -> &[ContentBlock] {
    match message {
        Message::User(u) => &u.content,
        Message::Assistant(a) => &a.content,
        Message::ToolResult(r) => &r.content,
    }
}
