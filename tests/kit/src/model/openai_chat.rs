//! OpenAI Chat Completions: `POST /v1/chat/completions`, streamed as `chat.completion.chunk`
//! events ending in `data: [DONE]`, or one `chat.completion` object.

use axum::response::sse::Event;
use serde_json::{Value, json};

use super::conversation::Part;
use super::conversation::{Conversation, ConversationBuilder, joined_text, text_parts};
use super::script::{Answer, ToolCall};
use super::stream::{Ctx, Wire, argument_pieces, event};

/// Reads the conversation: `user` messages, `tool` messages and `tools[].function.name`.
pub(crate) fn conversation(body: &Value) -> Conversation {
    let mut builder = ConversationBuilder::default();
    for message in body["messages"].as_array().into_iter().flatten() {
        match message["role"].as_str() {
            Some("user") => {
                builder.user(text_parts(&message["content"]).into_iter().map(Part::Text))
            }
            Some("tool") => builder.tool_result(joined_text(&message["content"])),
            _ => {}
        }
    }
    builder.offered_tools(&body["tools"]);
    builder.finish()
}

/// Whether the request asks for a final usage chunk (`stream_options.include_usage`).
pub(crate) fn include_usage(body: &Value) -> bool {
    body["stream_options"]["include_usage"]
        .as_bool()
        .unwrap_or(false)
}

fn usage(ctx: &Ctx) -> Value {
    json!({
        "prompt_tokens": ctx.usage.input,
        "completion_tokens": ctx.usage.output,
        "total_tokens": ctx.usage.total(),
        "prompt_tokens_details": { "cached_tokens": ctx.usage.cache_read },
    })
}

fn finish_reason(answer_has_tools: bool) -> &'static str {
    if answer_has_tools {
        "tool_calls"
    } else {
        "stop"
    }
}

/// The whole answer as one `chat.completion` object.
pub(crate) fn completion(ctx: &Ctx, answer: &Answer) -> Value {
    let text = answer.full_text();
    let mut message = json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { Value::String(text) },
    });
    if !answer.tool_calls.is_empty() {
        let calls: Vec<Value> = answer
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": format!("call_{}", call.key),
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": format!("chatcmpl-{}", ctx.request),
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": finish_reason(!answer.tool_calls.is_empty()),
        }],
        "usage": usage(ctx),
    })
}

/// Streaming state for one Chat Completions answer.
pub(crate) struct ChatWire {
    ctx: Ctx,
    include_usage: bool,
    tool_index: usize,
}

impl ChatWire {
    /// A stream for `ctx`; `include_usage` adds the usage chunk before `[DONE]`.
    pub(crate) fn new(ctx: Ctx, include_usage: bool) -> ChatWire {
        ChatWire {
            ctx,
            include_usage,
            tool_index: 0,
        }
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Event {
        event(
            None,
            &json!({
                "id": format!("chatcmpl-{}", self.ctx.request),
                "object": "chat.completion.chunk",
                "created": self.ctx.created,
                "model": self.ctx.model,
                "choices": [{ "index": 0, "delta": delta, "finish_reason": finish_reason }],
            }),
        )
    }
}

impl Wire for ChatWire {
    fn start(&mut self) -> Vec<Event> {
        vec![self.chunk(json!({ "role": "assistant" }), None)]
    }

    fn text_delta(&mut self, text: &str) -> Vec<Event> {
        vec![self.chunk(json!({ "content": text }), None)]
    }

    fn reasoning_delta(&mut self, text: &str) -> Vec<Event> {
        vec![self.chunk(json!({ "reasoning_content": text }), None)]
    }

    fn text_done(&mut self) -> Vec<Event> {
        Vec::new()
    }

    fn tool_call(&mut self, call: &ToolCall) -> Vec<Event> {
        let index = self.tool_index;
        self.tool_index += 1;
        let opening = json!({ "tool_calls": [{
            "index": index,
            "id": format!("call_{}", call.key),
            "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]});
        let mut events = vec![self.chunk(opening, None)];
        for piece in argument_pieces(&call.arguments) {
            let delta =
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] });
            events.push(self.chunk(delta, None));
        }
        events
    }

    fn finish(&mut self) -> Vec<Event> {
        let mut events = vec![self.chunk(json!({}), Some(finish_reason(self.tool_index > 0)))];
        if self.include_usage {
            events.push(event(
                None,
                &json!({
                    "id": format!("chatcmpl-{}", self.ctx.request),
                    "object": "chat.completion.chunk",
                    "created": self.ctx.created,
                    "model": self.ctx.model,
                    "choices": [],
                    "usage": usage(&self.ctx),
                }),
            ));
        }
        events.push(Event::default().data("[DONE]"));
        events
    }
}
