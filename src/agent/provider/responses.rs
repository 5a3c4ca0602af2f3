//! The OpenAI Responses API (`POST {base}/responses`, streamed), for reasoning models: the
//! system prompt as `instructions`, the conversation as input items (messages,
//! `function_call` and `function_call_output`), tools flat, `store: false` (nothing kept on
//! the server), and `reasoning.effort` with a reasoning summary when the session thinks.

use serde::Serialize;
use serde_json::{Value, json};

use super::body::Body;
use super::connection::{Connection, bearer};
use super::responses_stream::ResponsesDecoder;
use super::settings::{ProviderKind, ProviderSettings};
use super::{BoxFuture, EventStream, Provider, ProviderError, ProviderRequest, Thinking, ToolSpec};
use crate::domain::message::{ContentBlock, Message, text_of};

/// A provider speaking the OpenAI Responses wire format.
#[derive(Debug)]
pub struct ResponsesProvider {
    connection: Connection,
}

impl ResponsesProvider {
    /// A provider for `settings` (kind is assumed to be `responses`; defaults fill the
    /// gaps). Fails only when the key cannot go into a header or HTTP cannot be set up.
    pub fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        let mut settings = settings.clone();
        settings.kind = ProviderKind::Responses;
        let headers = bearer(&settings)?;
        Ok(ResponsesProvider {
            connection: Connection::new(settings, "/responses", headers)?,
        })
    }
}

impl Provider for ResponsesProvider {
    fn name(&self) -> &str {
        "responses"
    }

    fn model(&self) -> &str {
        &self.connection.model
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        let connection = &self.connection;
        let max_tokens = connection.max_tokens_thinking(&request);
        Box::pin(async move {
            // Built here, beside the request it borrows its tools from.
            let mut body = request_body(connection.model_of(&request), max_tokens, &request);
            connection.add_cache_key(&mut body.fields, &request);
            connection.stream(&body, ResponsesDecoder::default()).await
        })
    }

    fn models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        let url = format!("{}/models", self.connection.base_url);
        Box::pin(async move { self.connection.list(&url).await })
    }
}

/// The JSON body of a streamed Responses call.
pub fn request_body<'a>(
    model: &str,
    max_tokens: u32,
    request: &'a ProviderRequest,
) -> Body<WireTool<'a>> {
    let mut body = json!({
        "model": model,
        "stream": true,
        "store": false,
        "max_output_tokens": max_tokens,
        "input": input(&request.messages, (request.thinking != Thinking::Off).then_some(model)),
    });
    if !request.system.is_empty() {
        body["instructions"] = json!(request.system);
    }
    if request.thinking != Thinking::Off {
        // The reasoning comes back encrypted, to be sent with the next calls of a tool loop.
        body["include"] = json!(["reasoning.encrypted_content"]);
        body["reasoning"] = json!({ "effort": request.thinking.as_str() });
        if request.show_reasoning {
            body["reasoning"]["summary"] = json!("auto");
        }
    }
    Body::of(body, &request.tools, WireTool::of)
}

/// A tool, flat, not strict (chela's schemas leave optional fields out of `required`),
/// borrowing its spec.
#[derive(Debug, Serialize)]
pub struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    strict: bool,
}

