//! OpenAI-compatible chat completions (`POST {base}/chat/completions`, streamed).
//!
//! Works with OpenAI and with local servers that speak the same format (Ollama, llama.cpp,
//! vLLM, LM Studio). Without an API key no `Authorization` header is sent.

use serde::Serialize;
use serde_json::{Value, json};

use super::body::Body;
use super::connection::{Connection, bearer};
use super::openai_stream::OpenAiDecoder;
use super::settings::{ProviderKind, ProviderSettings};
use super::{BoxFuture, EventStream, Provider, ProviderError, ProviderRequest, ToolSpec};
use crate::domain::message::{ContentBlock, Message, text_of};

/// A provider speaking the OpenAI chat-completions wire format.
#[derive(Debug)]
pub struct OpenAiProvider {
    connection: Connection,
    max_tokens_field: &'static str,
}

impl OpenAiProvider {
    /// A provider for `settings` (kind is assumed to be `openai`; defaults fill the gaps).
    /// Fails only when the key cannot go into a header or HTTP cannot be set up.
    pub fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        let mut settings = settings.clone();
        settings.kind = ProviderKind::OpenAi;
        // OpenAI's own API wants `max_completion_tokens` (newer models reject `max_tokens`);
        // compatible servers understand `max_tokens`.
        let max_tokens_field = if settings.is_official_endpoint() {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        let headers = bearer(&settings)?;
        Ok(OpenAiProvider {
            connection: Connection::new(settings, "/chat/completions", headers)?,
            max_tokens_field,
        })
    }
}

impl OpenAiProvider {
    /// The body of a call for `request`: [`request_body`] with this endpoint's token cap
    /// field and, on OpenAI's own API, the cache key.
    fn body<'a>(&self, request: &'a ProviderRequest) -> Body<WireTool<'a>> {
        let connection = &self.connection;
        let mut body = request_body(connection.model_of(request), request);
        body.fields[self.max_tokens_field] = json!(connection.max_tokens_thinking(request));
        connection.add_cache_key(&mut body.fields, request);
        body
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.connection.model
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        Box::pin(async move {
            // Built here, beside the request it borrows its tools from.
            let body = self.body(&request);
            self.connection
                .stream(&body, OpenAiDecoder::default())
                .await
        })
    }

    fn models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        let url = format!("{}/models", self.connection.base_url);
        Box::pin(async move { self.connection.list(&url).await })
    }
}

/// The JSON body of a streamed chat-completions call (without a token cap; the provider
/// adds `max_tokens` or `max_completion_tokens`).
pub fn request_body<'a>(model: &str, request: &'a ProviderRequest) -> Body<WireTool<'a>> {
    let mut body = json!({
        "model": model,
        "stream": true,
        "stream_options": { "include_usage": true },
        "messages": messages(&request.system, &request.messages),
    });
    if request.thinking != super::Thinking::Off {
        body["reasoning_effort"] = json!(request.thinking.as_str());
    }
    Body::of(body, &request.tools, WireTool::of)
}

/// A tool as chat completions take it, borrowing its spec.
#[derive(Debug, Serialize)]
pub struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: Function<'a>,
}

/// A tool's function.
#[derive(Debug, Serialize)]
struct Function<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

