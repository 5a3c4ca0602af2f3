//! Decoding of a streamed Responses answer (typed `response.*` events) into
//! [`ProviderEvent`]s: output text, reasoning summaries and text as thinking, function calls
//! assembled from their items (argument deltas are keyed by the item's id, the call by its
//! `call_id`), and the usage of the final `response.completed` / `response.incomplete`.

use std::collections::BTreeMap;

use eventsource_stream::Event;
use serde_json::Value;

use super::openai_stream::parse_arguments;
use super::transport::Decoder;
use super::{ProviderError, ProviderEvent};
use crate::domain::message::{StopReason, ToolCall, Usage};

/// State of one Responses stream.
#[derive(Debug, Default)]
pub(crate) struct ResponsesDecoder {
    /// Function calls being assembled, by item id.
    calls: BTreeMap<String, PartialCall>,
    /// True once any tool call was emitted.
    emitted_calls: bool,
}

#[derive(Debug, Default)]
struct PartialCall {
    call_id: String,
    name: String,
    arguments: String,
}

impl Decoder for ResponsesDecoder {
    fn on_event(
        &mut self,
        event: &Event,
        out: &mut Vec<ProviderEvent>,
    ) -> Result<bool, ProviderError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        let value: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Stream(format!("unreadable event: {e}")))?;
        let text = |field: &str| value[field].as_str().unwrap_or_default().to_owned();
        match value["type"].as_str().unwrap_or_default() {
            // A refusal is the answer the model gives: shown as its text.
            "response.output_text.delta" | "response.refusal.delta" => {
                push(out, ProviderEvent::TextDelta, text("delta"));
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                push(out, ProviderEvent::ThinkingDelta, text("delta"));
            }
            "response.reasoning_summary_part.done" => {
                push(out, ProviderEvent::ThinkingDelta, "\n\n".to_owned());
            }
            "response.output_item.added" => self.item_added(&value["item"]),
            "response.function_call_arguments.delta" => {
                if let Some(call) = self.calls.get_mut(value["item_id"].as_str().unwrap_or("")) {
                    call.arguments
                        .push_str(value["delta"].as_str().unwrap_or_default());
                }
            }
            "response.output_item.done" if value["item"]["type"] == "reasoning" => {
                reasoning_done(&value["item"], out);
            }
            "response.output_item.done" => self.item_done(&value["item"], out),
            "response.completed" => return Ok(self.finish(&value["response"], false, out)),
            "response.incomplete" => return Ok(self.finish(&value["response"], true, out)),
            "response.failed" => {
                let error = &value["response"]["error"];
                return Err(ProviderError::Stream(failure(error)));
            }
            "error" => return Err(ProviderError::Stream(failure(&value))),
            _ => {}
        }
        Ok(false)
    }

    fn on_end(&mut self, _out: &mut Vec<ProviderEvent>) -> Result<(), ProviderError> {
        Err(ProviderError::Stream(
            "the answer ended before response.completed".to_owned(),
        ))
    }
}

/// A reasoning item is complete: the reasoning so far is sealed with the item itself (its
/// id, summary and encrypted content, as JSON), which goes back with the next calls of the
/// tool loop so the model keeps its reasoning (`store: false` keeps nothing on the server).
fn reasoning_done(item: &Value, out: &mut Vec<ProviderEvent>) {
    if item["encrypted_content"].as_str().is_none_or(str::is_empty) {
        return;
    }
    let kept = serde_json::json!({
        "type": "reasoning",
        "id": item["id"],
        "summary": item.get("summary").cloned().unwrap_or_else(|| serde_json::json!([])),
        "encrypted_content": item["encrypted_content"],
    });
    out.push(ProviderEvent::ThinkingSealed {
        signature: kept.to_string(),
        redacted: false,
    });
}

fn push(out: &mut Vec<ProviderEvent>, event: fn(String) -> ProviderEvent, text: String) {
    if !text.is_empty() {
        out.push(event(text));
    }
}

/// `code: message` of an error object.
fn failure(error: &Value) -> String {
    let message = error["message"].as_str().unwrap_or("the model failed");
    match error["code"].as_str() {
        Some(code) => format!("{code}: {message}"),
        None => message.to_owned(),
    }
}

impl ResponsesDecoder {
    fn item_added(&mut self, item: &Value) {
        if item["type"] != "function_call" {
            return;
        }
        let id = item["id"].as_str().unwrap_or_default().to_owned();
        self.calls.insert(
            id,
            PartialCall {
                call_id: item["call_id"].as_str().unwrap_or_default().to_owned(),
                name: item["name"].as_str().unwrap_or_default().to_owned(),
                arguments: String::new(),
            },
        );
    }

    /// A function call item is complete: the call, with the item's own arguments when it
    /// carries them (else the deltas').
    fn item_done(&mut self, item: &Value, out: &mut Vec<ProviderEvent>) {
        if item["type"] != "function_call" {
            return;
        }
        let id = item["id"].as_str().unwrap_or_default();
        let partial = self.calls.remove(id).unwrap_or_default();
        let field = |name: &str, fallback: String| match item[name].as_str() {
            Some(value) if !value.is_empty() => value.to_owned(),
            _ => fallback,
        };
        let call_id = field("call_id", partial.call_id);
        let call_id = if call_id.is_empty() {
            id.to_owned()
        } else {
            call_id
        };
        out.push(ProviderEvent::ToolCall(ToolCall {
            id: call_id,
            name: field("name", partial.name),
            arguments: parse_arguments(&field("arguments", partial.arguments)),
        }));
        self.emitted_calls = true;
    }

