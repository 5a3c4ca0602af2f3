//! Decoding of streamed Anthropic Messages events into [`ProviderEvent`]s.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde_json::{Value, json};

use super::openai_stream::parse_arguments;
use super::transport::{Decoder, error_message};
use super::{ProviderError, ProviderEvent};
use crate::domain::message::{StopReason, ToolCall, Usage};

/// State of one Messages stream.
#[derive(Debug, Default)]
pub(crate) struct AnthropicDecoder {
    /// Open content blocks, by index.
    blocks: BTreeMap<u64, Block>,
    /// True once any tool call was emitted.
    emitted_calls: bool,
    stop_reason: Option<StopReason>,
    usage: Usage,
}

#[derive(Debug)]
enum Block {
    Text,
    /// Reasoning, with the signature its `signature_delta` brought.
    Thinking(String),
    ToolUse {
        id: String,
        name: String,
        initial_input: Value,
        json: String,
    },
    Other,
}

impl Decoder for AnthropicDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Stream(format!("unreadable event: {e}")))?;
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.add_usage(usage);
                }
            }
            "content_block_start" => self.on_block_start(&value, out),
            "content_block_delta" => self.on_block_delta(&value, out),
            "content_block_stop" => {
                if let Some(index) = value.get("index").and_then(Value::as_u64) {
                    self.close_block(index, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(match reason {
                        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
                        "tool_use" => StopReason::ToolUse,
                        _ => StopReason::Stop,
                    });
                }
                if let Some(usage) = value.get("usage") {
                    self.add_usage(usage);
                }
            }
            "message_stop" => {
                self.finish(out);
                return Ok(true);
            }
            "error" => return Err(ProviderError::Stream(error_message(data))),
            _ => {} // ping and future event types
        }
        Ok(false)
    }

    fn on_end(&mut self, out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        if self.stop_reason.is_none() {
            return Err(ProviderError::Stream(
                "the stream ended before the message did".to_string(),
            ));
        }
        self.finish(out);
        Ok(())
    }
}

impl AnthropicDecoder {
    fn on_block_start(&mut self, value: &Value, out: &mut Vec<ProviderEvent>) {
        let Some(index) = value.get("index").and_then(Value::as_u64) else {
            return;
        };
        let block = value.get("content_block").unwrap_or(&Value::Null);
        let str_of = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        let state = match str_of("type") {
            "text" => {
                push_text(out, ProviderEvent::TextDelta, str_of("text"));
                Block::Text
            }
            "thinking" => {
                push_text(out, ProviderEvent::ThinkingDelta, str_of("thinking"));
                Block::Thinking(str_of("signature").to_owned())
            }
            "redacted_thinking" => {
                out.push(ProviderEvent::ThinkingSealed {
                    signature: str_of("data").to_owned(),
                    redacted: true,
                });
                Block::Other
            }
            "tool_use" => Block::ToolUse {
                id: str_of("id").to_string(),
                name: str_of("name").to_string(),
                initial_input: block.get("input").cloned().unwrap_or(Value::Null),
                json: String::new(),
            },
            _ => Block::Other,
        };
        self.blocks.insert(index, state);
    }

    fn on_block_delta(&mut self, value: &Value, out: &mut Vec<ProviderEvent>) {
        let index = value.get("index").and_then(Value::as_u64);
        let delta = value.get("delta").unwrap_or(&Value::Null);
        let str_of = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        match str_of("type") {
            "text_delta" => push_text(out, ProviderEvent::TextDelta, str_of("text")),
            "thinking_delta" => push_text(out, ProviderEvent::ThinkingDelta, str_of("thinking")),
            "input_json_delta" => {
                if let Some(Block::ToolUse { json, .. }) =
                    index.and_then(|i| self.blocks.get_mut(&i))
                {
                    json.push_str(str_of("partial_json"));
                }
            }
            "signature_delta" => {
                if let Some(Block::Thinking(signature)) =
                    index.and_then(|i| self.blocks.get_mut(&i))
                {
                    signature.push_str(str_of("signature"));
                }
            }
            _ => {} // future delta types
        }
    }

    /// Ends block `index`; a tool-use block becomes a complete [`ToolCall`].
    fn close_block(&mut self, index: u64, out: &mut Vec<ProviderEvent>) {
        let block = self.blocks.remove(&index);
        if let Some(Block::Thinking(signature)) = &block
            && !signature.is_empty()
        {
            out.push(ProviderEvent::ThinkingSealed {
                signature: signature.clone(),
                redacted: false,
            });
        }
        if let Some(Block::ToolUse {
            id,
            name,
            initial_input,
            json,
        }) = block
        {
            let arguments = if json.trim().is_empty() {
                if initial_input.is_object() {
                    initial_input
                } else {
                    json!({})
                }
            } else {
                parse_arguments(&json)
            };
            out.push(ProviderEvent::ToolCall(ToolCall {
                id,
                name,
                arguments,
            }));
            self.emitted_calls = true;
        }
    }

    /// Adds the counts present in a `usage` object (output tokens are cumulative).
    fn add_usage(&mut self, usage: &Value) {
        let get = |key: &str| usage.get(key).and_then(Value::as_u64);
        if let Some(n) = get("input_tokens") {
            self.usage.input = n;
        }
        if let Some(n) = get("output_tokens") {
            self.usage.output = n;
        }
        if let Some(n) = get("cache_read_input_tokens") {
            self.usage.cache_read = n;
        }
        if let Some(n) = get("cache_creation_input_tokens") {
            self.usage.cache_write = n;
        }
        let u = &mut self.usage;
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write;
    }

    /// Closes open tool blocks and pushes the one `Done`.
    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        let open: Vec<u64> = self.blocks.keys().copied().collect();
        for index in open {
            self.close_block(index, out);
        }
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

fn push_text(out: &mut Vec<ProviderEvent>, make: fn(String) -> ProviderEvent, text: &str) {
    if !text.is_empty() {
        out.push(make(text.to_string()));
    }
}

#[cfg(test)]
#[path = "anthropic_stream_tests.rs"]
mod tests;