impl<'a> WireTool<'a> {
    /// `spec` in this wire format's shape.
    fn of(spec: &'a ToolSpec) -> WireTool<'a> {
        WireTool {
            kind: "function",
            function: Function {
                name: &spec.name,
                description: &spec.description,
                parameters: &spec.parameters,
            },
        }
    }
}

/// Chat messages: system first, then the conversation; thinking blocks are left out.
fn messages(system: &str, conversation: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(conversation.len() + 1);
    if !system.is_empty() {
        out.push(json!({ "role": "system", "content": system }));
    }
    // Tool messages take no images: those of a run of tool results (a browser screenshot)
    // follow it as one user message.
    let mut tool_images: Vec<Value> = Vec::new();
    for message in conversation {
        if !matches!(message, Message::ToolResult(_)) && !tool_images.is_empty() {
            out.push(images_message(std::mem::take(&mut tool_images)));
        }
        match message {
            Message::User(user) => {
                out.push(json!({ "role": "user", "content": user_content(&user.content) }));
            }
            Message::Assistant(assistant) => {
                let text = text_of(&assistant.content);
                let calls: Vec<Value> = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::ToolCall(call) => Some(json!({
                            "id": call.id,
                            "type": "function",
                            "function": {
                                "name": call.name,
                                "arguments": call.arguments.to_string(),
                            },
                        })),
                        _ => None,
                    })
                    .collect();
                let mut entry = json!({ "role": "assistant" });
                if calls.is_empty() {
                    entry["content"] = json!(text);
                } else {
                    entry["content"] = if text.is_empty() {
                        Value::Null
                    } else {
                        json!(text)
                    };
                    entry["tool_calls"] = Value::Array(calls);
                }
                out.push(entry);
            }
            Message::ToolResult(result) => {
                out.push(json!({
                    "role": "tool",
                    "tool_call_id": result.tool_call_id,
                    "content": text_of(&result.content),
                }));
                tool_images.extend(image_parts(&result.content));
            }
        }
    }
    if !tool_images.is_empty() {
        out.push(images_message(tool_images));
    }
    out
}

/// The user message that carries the images of the tool results before it.
fn images_message(images: Vec<Value>) -> Value {
    let mut parts =
        vec![json!({ "type": "text", "text": "(the images the tool results above returned)" })];
    parts.extend(images);
    json!({ "role": "user", "content": parts })
}

/// The `image_url` parts of `content`'s images that carry their bytes.
fn image_parts(content: &[ContentBlock]) -> Vec<Value> {
    content
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Image(image) if !image.data.is_empty() => Some(json!({
                "type": "image_url",
                "image_url": { "url": format!("data:{};base64,{}", image.mime_type, image.data) },
            })),
            _ => None,
        })
        .collect()
}

