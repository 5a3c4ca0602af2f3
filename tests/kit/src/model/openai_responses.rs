//! OpenAI Responses API: `POST /v1/responses`, streamed as typed `response.*` events (text as a
//! `message` output item, tool calls as `function_call` items), or one `response` object.

use axum::response::sse::Event;
use serde_json::{Value, json};

use super::conversation::{Conversation, ConversationBuilder, Part, joined_text, text_parts};
use super::script::{Answer, ToolCall};
use super::stream::{Ctx, Wire, argument_pieces, event};

/// What the Responses API refuses (400) about reasoning items sent back: one without its
/// encrypted content (with `store: false` nothing else finds it), or one not followed by the
/// call or message it led to.
pub(crate) fn refusal(body: &Value) -> Option<String> {
    let items = body["input"].as_array()?;
    for (i, item) in items.iter().enumerate() {
        if item["type"] != "reasoning" {
            continue;
        }
        if item["encrypted_content"].as_str().is_none_or(str::is_empty) {
            return Some(format!("Item with id '{}' not found.", item["id"]));
        }
        let next = items.get(i + 1);
        let paired = next.is_some_and(|n| n["type"] == "function_call" || n["role"] == "assistant");
        if !paired {
            return Some(format!(
                "Item '{}' of type 'reasoning' was provided without its required following item.",
                item["id"]
            ));
        }
    }
    None
}

/// Reads the conversation: `input` as a string or as items (`role: user` messages and
/// `*_call_output` items such as `function_call_output`), and `tools[].name`.
pub(crate) fn conversation(body: &Value) -> Conversation {
    let mut builder = ConversationBuilder::default();
    match &body["input"] {
        Value::String(text) => builder.user([Part::Text(text.clone())]),
        Value::Array(items) => {
            for item in items {
                let kind = item["type"].as_str().unwrap_or("message");
                if kind == "message" && item["role"].as_str() == Some("user") {
                    builder.user(text_parts(&item["content"]).into_iter().map(Part::Text));
                } else if kind.ends_with("_call_output") {
                    builder.tool_result(joined_text(&item["output"]));
                }
            }
        }
        _ => {}
    }
    builder.offered_tools(&body["tools"]);
    builder.finish()
}

fn usage(ctx: &Ctx) -> Value {
    json!({
        "input_tokens": ctx.usage.input,
        "input_tokens_details": { "cached_tokens": ctx.usage.cache_read },
        "output_tokens": ctx.usage.output,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": ctx.usage.total(),
    })
}

fn response(ctx: &Ctx, status: &str, output: &[Value], usage: Value) -> Value {
    json!({
        "id": format!("resp_{}", ctx.request),
        "object": "response",
        "created_at": ctx.created,
        "status": status,
        "model": ctx.model,
        "output": output,
        "usage": usage,
    })
}

fn message_item(ctx: &Ctx, text: Option<&str>) -> Value {
    let (status, content) = match text {
        Some(text) => ("completed", json!([output_text(text)])),
        None => ("in_progress", json!([])),
    };
    json!({
        "id": format!("msg_{}", ctx.request),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    })
}

fn output_text(text: &str) -> Value {
    json!({ "type": "output_text", "text": text, "annotations": [] })
}

fn call_item(call: &ToolCall, complete: bool) -> Value {
    json!({
        "id": format!("fc_{}", call.key),
        "type": "function_call",
        "status": if complete { "completed" } else { "in_progress" },
        "call_id": format!("call_{}", call.key),
        "name": call.name,
        "arguments": if complete { call.arguments.as_str() } else { "" },
    })
}

/// The whole answer as one `response` object.
pub(crate) fn whole(ctx: &Ctx, answer: &Answer) -> Value {
    let mut output = Vec::new();
    if !answer.chunks.is_empty() {
        output.push(message_item(ctx, Some(&answer.full_text())));
    }
    output.extend(answer.tool_calls.iter().map(|call| call_item(call, true)));
    response(ctx, "completed", &output, usage(ctx))
}

/// Streaming state for one Responses answer.
pub(crate) struct ResponsesWire {
    ctx: Ctx,
    sequence: u64,
    output: Vec<Value>,
    text: String,
}

