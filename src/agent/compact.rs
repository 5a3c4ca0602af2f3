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

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::{Provider, ProviderEvent, ProviderRequest, ToolSpec};
use crate::agent::run::{Agent, RunError};
use crate::domain::events::{Compacted, RunEvent};
use crate::domain::message::{ContentBlock, Message, StopReason, text_of};
use crate::store::{EntryKind, SUMMARY_HEADING, StoreError};

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
const MIN_SUMMARY_TOKENS: u64 = 256;

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
    fn summary_input_chars(&self) -> usize {
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
            ContentBlock::Thinking { thinking } => thinking.chars().count(),
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
    let tools: usize = tools
        .iter()
        .map(|t| {
            t.name.chars().count()
                + t.description.chars().count()
                + t.parameters.to_string().chars().count()
        })
        .sum();
    tokens_of_chars(system.chars().count() + tools)
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

/// Asks `provider` for a summary of the conversation in `input` (a plain request: no tools).
async fn summarize(
    provider: &dyn Provider,
    input: String,
    max_tokens: u32,
    cancel: &CancellationToken,
) -> Result<String, CompactError> {
    let request = ProviderRequest {
        system: SUMMARY_SYSTEM.to_string(),
        messages: vec![Message::user(input)],
        tools: Vec::new(),
        max_tokens,
        model: None,
    };
    let work = async {
        let model = |e: crate::agent::provider::ProviderError| CompactError::Model(e.to_string());
        let mut stream = provider.stream(request).await.map_err(model)?;
        let mut summary = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(model)? {
                ProviderEvent::TextDelta(delta) => summary.push_str(&delta),
                ProviderEvent::Done {
                    stop_reason: StopReason::Error,
                    ..
                } => {
                    return Err(CompactError::Model(
                        "the model stopped with an error".into(),
                    ));
                }
                ProviderEvent::Done { .. } => break,
                ProviderEvent::ThinkingDelta(_) | ProviderEvent::ToolCall(_) => {}
            }
        }
        let summary = summary.trim();
        if summary.is_empty() {
            return Err(CompactError::EmptySummary);
        }
        Ok(summary.to_string())
    };
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(CompactError::Cancelled),
        result = work => result,
    }
}

impl Agent {
    /// Compacts session `key` now: summarizes the older part of its window with the model
    /// and appends one `compaction` entry. `keep_tokens` bounds the recent messages kept
    /// verbatim (0: only the newest turn). `Ok(None)` when there is nothing to summarize.
    pub async fn compact(
        &self,
        key: &str,
        keep_tokens: u64,
        cancel: &CancellationToken,
    ) -> Result<Option<Compacted>, CompactError> {
        if self.store.get_session(key)?.is_none() {
            return Ok(None);
        }
        let window = self.store.window_entries(key)?;
        let messages: Vec<Message> = window.iter().map(|w| w.message.clone()).collect();
        let base = self.base_tokens();
        let tokens_before = estimate_prompt(base, &messages);
        let Some(cut) = split_point(&messages, keep_tokens) else {
            return Ok(None);
        };
        let Some(first_kept) = window[cut].entry_id.clone() else {
            return Ok(None);
        };
        let input = summary_input(&messages[..cut], self.compaction.summary_input_chars());
        let max_tokens = u64::from(self.max_tokens)
            .min(self.compaction.reserve_tokens.max(MIN_SUMMARY_TOKENS))
            .max(1);
        let max_tokens = u32::try_from(max_tokens).unwrap_or(self.max_tokens);
        let summary = summarize(self.provider.as_ref(), input, max_tokens, cancel).await?;
        let entry_id = self.store.append(
            key,
            EntryKind::Compaction {
                summary,
                first_kept_entry_id: first_kept.clone(),
                tokens_before,
            },
        )?;
        let tokens_after = estimate_prompt(base, &self.store.window(key)?);
        let done = Compacted {
            entry_id,
            first_kept_entry_id: first_kept,
            summarized: cut,
            tokens_before,
            tokens_after,
        };
        tracing::info!(
            session = key,
            entry = %done.entry_id,
            first_kept = %done.first_kept_entry_id,
            summarized = cut,
            tokens_before,
            tokens_after,
            "compacted the session's model window"
        );
        Ok(Some(done))
    }

    /// Before a model call of a run: compacts the window when its estimated prompt exceeds
    /// the threshold, replacing `messages` by the compacted window and sending a
    /// [`RunEvent::Compaction`]. When compaction fails (or finds nothing to summarize) the
    /// run goes on if the prompt still fits the window, else fails with
    /// [`RunError::ContextTooLong`];
    /// `gave_up` then keeps later calls of the run from trying again.
    pub(crate) async fn compact_before_call(
        &self,
        key: &str,
        messages: &mut Vec<Message>,
        cancel: &CancellationToken,
        events: &mpsc::Sender<RunEvent>,
        gave_up: &mut bool,
    ) -> Result<(), RunError> {
        let settings = self.compaction;
        if !settings.enabled() {
            return Ok(());
        }
        let base = self.base_tokens();
        let estimate = estimate_prompt(base, messages);
        if estimate <= settings.threshold() {
            return Ok(());
        }
        let fits = estimate <= settings.context_window;
        if *gave_up {
            return if fits {
                Ok(())
            } else {
                Err(RunError::ContextTooLong)
            };
        }
        match self.compact(key, settings.keep_tokens(base), cancel).await {
            Ok(Some(done)) => {
                *messages = self.store.window(key).map_err(|e| {
                    tracing::error!(error = %e, "cannot read the compacted window");
                    RunError::Storage(e.to_string())
                })?;
                let _ = events.send(RunEvent::Compaction(done)).await;
                Ok(())
            }
            // The model call that follows sees the cancel and ends the run.
            Err(CompactError::Cancelled) => Ok(()),
            outcome => {
                match outcome {
                    Err(e) => {
                        tracing::warn!(session = key, error = %e, estimate, "compaction failed")
                    }
                    _ => tracing::warn!(session = key, estimate, "nothing to compact"),
                }
                *gave_up = true;
                if fits {
                    Ok(())
                } else {
                    Err(RunError::ContextTooLong)
                }
            }
        }
    }

    /// Estimated tokens of the system prompt and tool list of every call.
    pub(crate) fn base_tokens(&self) -> u64 {
        let specs: Vec<ToolSpec> = self.tools.iter().map(|t| t.spec()).collect();
        // Every tool, listed in the prompt too: a run offered fewer stays below this.
        let system = self.system_for(&specs);
        base_tokens(&system, &specs)
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