    /// The one `Done`, from the final response's usage, after any call whose item never said
    /// it was done; returns true (the stream is over).
    fn finish(&mut self, response: &Value, incomplete: bool, out: &mut Vec<ProviderEvent>) -> bool {
        // A call cut off by the token cap has broken arguments: it is not run.
        let unfinished = std::mem::take(&mut self.calls);
        for (id, call) in unfinished.into_iter().filter(|_| !incomplete) {
            let item = serde_json::json!({ "type": "function_call", "id": id,
                "call_id": call.call_id, "name": call.name, "arguments": call.arguments });
            self.item_done(&item, out);
        }
        let usage = &response["usage"];
        let number = |v: &Value| v.as_u64().unwrap_or(0);
        let input = number(&usage["input_tokens"]);
        let cached = number(&usage["input_tokens_details"]["cached_tokens"]);
        let output = number(&usage["output_tokens"]);
        let stop_reason = match (incomplete, self.emitted_calls) {
            (true, _) if response["incomplete_details"]["reason"] == "max_output_tokens" => {
                StopReason::Length
            }
            (_, true) => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        out.push(ProviderEvent::Done {
            stop_reason,
            usage: Usage {
                input: input.saturating_sub(cached),
                output,
                cache_read: cached,
                cache_write: 0,
                total_tokens: input + output,
            },
        });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(events: &[Value]) -> Result<Vec<ProviderEvent>, ProviderError> {
        let mut decoder = ResponsesDecoder::default();
        let mut out = Vec::new();
        for value in events {
            let event = Event {
                data: value.to_string(),
                ..Event::default()
            };
            if decoder.on_event(&event, &mut out)? {
                return Ok(out);
            }
        }
        decoder.on_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn text_reasoning_calls_and_usage() {
        let events = [
            serde_json::json!({"type": "response.created", "response": {}}),
            serde_json::json!({"type": "response.reasoning_summary_text.delta", "delta": "plan"}),
            serde_json::json!({"type": "response.output_text.delta", "delta": "Hi "}),
            serde_json::json!({"type": "response.output_item.added", "item":
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": ""}}),
            serde_json::json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "{\"a\":"}),
            serde_json::json!({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": "1}"}),
            serde_json::json!({"type": "response.output_item.done", "item":
                {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "ls", "arguments": ""}}),
            serde_json::json!({"type": "response.completed", "response": {"usage":
                {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60}, "output_tokens": 7}}}),
        ];
        let out = decode(&events).unwrap();
        assert_eq!(
            out,
            [
                ProviderEvent::ThinkingDelta("plan".into()),
                ProviderEvent::TextDelta("Hi ".into()),
                ProviderEvent::ToolCall(ToolCall {
                    id: "call_1".into(),
                    name: "ls".into(),
                    arguments: serde_json::json!({"a": 1}),
                }),
                ProviderEvent::Done {
                    stop_reason: StopReason::ToolUse,
                    usage: Usage {
                        input: 40,
                        output: 7,
                        cache_read: 60,
                        cache_write: 0,
                        total_tokens: 107,
                    },
                },
            ]
        );
    }

    #[test]
    fn a_reasoning_item_is_kept_whole_to_go_back() {
        let done = serde_json::json!({"type": "response.output_item.done", "item":
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}],
             "encrypted_content": "opaque"}});
        let mut decoder = ResponsesDecoder::default();
        let mut out = Vec::new();
        let event = Event {
            data: done.to_string(),
            ..Event::default()
        };
        decoder.on_event(&event, &mut out).unwrap();
        let [
            ProviderEvent::ThinkingSealed {
                signature,
                redacted: false,
            },
        ] = &out[..]
        else {
            panic!("{out:?}");
        };
        let kept: serde_json::Value = serde_json::from_str(signature).unwrap();
        assert_eq!(kept["id"], "rs_1");
        assert_eq!(kept["encrypted_content"], "opaque");
        assert_eq!(kept["summary"][0]["text"], "plan");
    }

    #[test]
    fn failures_and_cut_streams_are_errors_and_length_is_said() {
        let failed = serde_json::json!({"type": "response.failed", "response":
            {"error": {"code": "server_error", "message": "boom"}}});
        let error = decode(&[failed]).unwrap_err().to_string();
        assert!(error.contains("server_error: boom"), "{error}");
        let cut = [serde_json::json!({"type": "response.output_text.delta", "delta": "Hi"})];
        assert!(decode(&cut).is_err());
        let incomplete = serde_json::json!({"type": "response.incomplete", "response":
            {"incomplete_details": {"reason": "max_output_tokens"}, "usage": {}}});
        let out = decode(&[incomplete]).unwrap();
        assert!(matches!(
            out[0],
            ProviderEvent::Done {
                stop_reason: StopReason::Length,
                ..
            }
        ));
    }
}
