//! Anthropic Messages (`POST {base}/v1/messages`, streamed).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::anthropic_stream::AnthropicDecoder;
use super::settings::{ProviderKind, ProviderSettings};
use super::transport::{Endpoint, http_client, stream_call};
use super::{BoxFuture, EventStream, Provider, ProviderError, ProviderRequest, ToolSpec};
use crate::domain::message::{ContentBlock, Message, text_of};

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A provider speaking the Anthropic Messages wire format.
pub struct AnthropicProvider {
    client: reqwest::Client,
    base_url: String,
    url: String,
    model: String,
    headers: HeaderMap,
    settings: ProviderSettings,
}

impl std::fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("url", &self.url)
            .field("model", &self.model)
            .finish_non_exhaustive()
    }
}

impl AnthropicProvider {
    /// A provider for `settings` (kind is assumed to be `anthropic`; defaults fill the
    /// gaps). Fails only when the key cannot go into a header or HTTP cannot be set up.
    pub fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        let mut settings = settings.clone();
        settings.kind = ProviderKind::Anthropic;
        let base_url = settings.effective_base_url();
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = settings.effective_api_key() {
            let mut value = HeaderValue::from_str(key).map_err(|_| {
                ProviderError::NotConfigured(
                    "the Anthropic API key contains characters not allowed in an HTTP header"
                        .to_string(),
                )
            })?;
            value.set_sensitive(true);
            headers.insert(HeaderName::from_static("x-api-key"), value);
        }
        // `{base}/v1/messages`, without doubling a `/v1` the user already wrote.
        let url = match base_url.strip_suffix("/v1") {
            Some(_) => format!("{base_url}/messages"),
            None => format!("{base_url}/v1/messages"),
        };
        Ok(AnthropicProvider {
            client: http_client()?,
            url,
            base_url,
            model: settings.effective_model(),
            headers,
            settings,
        })
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        let max_tokens = if request.max_tokens > 0 {
            request.max_tokens
        } else {
            self.settings.max_tokens
        };
        let model = request.model.as_deref().unwrap_or(&self.model);
        let body = request_body(model, max_tokens, &request);
        Box::pin(async move {
            let endpoint = Endpoint {
                client: &self.client,
                url: &self.url,
                base_url: &self.base_url,
                headers: &self.headers,
                idle_timeout: self.settings.idle_timeout,
                max_retries: self.settings.max_retries,
            };
            stream_call(endpoint, &body, AnthropicDecoder::default()).await
        })
    }

    fn models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        Box::pin(async move {
            // `{base}/v1/models`, beside `{base}/v1/messages`.
            let url = format!("{}models", self.url.trim_end_matches("messages"));
            super::models::list(super::models::Listing {
                client: &self.client,
                url: &url,
                base_url: &self.base_url,
                headers: &self.headers,
            })
            .await
        })
    }
}

/// The JSON body of a streamed Messages call.
pub fn request_body(model: &str, max_tokens: u32, request: &ProviderRequest) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": messages(&request.messages),
    });
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    if !request.tools.is_empty() {
        body["tools"] = Value::Array(request.tools.iter().map(tool).collect());
    }
    body
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.parameters,
    })
}

/// Messages API turns. Roles alternate: consecutive tool results (and a user message right
/// after them) share one `user` message, tool results first. Thinking blocks are not sent
/// (they need a signature chela does not keep); empty text blocks and empty assistant turns
/// are left out because the API rejects them.
fn messages(conversation: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in conversation {
        let (role, blocks) = match message {
            Message::User(user) => ("user", text_blocks(&user.content)),
            Message::Assistant(assistant) => {
                let blocks = assistant
                    .content
                    .iter()
                    .filter_map(|block| match block {
                        ContentBlock::Text { text } if !text.is_empty() => {
                            Some(json!({ "type": "text", "text": text }))
                        }
                        ContentBlock::ToolCall(call) => Some(json!({
                            "type": "tool_use",
                            "id": call.id,
                            "name": call.name,
                            "input": if call.arguments.is_object() {
                                call.arguments.clone()
                            } else {
                                json!({})
                            },
                        })),
                        _ => None,
                    })
                    .collect();
                ("assistant", blocks)
            }
            Message::ToolResult(result) => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": result.tool_call_id,
                    "content": text_of(&result.content),
                    "is_error": result.is_error,
                })],
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({ "role": role, "content": content }))
        .collect()
}

