//! Decoding of streamed chat-completions chunks into [`ProviderEvent`]s.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde::Deserialize;
use serde_json::{Value, json};

use super::transport::{Decoder, error_message};
use super::{ProviderError, ProviderEvent};
use crate::domain::message::{StopReason, ToolCall, Usage};

/// State of one chat-completions stream.
#[derive(Debug, Default)]
pub(crate) struct OpenAiDecoder {
    /// Tool calls being assembled, by their `index`.
    calls: BTreeMap<u64, PartialCall>,
    /// Index of the call that last received a fragment.
    last_index: Option<u64>,
    /// True once any tool call was emitted.
    emitted_calls: bool,
    stop_reason: Option<StopReason>,
    usage: Usage,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<CallFragment>,
}

#[derive(Debug, Deserialize)]
struct CallFragment {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionFragment>,
}

#[derive(Debug, Deserialize)]
struct FunctionFragment {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    total_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

impl Decoder for OpenAiDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            self.finish(out);
            return Ok(true);
        }
        let chunk: Chunk = serde_json::from_str(data)
            .map_err(|e| ProviderError::Stream(format!("unreadable chunk: {e}")))?;
        if let Some(error) = chunk.error {
            return Err(ProviderError::Stream(error_message(
                &json!({"error": error}).to_string(),
            )));
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                self.on_delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason.filter(|r| !r.is_empty()) {
                self.flush_calls(out);
                self.stop_reason = Some(match reason.as_str() {
                    "length" => StopReason::Length,
                    "tool_calls" | "function_call" => StopReason::ToolUse,
                    // Some servers say `stop` after tool calls; the calls still need results.
                    _ if self.emitted_calls => StopReason::ToolUse,
                    _ => StopReason::Stop,
                });
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage.prompt_tokens_details.map_or(0, |d| d.cached_tokens);
            let input = usage.prompt_tokens.saturating_sub(cached);
            self.usage = Usage {
                input,
                output: usage.completion_tokens,
                cache_read: cached,
                cache_write: 0,
                total_tokens: usage
                    .total_tokens
                    .unwrap_or(usage.prompt_tokens + usage.completion_tokens),
            };
        }
        Ok(false)
    }

    fn on_end(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        self.finish(out);
        Ok(())
    }
}

impl OpenAiDecoder {
    fn on_delta(&mut self, delta: Delta, out: &mut Vec<ProviderEvent>) {
        for thinking in [delta.reasoning_content, delta.reasoning]
            .into_iter()
            .flatten()
        {
            if !thinking.is_empty() {
                out.push(ProviderEvent::ThinkingDelta(thinking));
            }
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push(ProviderEvent::TextDelta(text));
        }
        for fragment in delta.tool_calls {
            let index = match fragment.index {
                Some(index) => index,
                // Without an index, a fragment with an id starts a new call; one without
                // continues the last call.
                None => match (fragment.id.is_some(), self.last_index) {
                    (false, Some(last)) => last,
                    _ => self.calls.keys().next_back().map_or(0, |k| k + 1),
                },
            };
            self.last_index = Some(index);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = fragment.id.filter(|id| !id.is_empty())
                && call.id.is_empty()
            {
                call.id = id;
            }
            if let Some(function) = fragment.function {
                if let Some(name) = function.name.filter(|n| !n.is_empty())
                    && call.name.is_empty()
                {
                    call.name = name;
                }
                if let Some(arguments) = function.arguments {
                    call.arguments.push_str(&arguments);
                }
            }
        }
    }

    /// Emits the assembled tool calls in index order.
    fn flush_calls(&mut self, out: &mut Vec<ProviderEvent>) {
        for (index, call) in std::mem::take(&mut self.calls) {
            let id = if call.id.is_empty() {
                format!("call_{index}")
            } else {
                call.id
            };
            out.push(ProviderEvent::ToolCall(ToolCall {
                id,
                name: call.name,
                arguments: parse_arguments(&call.arguments),
            }));
            self.emitted_calls = true;
        }
        self.last_index = None;
    }

    /// Flushes what is left and pushes the one `Done`.
    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        self.flush_calls(out);
        let stop_reason = self.stop_reason.unwrap_or(if self.emitted_calls {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        });
        out.push(ProviderEvent::Done {
            stop_reason,
            usage: self.usage,
        });
    }
}

/// Tool arguments as a JSON object: empty means `{}`; invalid JSON (or JSON that is not an
/// object) is kept as `{"_raw": text}` so the model sees its mistake in the tool's answer.
pub(crate) fn parse_arguments(text: &str) -> Value {
    if text.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value) if value.is_object() => value,
        _ => json!({ "_raw": text }),
    }
}

#[cfg(test)]
#[path = "openai_stream_tests.rs"]
mod tests;