/// A user message's content: its text as a string, or, when it carries images (with their
/// bytes), a text part followed by one `image_url` part per image, as a data URL.
fn user_content(content: &[ContentBlock]) -> Value {
    let images = image_parts(content);
    let text = text_of(content);
    if images.is_empty() {
        return json!(text);
    }
    let mut parts = Vec::with_capacity(images.len() + 1);
    if !text.is_empty() {
        parts.push(json!({ "type": "text", "text": text }));
    }
    parts.extend(images);
    Value::Array(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::domain::message::{AssistantMessage, StopReason, ToolCall, Usage};

    use super::super::tests_support::shot_result;

    /// The body as the wire gets it.
    fn wire(model: &str, request: &ProviderRequest) -> Value {
        serde_json::to_value(request_body(model, request)).unwrap()
    }

    #[test]
    fn a_tool_results_image_follows_the_tool_messages_as_a_user_message() {
        let (call, result) = shot_result();
        let conversation = vec![
            Message::user("look"),
            Message::Assistant(AssistantMessage {
                content: vec![ContentBlock::ToolCall(call)],
                provider: "openai".into(),
                model: "m".into(),
                usage: Usage::default(),
                stop_reason: StopReason::ToolUse,
                error_message: None,
                timestamp: 1,
            }),
            result,
        ];
        let out = messages("", &conversation);
        assert_eq!(
            out[2],
            json!({"role": "tool", "tool_call_id": "call_9", "content": "saved"})
        );
        assert_eq!(out[3]["role"], "user");
        assert_eq!(
            out[3]["content"][1]["image_url"]["url"],
            "data:image/png;base64,QUJD"
        );
        assert_eq!(out.len(), 4);
    }

    fn conversation() -> Vec<Message> {
        let call = ToolCall {
            id: "call_1".into(),
            name: "ls".into(),
            arguments: json!({"path": "."}),
        };
        vec![
            Message::user("list files"),
            Message::Assistant(AssistantMessage {
                content: vec![
                    ContentBlock::thinking("hmm"),
                    ContentBlock::text("Looking."),
                    ContentBlock::ToolCall(call.clone()),
                ],
                provider: "openai".into(),
                model: "m".into(),
                usage: Usage::default(),
                stop_reason: StopReason::ToolUse,
                error_message: None,
                timestamp: 1,
            }),
            Message::tool_result(&call, "a.txt", false),
        ]
    }

    fn request() -> ProviderRequest {
        ProviderRequest {
            system: "You are terse.".into(),
            messages: conversation(),
            tools: vec![std::sync::Arc::new(ToolSpec {
                name: "ls".into(),
                description: "List a folder.".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            })],
            max_tokens: 100,
            model: None,
            thinking: crate::agent::provider::Thinking::Off,
            show_reasoning: false,
            cache_key: None,
        }
    }

    use super::super::tests_support::with_image;

    #[test]
    fn images_become_image_url_parts_with_data_urls() {
        let out = messages("", &[with_image("aGk="), with_image("")]);
        assert_eq!(
            out[0]["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}}
            ])
        );
        // An image without its bytes (not loaded) is not sent: the text stays a string.
        assert_eq!(out[1]["content"], json!("what is this?"));
    }

    #[test]
    fn body_has_stream_usage_and_function_tools() {
        let body = wire("gpt-4.1-mini", &request());
        assert_eq!(body["model"], "gpt-4.1-mini");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(
            body.get("reasoning_effort").is_none(),
            "thinking off asks for none"
        );
        assert_eq!(
            body["tools"],
            json!([{
                "type": "function",
                "function": {
                    "name": "ls",
                    "description": "List a folder.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                }
            }])
        );
    }

    #[test]
    fn messages_put_system_first_and_pair_tool_results() {
        let body = wire("m", &request());
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": "Looking.", "tool_calls": [{
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": "{\"path\":\".\"}"},
                }]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
            ])
        );
    }

    #[test]
    fn no_tools_key_without_tools_and_null_content_for_bare_tool_calls() {
        let mut req = request();
        req.tools.clear();
        req.system.clear();
        if let Message::Assistant(a) = &mut req.messages[1] {
            a.content.retain(|b| matches!(b, ContentBlock::ToolCall(_)));
        }
        let body = wire("m", &req);
        assert!(body.get("tools").is_none());
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][1]["content"], Value::Null);
    }

    #[test]
    fn token_cap_field_depends_on_the_endpoint() -> Result<(), ProviderError> {
        let mut settings = ProviderSettings::new(ProviderKind::OpenAi);
        settings.api_key = Some("sk-test".into());
        let official = OpenAiProvider::new(&settings)?;
        assert_eq!(official.max_tokens_field, "max_completion_tokens");
        let auth = reqwest::header::AUTHORIZATION;
        assert!(official.connection.headers.contains_key(&auth));
        assert!(!format!("{official:?}").contains("sk-test"));

        settings.base_url = Some("http://127.0.0.1:11434/v1".into());
        settings.api_key = None;
        let local = OpenAiProvider::new(&settings)?;
        assert_eq!(local.max_tokens_field, "max_tokens");
        assert_eq!(
            local.connection.url,
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        assert!(local.connection.headers.is_empty());
        // A cache key goes to OpenAI's own API only; each body has its endpoint's token cap
        // field, beside the tools.
        let mut with_key = request();
        with_key.cache_key = Some("k".into());
        let body = serde_json::to_value(official.body(&with_key)).unwrap();
        assert_eq!(body["prompt_cache_key"], "k");
        assert!(body["max_completion_tokens"].is_u64() && body.get("max_tokens").is_none());
        assert_eq!(body["tools"][0]["function"]["name"], "ls");
        let body = serde_json::to_value(local.body(&with_key)).unwrap();
        assert!(body.get("prompt_cache_key").is_none());
        assert!(body["max_tokens"].is_u64() && body.get("max_completion_tokens").is_none());
        assert_eq!(body["tools"][0]["function"]["name"], "ls");
        Ok(())
    }
}