impl ResponsesWire {
    /// A stream for `ctx`.
    pub(crate) fn new(ctx: Ctx) -> ResponsesWire {
        ResponsesWire {
            ctx,
            sequence: 0,
            output: Vec::new(),
            text: String::new(),
        }
    }

    fn event(&mut self, kind: &str, mut data: Value) -> Event {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        event(Some(kind), &data)
    }

    fn message_id(&self) -> String {
        format!("msg_{}", self.ctx.request)
    }
}

impl Wire for ResponsesWire {
    fn start(&mut self) -> Vec<Event> {
        let created = response(&self.ctx, "in_progress", &[], Value::Null);
        vec![
            self.event("response.created", json!({ "response": created })),
            self.event("response.in_progress", json!({ "response": created })),
        ]
    }

    fn reasoning_delta(&mut self, text: &str) -> Vec<Event> {
        let index = self.output.len();
        let item_id = format!("rs_{}", self.ctx.request);
        vec![self.event(
            "response.reasoning_summary_text.delta",
            json!({ "item_id": item_id, "output_index": index, "summary_index": 0, "delta": text }),
        )]
    }

    fn reasoning_done(&mut self) -> Vec<Event> {
        let index = self.output.len();
        let item = json!({
            "type": "reasoning",
            "id": format!("rs_{}", self.ctx.request),
            "summary": [],
            "encrypted_content": format!("enc-{}", self.ctx.request),
        });
        let done = self.event(
            "response.output_item.done",
            json!({ "output_index": index, "item": item }),
        );
        self.output.push(item);
        vec![done]
    }

    fn text_delta(&mut self, text: &str) -> Vec<Event> {
        let mut events = Vec::new();
        let index = self.output.len();
        let item_id = self.message_id();
        if self.text.is_empty() {
            let item = message_item(&self.ctx, None);
            events.push(self.event(
                "response.output_item.added",
                json!({ "output_index": index, "item": item }),
            ));
            events.push(self.event(
                "response.content_part.added",
                json!({ "item_id": item_id, "output_index": index, "content_index": 0,
                        "part": output_text("") }),
            ));
        }
        self.text.push_str(text);
        events.push(self.event(
            "response.output_text.delta",
            json!({ "item_id": item_id, "output_index": index, "content_index": 0,
                    "delta": text, "logprobs": [] }),
        ));
        events
    }

    fn text_done(&mut self) -> Vec<Event> {
        let index = self.output.len();
        let item_id = self.message_id();
        let text = std::mem::take(&mut self.text);
        let item = message_item(&self.ctx, Some(&text));
        let events = vec![
            self.event(
                "response.output_text.done",
                json!({ "item_id": item_id, "output_index": index, "content_index": 0,
                        "text": text, "logprobs": [] }),
            ),
            self.event(
                "response.content_part.done",
                json!({ "item_id": item_id, "output_index": index, "content_index": 0,
                        "part": output_text(&text) }),
            ),
            self.event(
                "response.output_item.done",
                json!({ "output_index": index, "item": item }),
            ),
        ];
        self.output.push(item);
        events
    }

    fn tool_call(&mut self, call: &ToolCall) -> Vec<Event> {
        let index = self.output.len();
        let item_id = format!("fc_{}", call.key);
        let mut events = vec![self.event(
            "response.output_item.added",
            json!({ "output_index": index, "item": call_item(call, false) }),
        )];
        for piece in argument_pieces(&call.arguments) {
            events.push(self.event(
                "response.function_call_arguments.delta",
                json!({ "item_id": item_id, "output_index": index, "delta": piece }),
            ));
        }
        let item = call_item(call, true);
        events.push(self.event(
            "response.function_call_arguments.done",
            json!({ "item_id": item_id, "output_index": index, "arguments": call.arguments }),
        ));
        events.push(self.event(
            "response.output_item.done",
            json!({ "output_index": index, "item": item }),
        ));
        self.output.push(item);
        events
    }

    fn finish(&mut self) -> Vec<Event> {
        let done = response(&self.ctx, "completed", &self.output, usage(&self.ctx));
        vec![self.event("response.completed", json!({ "response": done }))]
    }
}
