//! The agent's side of compaction ([`compact`](crate::agent::compact) has the rules): the
//! summary request to the model, `/compact`, and the check before each model call of a run.

use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::compact::{
    CompactError, MIN_SUMMARY_TOKENS, SUMMARY_SYSTEM, base_tokens_of, estimate_prompt, split_point,
    summary_input,
};
use crate::agent::provider::{Provider, ProviderEvent, ProviderRequest, ToolSpec};
use crate::agent::run::{Agent, RunError};
use crate::domain::events::{Compacted, RunEvent};
use crate::domain::message::{Message, StopReason, Usage};
use crate::store::EntryKind;

/// Asks `provider` for a summary of the conversation in `input` (a plain request: no tools);
/// the summary, and the tokens the call used.
async fn summarize(
    provider: &dyn Provider,
    input: String,
    max_tokens: u32,
    cancel: &CancellationToken,
) -> Result<(String, Usage, (String, String)), CompactError> {
    let request = ProviderRequest {
        system: SUMMARY_SYSTEM.to_string(),
        messages: vec![Message::user(input)],
        tools: Vec::new(),
        max_tokens,
        model: None,
        thinking: crate::agent::provider::Thinking::Off,
        show_reasoning: false,
        cache_key: None,
    };
    let work = async {
        let model = |e: crate::agent::provider::ProviderError| CompactError::Model(e.to_string());
        let mut stream = provider.stream(request).await.map_err(model)?;
        let mut summary = String::new();
        let mut used = Usage::default();
        let mut who = (provider.name().to_owned(), provider.model().to_owned());
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
                ProviderEvent::Done { usage, .. } => {
                    used = usage;
                    break;
                }
                ProviderEvent::Answered(answered) => who = (answered.provider, answered.model),
                ProviderEvent::ThinkingDelta(_)
                | ProviderEvent::ThinkingSealed { .. }
                | ProviderEvent::ToolCall(_) => {}
            }
        }
        let summary = summary.trim();
        if summary.is_empty() {
            return Err(CompactError::EmptySummary);
        }
        Ok((summary.to_string(), used, who))
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
        let (summary, used, who) =
            summarize(self.provider.as_ref(), input, max_tokens, cancel).await?;
        // Not in the transcript: counted in the metrics only.
        self.count_call(&who.0, &who.1, &used);
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
    /// the threshold (the window less `agent.compaction_reserve_tokens` and `extra_reserve`,
    /// the call's thinking budget), replacing `messages` by the compacted window and sending a
    /// [`RunEvent::Compaction`]. When compaction fails (or finds nothing to summarize) the
    /// run goes on if the prompt still fits the window, else fails with
    /// [`RunError::ContextTooLong`];
    /// `gave_up` then keeps later calls of the run from trying again.
    pub(crate) async fn compact_before_call(
        &self,
        key: &str,
        extra_reserve: u64,
        messages: &mut Vec<Message>,
        cancel: &CancellationToken,
        events: &mpsc::Sender<RunEvent>,
        gave_up: &mut bool,
    ) -> Result<(), RunError> {
        let settings = self.compaction.with_room(extra_reserve);
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
        let own = self.specs.specs(&self.tools);
        let mcp: Vec<ToolSpec> = self.mcp.iter().flat_map(|mcp| mcp.specs()).collect();
        // Every tool, listed in the prompt too: a run offered fewer stays below this.
        let system = self.system_for(own.iter().map(|s| &**s).chain(&mcp));
        let tool_chars = self.specs.chars(&self.tools) + crate::agent::tool_specs::spec_chars(&mcp);
        base_tokens_of(&system, tool_chars)
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
