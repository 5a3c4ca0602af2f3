//! Anthropic Messages: `POST /v1/messages`, streamed as `message_start`, content blocks
//! (`text_delta`, `input_json_delta`), `message_delta` and `message_stop`, or one `message`.

use axum::response::sse::Event;
use serde_json::{Value, json};

use super::conversation::{Conversation, ConversationBuilder, Part, joined_text};
use super::script::{Answer, ToolCall};
use super::stream::{Ctx, Wire, argument_pieces, event};

/// Reads the conversation: `user` messages (string content, `text` and `tool_result` blocks);
/// `system` entries inside `messages` (Claude Code sends them) are skipped like any other role.
pub(crate) fn conversation(body: &Value) -> Conversation {
    let mut builder = ConversationBuilder::default();
    for message in body["messages"].as_array().into_iter().flatten() {
        if message["role"].as_str() != Some("user") {
            continue;
        }
        match &message["content"] {
            Value::String(text) => builder.user([Part::Text(text.clone())]),
            Value::Array(blocks) => builder.user(blocks.iter().filter_map(block_part)),
            _ => {}
        }
    }
    builder.offered_tools(&body["tools"]);
    builder.finish()
}

fn block_part(block: &Value) -> Option<Part> {
    match block["type"].as_str() {
        Some("text") => block["text"]
            .as_str()
            .map(|text| Part::Text(text.to_owned())),
        Some("tool_result") => Some(Part::ToolResult(joined_text(&block["content"]))),
        _ => None,
    }
}

/// What the Messages API refuses (400) in a request's shape, as it says it: see
/// [`thinking_refusal`], more than 4 `cache_control` marks, a mark on a thinking block or an
/// empty text block, `tools: null`, an assistant message ending in thinking, and text blocks of
/// whitespace alone.
pub(crate) fn refusal(body: &Value) -> Option<String> {
    if body.get("tools").is_some_and(Value::is_null) {
        return Some("tools: Input should be a valid list".to_owned());
    }
    let marks = body.to_string().matches("\"cache_control\"").count();
    if marks > 4 {
        return Some(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {marks}."
        ));
    }
    let messages = body["messages"].as_array().into_iter().flatten();
    for (i, message) in messages.enumerate() {
        let blocks = message["content"].as_array().into_iter().flatten();
        let blocks: Vec<&Value> = blocks.collect();
        for block in &blocks {
            let text_blank = block["type"] == "text"
                && block["text"].as_str().is_some_and(|t| t.trim().is_empty());
            if text_blank {
                return Some(format!(
                    "messages.{i}: text content blocks must contain non-whitespace text"
                ));
            }
            if block["type"] == "thinking" && block.get("cache_control").is_some() {
                return Some(format!("messages.{i}: thinking blocks cannot be cached"));
            }
        }
        let ends_thinking = blocks
            .last()
            .is_some_and(|b| matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")));
        if message["role"] == "assistant" && ends_thinking {
            return Some(format!(
                "messages.{i}: The final block in an assistant message cannot be `thinking`."
            ));
        }
    }
    thinking_refusal(body)
}

/// What the Messages API refuses about thinking in a tool loop, as its 400 says it: with
/// thinking on, the assistant message before the last tool results must start with a thinking
/// block carrying a signature (or a redacted block's data).
fn thinking_refusal(body: &Value) -> Option<String> {
    let thinking = body["thinking"]["type"] == "enabled";
    let messages = body["messages"].as_array()?;
    let last = messages.last()?;
    let results = last["content"]
        .as_array()
        .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
    let before = messages.iter().rev().nth(1)?;
    let first = &before["content"][0];
    let non_empty = |field: &str| first[field].as_str().is_some_and(|s| !s.is_empty());
    let signed = matches!(
        first["type"].as_str(),
        Some("thinking" | "redacted_thinking")
    ) && (non_empty("signature") || non_empty("data"));
    (thinking && results && !signed).then(|| {
        "Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block".to_owned()
    })
}

fn stop_reason(has_tools: bool) -> &'static str {
    if has_tools { "tool_use" } else { "end_turn" }
}

fn tool_use(call: &ToolCall, input: Value) -> Value {
    json!({ "type": "tool_use", "id": format!("toolu_{}", call.key), "name": call.name, "input": input })
}