impl<'a> WireTool<'a> {
    /// `spec` in this wire format's shape.
    fn of(spec: &'a ToolSpec) -> WireTool<'a> {
        WireTool {
            kind: "function",
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
            strict: false,
        }
    }
}

/// The conversation as input items. With `thinking` (the model reasoning), the reasoning items
/// that model made (kept whole as its thinking blocks' signatures) go back before the answer
/// and calls they led to, as the API pairs them; other thinking is left out.
fn input(conversation: &[Message], thinking: Option<&str>) -> Vec<Value> {
    let mut items = Vec::new();
    // The images of a run of tool results (a browser screenshot) follow it as one user item.
    let mut tool_images: Vec<ContentBlock> = Vec::new();
    for message in conversation {
        if !matches!(message, Message::ToolResult(_)) && !tool_images.is_empty() {
            items.push(images_item(std::mem::take(&mut tool_images)));
        }
        match message {
            Message::User(user) => items.push(json!({
                "role": "user",
                "content": user_content(&user.content),
            })),
            Message::Assistant(assistant) => {
                if thinking.is_some_and(|model| model == assistant.model) {
                    items.extend(assistant.content.iter().filter_map(reasoning_item));
                }
                let text = text_of(&assistant.content);
                if !text.is_empty() {
                    items.push(json!({
                        "role": "assistant",
                        "content": [{ "type": "output_text", "text": text }],
                    }));
                }
                for block in &assistant.content {
                    if let ContentBlock::ToolCall(call) = block {
                        items.push(json!({
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": call.arguments.to_string(),
                        }));
                    }
                }
            }
            Message::ToolResult(result) => {
                items.push(json!({
                    "type": "function_call_output",
                    "call_id": result.tool_call_id,
                    "output": text_of(&result.content),
                }));
                tool_images.extend(
                    (result.content.iter())
                        .filter(|b| matches!(b, ContentBlock::Image(i) if !i.data.is_empty()))
                        .cloned(),
                );
            }
        }
    }
    if !tool_images.is_empty() {
        items.push(images_item(tool_images));
    }
    items
}

/// The user item that carries the images of the tool results before it.
fn images_item(images: Vec<ContentBlock>) -> Value {
    let mut content = vec![ContentBlock::text(
        "(the images the tool results above returned)",
    )];
    content.extend(images);
    json!({ "role": "user", "content": user_content(&content) })
}

/// The reasoning item a thinking block keeps in its signature, if it keeps one.
fn reasoning_item(block: &ContentBlock) -> Option<Value> {
    let ContentBlock::Thinking {
        signature: Some(signature),
        ..
    } = block
    else {
        return None;
    };
    let item: Value = serde_json::from_str(signature).ok()?;
    (item["type"] == "reasoning" && item["encrypted_content"].is_string()).then_some(item)
}

/// A user message's content: its text, then its images (with their bytes) as data URLs.
fn user_content(content: &[ContentBlock]) -> Value {
    let mut parts = Vec::new();
    let text = text_of(content);
    if !text.is_empty() {
        parts.push(json!({ "type": "input_text", "text": text }));
    }
    parts.extend(content.iter().filter_map(|block| match block {
        ContentBlock::Image(image) if !image.data.is_empty() => Some(json!({
            "type": "input_image",
            "image_url": format!("data:{};base64,{}", image.mime_type, image.data),
        })),
        _ => None,
    }));
    Value::Array(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::domain::message::{AssistantMessage, StopReason, ToolCall, Usage};

    use super::super::tests_support::shot_result;

    /// The body as the wire gets it.
    fn wire(model: &str, max_tokens: u32, request: &ProviderRequest) -> Value {
        serde_json::to_value(request_body(model, max_tokens, request)).unwrap()
    }

    #[test]
    fn a_tool_results_image_follows_its_output_as_a_user_item() {
        let (_, result) = shot_result();
        let items = input(&[result, Message::user("next")], None);
        assert_eq!(items[0]["type"], "function_call_output");
        assert_eq!(items[0]["output"], "saved");
        assert_eq!(items[1]["role"], "user");
        assert_eq!(
            items[1]["content"][1]["image_url"],
            "data:image/png;base64,QUJD"
        );
        assert_eq!(items[2]["content"][0]["text"], "next");
    }

    fn request() -> ProviderRequest {
        let call = ToolCall {
            id: "call_1".into(),
            name: "ls".into(),
            arguments: json!({"path": "."}),
        };
        ProviderRequest {
            system: "Be terse.".into(),
            messages: vec![
                Message::user("list files"),
                Message::Assistant(AssistantMessage {
                    content: vec![
                        ContentBlock::thinking("hmm"),
                        ContentBlock::text("Looking."),
                        ContentBlock::ToolCall(call.clone()),
                    ],
                    provider: "responses".into(),
                    model: "m".into(),
                    usage: Usage::default(),
                    stop_reason: StopReason::ToolUse,
                    error_message: None,
                    timestamp: 1,
                }),
                Message::tool_result(&call, "a.txt", false),
            ],
            tools: vec![std::sync::Arc::new(ToolSpec {
                name: "ls".into(),
                description: "List a folder.".into(),
                parameters: json!({"type": "object"}),
            })],
            max_tokens: 100,
            model: None,
            thinking: Thinking::High,
            show_reasoning: true,
            cache_key: None,
        }
    }

    #[test]
    fn body_has_instructions_items_flat_tools_and_reasoning() {
        let body = wire("gpt-5", 100, &request());
        assert_eq!(body["instructions"], "Be terse.");
        assert_eq!(body["store"], false);
        assert_eq!(body["max_output_tokens"], 100);
        assert_eq!(
            body["reasoning"],
            json!({"effort": "high", "summary": "auto"})
        );
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "ls", "description": "List a folder.",
                    "parameters": {"type": "object"}, "strict": false}])
        );
        assert_eq!(
            body["input"],
            json!([
                {"role": "user", "content": [{"type": "input_text", "text": "list files"}]},
                {"role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
                {"type": "function_call", "call_id": "call_1", "name": "ls",
                 "arguments": "{\"path\":\".\"}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
            ])
        );
        let mut plain = request();
        plain.thinking = Thinking::Off;
        assert!(wire("gpt-5", 100, &plain).get("reasoning").is_none());
    }

    #[test]
    fn the_models_own_reasoning_goes_back_before_its_calls() {
        let mut with_item = request();
        let kept = json!({"type": "reasoning", "id": "rs_1", "summary": [],
                          "encrypted_content": "opaque"});
        if let Message::Assistant(a) = &mut with_item.messages[1] {
            a.content[0] = ContentBlock::Thinking {
                thinking: "hmm".into(),
                signature: Some(kept.to_string()),
                redacted: false,
            };
        }
        let body = wire("m", 100, &with_item);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["input"][1], kept);
        assert_eq!(body["input"][2]["role"], "assistant");
        assert_eq!(body["input"][3]["type"], "function_call");
        // Another model's reasoning, or none asked for: not sent.
        assert!(!wire("gpt-5", 100, &with_item).to_string().contains("rs_1"));
        with_item.thinking = Thinking::Off;
        let off = wire("m", 100, &with_item);
        assert!(!off.to_string().contains("rs_1") && off.get("include").is_none());
    }
}