/// A user message's blocks: its text, then its images (those with their bytes) as base64
/// `image` blocks.
fn text_blocks(content: &[ContentBlock]) -> Vec<Value> {
    let text = text_of(content);
    let mut out = Vec::new();
    if !text.is_empty() {
        out.push(json!({ "type": "text", "text": text }));
    }
    out.extend(content.iter().filter_map(|block| match block {
        ContentBlock::Image(image) if !image.data.is_empty() => Some(json!({
            "type": "image",
            "source": { "type": "base64", "media_type": image.mime_type, "data": image.data },
        })),
        _ => None,
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::message::{AssistantMessage, StopReason, ToolCall, Usage};

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({"path": "."}),
        }
    }

    fn assistant(content: Vec<ContentBlock>) -> Message {
        Message::Assistant(AssistantMessage {
            content,
            provider: "anthropic".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: 1,
        })
    }

    fn request() -> ProviderRequest {
        let (a, b) = (call("toolu_1", "ls"), call("toolu_2", "read"));
        ProviderRequest {
            system: "You are terse.".into(),
            messages: vec![
                Message::user("look around"),
                assistant(vec![
                    ContentBlock::Thinking {
                        thinking: "hmm".into(),
                    },
                    ContentBlock::text("Sure."),
                    ContentBlock::ToolCall(a.clone()),
                    ContentBlock::ToolCall(b.clone()),
                ]),
                Message::tool_result(&a, "a.txt", false),
                Message::tool_result(&b, "no such file", true),
                Message::user("and now?"),
            ],
            tools: vec![ToolSpec {
                name: "ls".into(),
                description: "List a folder.".into(),
                parameters: json!({"type": "object"}),
            }],
            max_tokens: 0,
            model: None,
        }
    }

    #[test]
    fn body_has_top_level_system_tools_and_stream() {
        let body = request_body("claude-sonnet-4-5", 1024, &request());
        assert_eq!(body["model"], "claude-sonnet-4-5");
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["stream"], true);
        assert_eq!(body["system"], "You are terse.");
        assert_eq!(
            body["tools"],
            json!([{"name": "ls", "description": "List a folder.", "input_schema": {"type": "object"}}])
        );
    }

    #[test]
    fn tool_results_are_merged_into_one_user_message() {
        let body = request_body("m", 1024, &request());
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "look around"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Sure."},
                    {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"path": "."}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "."}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true},
                    {"type": "text", "text": "and now?"},
                ]},
            ])
        );
    }

    use super::super::tests_support::with_image;

    #[test]
    fn images_become_base64_image_blocks_after_the_text() {
        let out = messages(&[with_image("aGk=")]);
        assert_eq!(
            out[0]["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}
            ])
        );
        let bare = messages(&[with_image("")]);
        assert_eq!(
            bare[0]["content"],
            json!([{"type": "text", "text": "what is this?"}])
        );
    }

    #[test]
    fn empty_system_and_empty_assistant_turns_are_left_out() {
        let mut req = request();
        req.system.clear();
        req.tools.clear();
        req.messages = vec![
            Message::user("a"),
            assistant(vec![ContentBlock::text("")]),
            Message::user("b"),
        ];
        let body = request_body("m", 10, &req);
        assert!(body.get("system").is_none());
        assert!(body.get("tools").is_none());
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b"},
            ]}])
        );
    }

    #[test]
    fn headers_and_url() -> Result<(), ProviderError> {
        let mut settings = ProviderSettings::new(ProviderKind::Anthropic);
        settings.api_key = Some("sk-ant-test".into());
        let provider = AnthropicProvider::new(&settings)?;
        assert_eq!(provider.url, "https://api.anthropic.com/v1/messages");
        assert_eq!(provider.headers["anthropic-version"], ANTHROPIC_VERSION);
        assert!(provider.headers["x-api-key"].is_sensitive());
        assert!(!format!("{provider:?}").contains("sk-ant-test"));

        settings.base_url = Some("http://127.0.0.1:9000/v1/".into());
        settings.api_key = None;
        let local = AnthropicProvider::new(&settings)?;
        assert_eq!(local.url, "http://127.0.0.1:9000/v1/messages");
        assert!(!local.headers.contains_key("x-api-key"));
        Ok(())
    }
}