/// The whole answer as one `message` object.
pub(crate) fn message(ctx: &Ctx, answer: &Answer) -> Value {
    let mut content = Vec::new();
    if !answer.chunks.is_empty() {
        content.push(json!({ "type": "text", "text": answer.full_text() }));
    }
    for call in &answer.tool_calls {
        let input = serde_json::from_str(&call.arguments).unwrap_or_else(|_| json!({}));
        content.push(tool_use(call, input));
    }
    json!({
        "id": format!("msg_{}", ctx.request),
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": stop_reason(!answer.tool_calls.is_empty()),
        "stop_sequence": null,
        "usage": usage(ctx, ctx.usage.output),
    })
}

/// A Messages usage object: the uncached input, the cache's reads and writes, `output`.
fn usage(ctx: &Ctx, output: u64) -> Value {
    json!({
        "input_tokens": ctx.usage.uncached(),
        "cache_read_input_tokens": ctx.usage.cache_read,
        "cache_creation_input_tokens": ctx.usage.cache_write,
        "output_tokens": output,
    })
}

/// Streaming state for one Messages answer.
pub(crate) struct AnthropicWire {
    ctx: Ctx,
    index: usize,
    text_open: bool,
    thinking_open: bool,
    had_tools: bool,
}

impl AnthropicWire {
    /// A stream for `ctx`.
    pub(crate) fn new(ctx: Ctx) -> AnthropicWire {
        AnthropicWire {
            ctx,
            index: 0,
            text_open: false,
            thinking_open: false,
            had_tools: false,
        }
    }
}

fn typed(kind: &str, mut data: Value) -> Event {
    data["type"] = json!(kind);
    event(Some(kind), &data)
}

impl Wire for AnthropicWire {
    fn start(&mut self) -> Vec<Event> {
        let message = json!({
            "id": format!("msg_{}", self.ctx.request),
            "type": "message",
            "role": "assistant",
            "model": self.ctx.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage(&self.ctx, 1),
        });
        vec![
            typed("message_start", json!({ "message": message })),
            typed("ping", json!({})),
        ]
    }

    fn reasoning_delta(&mut self, text: &str) -> Vec<Event> {
        let mut events = Vec::new();
        if !self.thinking_open {
            self.thinking_open = true;
            events.push(typed(
                "content_block_start",
                json!({ "index": self.index, "content_block": { "type": "thinking", "thinking": "" } }),
            ));
        }
        events.push(typed(
            "content_block_delta",
            json!({ "index": self.index, "delta": { "type": "thinking_delta", "thinking": text } }),
        ));
        events
    }

    fn reasoning_done(&mut self) -> Vec<Event> {
        self.thinking_open = false;
        let signature = format!("sig-{}", self.ctx.request);
        let events = vec![
            typed(
                "content_block_delta",
                json!({ "index": self.index, "delta": { "type": "signature_delta", "signature": signature } }),
            ),
            typed("content_block_stop", json!({ "index": self.index })),
        ];
        self.index += 1;
        events
    }

    fn text_delta(&mut self, text: &str) -> Vec<Event> {
        let mut events = Vec::new();
        if !self.text_open {
            self.text_open = true;
            events.push(typed(
                "content_block_start",
                json!({ "index": self.index, "content_block": { "type": "text", "text": "" } }),
            ));
        }
        events.push(typed(
            "content_block_delta",
            json!({ "index": self.index, "delta": { "type": "text_delta", "text": text } }),
        ));
        events
    }

    fn text_done(&mut self) -> Vec<Event> {
        self.text_open = false;
        let stop = typed("content_block_stop", json!({ "index": self.index }));
        self.index += 1;
        vec![stop]
    }

    fn tool_call(&mut self, call: &ToolCall) -> Vec<Event> {
        self.had_tools = true;
        let index = self.index;
        self.index += 1;
        let mut events = vec![typed(
            "content_block_start",
            json!({ "index": index, "content_block": tool_use(call, json!({})) }),
        )];
        for piece in argument_pieces(&call.arguments) {
            events.push(typed(
                "content_block_delta",
                json!({ "index": index, "delta": { "type": "input_json_delta", "partial_json": piece } }),
            ));
        }
        events.push(typed("content_block_stop", json!({ "index": index })));
        events
    }

    fn finish(&mut self) -> Vec<Event> {
        vec![
            typed(
                "message_delta",
                json!({
                    "delta": { "stop_reason": stop_reason(self.had_tools), "stop_sequence": null },
                    "usage": { "output_tokens": self.ctx.usage.output },
                }),
            ),
            typed("message_stop", json!({})),
        ]
    }
}
