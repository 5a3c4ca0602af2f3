//! Anthropic Messages (`POST {base}/v1/messages`, streamed).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;
use serde_json::{Value, json};

use super::anthropic_stream::AnthropicDecoder;
use super::body::Body;
use super::connection::Connection;
use super::settings::{ProviderKind, ProviderSettings};
use super::{
    BoxFuture, EventStream, Provider, ProviderError, ProviderRequest, Thinking, ToolSpec,
    thinking_budget,
};
use crate::domain::message::{ContentBlock, Message, text_of};

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A provider speaking the Anthropic Messages wire format.
#[derive(Debug)]
pub struct AnthropicProvider {
    connection: Connection,
}

impl AnthropicProvider {
    /// A provider for `settings` (kind is assumed to be `anthropic`; defaults fill the
    /// gaps). Fails only when the key cannot go into a header or HTTP cannot be set up.
    pub fn new(settings: &ProviderSettings) -> Result<Self, ProviderError> {
        let mut settings = settings.clone();
        settings.kind = ProviderKind::Anthropic;
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
        let path = match settings.effective_base_url().ends_with("/v1") {
            true => "/messages",
            false => "/v1/messages",
        };
        Ok(AnthropicProvider {
            connection: Connection::new(settings, path, headers)?,
        })
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.connection.model
    }

    fn stream(
        &self,
        request: ProviderRequest,
    ) -> BoxFuture<'_, Result<EventStream, ProviderError>> {
        let connection = &self.connection;
        let max_tokens = connection.max_tokens(&request);
        Box::pin(async move {
            // Built here, beside the request it borrows its tools from.
            let body = request_body(connection.model_of(&request), max_tokens, &request);
            connection.stream(&body, AnthropicDecoder::default()).await
        })
    }

    fn models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        // `{base}/v1/models`, beside `{base}/v1/messages`.
        let url = format!("{}models", self.connection.url.trim_end_matches("messages"));
        Box::pin(async move { self.connection.list(&url).await })
    }
}

/// Most output tokens (answer and thinking) asked of a Claude model: the smallest output
/// limit of the models that take a thinking budget (Opus 4 and 4.1: 32,000).
const MAX_OUTPUT: u32 = 32_000;

/// The least thinking budget the API takes.
const MIN_BUDGET: u32 = 1024;

/// The JSON body of a streamed Messages call. With thinking, the budget comes on top of
/// `max_tokens` (the API counts thinking in it), and the current tool loop's signed thinking
/// blocks go back as the API requires; a loop whose last call did not think (it began
/// without, or another model answered it) is continued without thinking.
pub fn request_body<'a>(
    model: &str,
    max_tokens: u32,
    request: &'a ProviderRequest,
) -> Body<WireTool<'a>> {
    let max_tokens = match request.thinking {
        Thinking::Off => max_tokens,
        _ => max_tokens.min(MAX_OUTPUT),
    };
    let budget = thinking_budget(request.thinking)
        .map(|budget| budget.min(MAX_OUTPUT - max_tokens))
        .filter(|budget| *budget >= MIN_BUDGET)
        .filter(|_| loop_thought(&request.messages, model));
    let mut body = json!({
        "model": model,
        "max_tokens": max_tokens + budget.unwrap_or(0),
        "stream": true,
        "messages": messages(&request.messages, budget.map(|_| model)),
    });
    if let Some(budget) = budget {
        match adaptive(model) {
            // The newest models decide how much to think themselves (those after 4.6 refuse a
            // budget); the level becomes their effort.
            true => {
                body["thinking"] = json!({ "type": "adaptive" });
                body["output_config"] = json!({ "effort": effort(request.thinking) });
            }
            false => body["thinking"] = json!({ "type": "enabled", "budget_tokens": budget }),
        }
    }
    if !request.system.is_empty() {
        body["system"] = json!(request.system);
    }
    let mut body = Body::of(body, &request.tools, WireTool::of);
    if request.cache_key.is_some() {
        mark_cache(&mut body);
    }
    body
}

/// The array at `key` of `body`, if there is one (never adding the key).
fn list<'a>(body: &'a mut Value, key: &str) -> Option<&'a mut Vec<Value>> {
    body.get_mut(key).and_then(Value::as_array_mut)
}

/// Marks the stable prefix of `body` for Anthropic's prompt cache, three of the four marks
/// the API takes, in its prefix order: the last tool (all tools), the system prompt, and the
/// last block of the last message (the conversation so far: the next call of the tool loop,
/// or the next turn, reads it; the API looks up to 20 blocks back from a mark for an earlier
/// one).
fn mark_cache(body: &mut Body<WireTool<'_>>) {
    if let Some(last) = body.tools.last_mut() {
        last.cache_control = Some(Ephemeral::MARK);
    }
    let mark = json!(Ephemeral::MARK);
    let body = &mut body.fields;
    if let Some(system) = body.get("system").and_then(Value::as_str) {
        body["system"] = json!([{ "type": "text", "text": system, "cache_control": mark }]);
    }
    let last_message = list(body, "messages").and_then(|m| m.last_mut());
    let content = last_message.and_then(|m| m.get_mut("content")?.as_array_mut());
    if let Some(last) = content.and_then(|c| c.last_mut()) {
        last["cache_control"] = mark;
    }
}

/// A tool as the Messages API takes it, borrowing its spec.
#[derive(Debug, Serialize)]
pub struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    /// The prompt cache's mark, on the last tool ([`mark_cache`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Ephemeral>,
}

impl<'a> WireTool<'a> {
    /// `spec` in this wire format's shape.
    fn of(spec: &'a ToolSpec) -> WireTool<'a> {
        WireTool {
            name: &spec.name,
            description: &spec.description,
            input_schema: &spec.parameters,
            cache_control: None,
        }
    }
}

/// A prompt cache mark, `{"type": "ephemeral"}`.
#[derive(Debug, Clone, Copy, Serialize)]
struct Ephemeral {
    #[serde(rename = "type")]
    kind: &'static str,
}

impl Ephemeral {
    /// The only mark there is.
    const MARK: Ephemeral = Ephemeral { kind: "ephemeral" };
}

/// Whether `model` thinks adaptively (`thinking.type = "adaptive"` with an effort): Claude
/// models of the 4.6 generation and later (`claude-opus-4-7`, `claude-sonnet-4-6-20260101`,
/// `claude-opus-5`); older ones (`claude-sonnet-4-5`, `claude-3-7-sonnet`) take a budget.
fn adaptive(model: &str) -> bool {
    let Some(rest) = model.split_once("claude-").map(|(_, rest)| rest) else {
        return false;
    };
    let mut numbers = rest
        .split(['-', '.', '@'])
        .filter_map(|part| part.parse::<u32>().ok())
        .filter(|n| *n < 100);
    let major = numbers.next().unwrap_or(0);
    let minor = numbers.next().unwrap_or(0);
    (major, minor) >= (4, 6)
}

/// The adaptive effort of a thinking level.
fn effort(level: Thinking) -> &'static str {
    match level {
        Thinking::Off | Thinking::Minimal | Thinking::Low => "low",
        Thinking::Medium => "medium",
        Thinking::High => "high",
    }
}

/// Where the current turn starts: its user message, the last one the wire does not merge into
/// tool results (messages steered in while tools ran, or sent after a stop or a crash cut a
/// tool loop short, join the loop's last `user` message, however many). The tool loop is what
/// follows it.
fn turn_start(conversation: &[Message]) -> usize {
    for (i, message) in conversation.iter().enumerate().rev() {
        if !matches!(message, Message::User(_)) {
            continue;
        }
        let before = conversation[..i]
            .iter()
            .rev()
            .find(|m| !matches!(m, Message::User(_)) && !empty_on_wire(m));
        if !matches!(before, Some(Message::ToolResult(_))) {
            return i;
        }
    }
    0
}

/// Whether `message` sends nothing: an assistant turn with neither text nor tool calls, such
/// as a call that failed at once, or one stopped while it thought (a turn of thinking alone is
/// refused by the API, so it is left out whole).
fn empty_on_wire(message: &Message) -> bool {
    match message {
        Message::Assistant(a) => !a.content.iter().any(|b| match b {
            ContentBlock::Text { text } => !text.trim().is_empty(),
            ContentBlock::ToolCall(_) => true,
            _ => false,
        }),
        _ => false,
    }
}

/// Whether thinking may go on in the current tool loop: it is empty, or its last call was
/// `model`'s and thought (a signed thinking block; another model's signature is not taken).
fn loop_thought(conversation: &[Message], model: &str) -> bool {
    let start = turn_start(conversation);
    let last_call = conversation[start..].iter().rev().find_map(|m| match m {
        Message::Assistant(a) if !empty_on_wire(m) => Some(a),
        _ => None,
    });
    last_call
        .is_none_or(|a| a.model == model && a.content.iter().any(|b| thinking_block(b).is_some()))
}

/// A signed thinking block as the API takes it back (`None` for an unsigned one).
fn thinking_block(block: &ContentBlock) -> Option<Value> {
    let ContentBlock::Thinking {
        thinking,
        signature: Some(signature),
        redacted,
    } = block
    else {
        return None;
    };
    if signature.is_empty() {
        return None;
    }
    Some(match redacted {
        true => json!({ "type": "redacted_thinking", "data": signature }),
        false => json!({ "type": "thinking", "thinking": thinking, "signature": signature }),
    })
}

/// Messages API turns. Roles alternate: consecutive tool results (and a user message right
/// after them) share one `user` message, tool results first. Thinking blocks go back only
/// while `thinking` (the model thinking), and only those that model signed in the current tool
/// loop, first in their message, as the API wants them; empty text blocks and empty assistant
/// turns are left out because the API rejects them.
fn messages(conversation: &[Message], thinking: Option<&str>) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let loop_start = turn_start(conversation);
    for (i, message) in conversation.iter().enumerate() {
        let (role, blocks) = match message {
            Message::User(user) => ("user", text_blocks(&user.content)),
            Message::Assistant(_) if empty_on_wire(message) => continue,
            Message::Assistant(assistant) => {
                let own = thinking.is_some_and(|model| assistant.model == model);
                let thought = (own && i > loop_start)
                    .then(|| assistant.content.iter().filter_map(thinking_block));
                let blocks = thought
                    .into_iter()
                    .flatten()
                    .chain(assistant.content.iter().filter_map(|block| match block {
                        ContentBlock::Text { text } if !text.trim().is_empty() => {
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
                    }))
                    .collect();
                ("assistant", blocks)
            }
            Message::ToolResult(result) => (
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": result.tool_call_id,
                    "content": tool_result_content(&result.content),
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

/// A tool result's content: its text, or with images (a browser screenshot) its text and
/// image blocks, which the API takes inside a `tool_result`.
fn tool_result_content(content: &[ContentBlock]) -> Value {
    if content
        .iter()
        .any(|b| matches!(b, ContentBlock::Image(image) if !image.data.is_empty()))
    {
        Value::Array(text_blocks(content))
    } else {
        json!(text_of(content))
    }
}

/// A user message's blocks: its text, then its images (those with their bytes) as base64
/// `image` blocks.
fn text_blocks(content: &[ContentBlock]) -> Vec<Value> {
    let text = text_of(content);
    let mut out = Vec::new();
    if !text.trim().is_empty() {
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

    use super::super::tests_support::shot_result;

    /// The body as the wire gets it.
    pub(super) fn wire(model: &str, max_tokens: u32, request: &ProviderRequest) -> Value {
        serde_json::to_value(request_body(model, max_tokens, request)).unwrap()
    }

    #[test]
    fn a_tool_results_image_goes_inside_the_tool_result() {
        let (call, result) = shot_result();
        let out = messages(
            &[assistant(vec![ContentBlock::ToolCall(call)]), result],
            None,
        );
        let block = &out[1]["content"][0];
        assert_eq!(block["type"], "tool_result");
        assert_eq!(
            block["content"][0],
            json!({"type": "text", "text": "saved"})
        );
        assert_eq!(block["content"][1]["source"]["data"], "QUJD");
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({"path": "."}),
        }
    }

    pub(super) fn assistant(content: Vec<ContentBlock>) -> Message {
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
                    ContentBlock::thinking("hmm"),
                    ContentBlock::text("Sure."),
                    ContentBlock::ToolCall(a.clone()),
                    ContentBlock::ToolCall(b.clone()),
                ]),
                Message::tool_result(&a, "a.txt", false),
                Message::tool_result(&b, "no such file", true),
                Message::user("and now?"),
            ],
            tools: vec![std::sync::Arc::new(ToolSpec {
                name: "ls".into(),
                description: "List a folder.".into(),
                parameters: json!({"type": "object"}),
            })],
            max_tokens: 0,
            model: None,
            thinking: crate::agent::provider::Thinking::Off,
            show_reasoning: false,
            cache_key: None,
        }
    }

    #[test]
    fn body_has_top_level_system_tools_and_stream() {
        let body = wire("claude-sonnet-4-5", 1024, &request());
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
        let body = wire("m", 1024, &request());
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
        let out = messages(&[with_image("aGk=")], None);
        assert_eq!(
            out[0]["content"],
            json!([
                {"type": "text", "text": "what is this?"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aGk="}}
            ])
        );
        let bare = messages(&[with_image("")], None);
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
        let body = wire("m", 10, &req);
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
        assert_eq!(
            provider.connection.url,
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            provider.connection.headers["anthropic-version"],
            ANTHROPIC_VERSION
        );
        assert!(provider.connection.headers["x-api-key"].is_sensitive());
        assert!(!format!("{provider:?}").contains("sk-ant-test"));

        settings.base_url = Some("http://127.0.0.1:9000/v1/".into());
        settings.api_key = None;
        let local = AnthropicProvider::new(&settings)?;
        assert_eq!(local.connection.url, "http://127.0.0.1:9000/v1/messages");
        assert!(!local.connection.headers.contains_key("x-api-key"));
        Ok(())
    }
}

#[cfg(test)]
mod thinking_tests {
    use super::tests::assistant;
    use super::tests::wire;
    use super::*;
    use crate::agent::provider::Thinking;
    use crate::domain::message::ToolCall;

    fn signed(text: &str, signature: &str) -> ContentBlock {
        ContentBlock::Thinking {
            thinking: text.into(),
            signature: Some(signature.into()),
            redacted: false,
        }
    }

    fn request(messages: Vec<Message>, thinking: Thinking) -> ProviderRequest {
        ProviderRequest {
            system: String::new(),
            messages,
            tools: Vec::new(),
            max_tokens: 1000,
            model: None,
            thinking,
            show_reasoning: false,
            cache_key: None,
        }
    }

    fn tool_loop(last_thought: bool) -> Vec<Message> {
        let call = ToolCall {
            id: "toolu_1".into(),
            name: "ls".into(),
            arguments: serde_json::json!({}),
        };
        let mut last = vec![ContentBlock::ToolCall(call.clone())];
        if last_thought {
            last.insert(0, signed("look first", "sig-2"));
        }
        vec![
            Message::user("earlier"),
            assistant(vec![
                signed("old", "sig-1"),
                ContentBlock::text("old answer"),
            ]),
            Message::user("list files"),
            assistant(last),
            Message::tool_result(&call, "a.txt", false),
        ]
    }

    #[test]
    fn a_level_asks_for_a_budget_on_top_of_max_tokens() {
        let body = wire(
            "m",
            1000,
            &request(vec![Message::user("hi")], Thinking::Low),
        );
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 4096})
        );
        assert_eq!(body["max_tokens"], 5096);
        let off = wire(
            "m",
            1000,
            &request(vec![Message::user("hi")], Thinking::Off),
        );
        assert!(off.get("thinking").is_none());
        assert_eq!(off["max_tokens"], 1000);
    }

    #[test]
    fn the_tool_loops_signed_thinking_goes_back_first_and_older_thinking_does_not() {
        let body = wire("m", 1000, &request(tool_loop(true), Thinking::High));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(
            messages[1]["content"],
            json!([{"type": "text", "text": "old answer"}])
        );
        assert_eq!(
            messages[3]["content"][0],
            json!({"type": "thinking", "thinking": "look first", "signature": "sig-2"})
        );
        assert_eq!(messages[3]["content"][1]["type"], "tool_use");
        // Without thinking, no thinking block goes back at all.
        let body = wire("m", 1000, &request(tool_loop(true), Thinking::Off));
        assert!(!body.to_string().contains("sig-2"));
    }

    #[test]
    fn a_message_steered_into_the_loop_keeps_its_thinking() {
        // A message steered in while the tool ran (or sent after a stop) joins the tool
        // results' wire message: the loop and its signed thinking go on.
        let mut conversation = tool_loop(true);
        conversation.push(Message::user("also this"));
        let body = wire("m", 1000, &request(conversation, Thinking::High));
        assert_eq!(body["thinking"]["budget_tokens"], 24000);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[3]["content"][0]["signature"], "sig-2");
        let last = messages[4]["content"].as_array().unwrap();
        assert_eq!(last[0]["type"], "tool_result");
        assert_eq!(last[1]["text"], "also this");
    }

    #[test]
    fn two_steered_messages_and_a_failed_call_keep_the_loop() {
        let mut conversation = tool_loop(true);
        conversation.push(Message::user("also this"));
        conversation.push(Message::user("and this"));
        // A call that failed at once, and one stopped while it thought: nothing on the wire.
        conversation.push(assistant(Vec::new()));
        conversation.push(assistant(vec![signed("half a thought", "sig-3")]));
        conversation.push(Message::user("still there?"));
        let body = wire("m", 1000, &request(conversation, Thinking::High));
        assert_eq!(body["thinking"]["budget_tokens"], 24000);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 5, "{messages:#?}");
        assert_eq!(messages[3]["content"][0]["signature"], "sig-2");
        let last: Vec<&str> = messages[4]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(last, ["tool_result", "text", "text", "text"]);
        assert!(!body.to_string().contains("sig-3"));
    }

    #[test]
    fn the_newest_models_think_adaptively_with_an_effort() {
        for (model, adaptive_model) in [
            ("claude-opus-4-7", true),
            ("claude-sonnet-4-6-20260101", true),
            ("claude-opus-5", true),
            ("anthropic.claude-fable-5-1", true),
            ("claude-sonnet-4-5-20250929", false),
            ("claude-3-7-sonnet-latest", false),
            ("claude-opus-4-1", false),
            ("llama3", false),
        ] {
            assert_eq!(adaptive(model), adaptive_model, "{model}");
        }
        let body = wire(
            "claude-opus-4-7",
            1000,
            &request(vec![Message::user("hi")], Thinking::Medium),
        );
        assert_eq!(body["thinking"], json!({"type": "adaptive"}));
        assert_eq!(body["output_config"], json!({"effort": "medium"}));
        let older = wire(
            "claude-sonnet-4-5",
            1000,
            &request(vec![Message::user("hi")], Thinking::Medium),
        );
        assert_eq!(older["thinking"]["type"], "enabled");
        assert!(older.get("output_config").is_none());
    }

    #[test]
    fn without_thinking_the_token_cap_is_the_configured_one() {
        let body = wire(
            "m",
            64_000,
            &request(vec![Message::user("hi")], Thinking::Off),
        );
        assert_eq!(body["max_tokens"], 64_000);
    }

    #[test]
    fn another_models_signature_is_not_sent_and_thinking_waits_for_the_next_turn() {
        let body = wire(
            "other-model",
            1000,
            &request(tool_loop(true), Thinking::High),
        );
        assert!(body.get("thinking").is_none());
        assert!(!body.to_string().contains("sig-2"));
    }

    #[test]
    fn output_stays_under_the_models_limit() {
        let body = wire(
            "m",
            31_500,
            &request(vec![Message::user("hi")], Thinking::High),
        );
        assert!(
            body.get("thinking").is_none(),
            "no room for a budget of 1,024"
        );
        assert_eq!(body["max_tokens"], 31_500);
        let body = wire(
            "m",
            8192,
            &request(vec![Message::user("hi")], Thinking::High),
        );
        assert_eq!(body["thinking"]["budget_tokens"], 32_000 - 8192);
        assert_eq!(body["max_tokens"], 32_000);
    }

    #[test]
    fn a_loop_whose_last_call_did_not_think_goes_on_without_thinking() {
        let body = wire("m", 1000, &request(tool_loop(false), Thinking::High));
        assert!(body.get("thinking").is_none());
        assert_eq!(body["max_tokens"], 1000);
    }

    #[test]
    fn a_redacted_block_goes_back_as_its_data() {
        let redacted = ContentBlock::Thinking {
            thinking: "[Reasoning redacted]".into(),
            signature: Some("opaque".into()),
            redacted: true,
        };
        assert_eq!(
            thinking_block(&redacted),
            Some(json!({"type": "redacted_thinking", "data": "opaque"}))
        );
        assert_eq!(thinking_block(&ContentBlock::thinking("unsigned")), None);
    }
}

#[cfg(test)]
mod cache_tests {
    use super::tests::wire;
    use super::*;
    use crate::agent::provider::Thinking;

    fn request(cache: bool) -> ProviderRequest {
        ProviderRequest {
            system: "You are terse.".into(),
            messages: vec![Message::user("one"), Message::user("two")],
            tools: ["a", "b"]
                .iter()
                .map(|name| ToolSpec {
                    name: (*name).into(),
                    description: String::new(),
                    parameters: json!({"type": "object"}),
                })
                .map(std::sync::Arc::new)
                .collect(),
            max_tokens: 10,
            model: None,
            thinking: Thinking::Off,
            show_reasoning: false,
            cache_key: cache.then(|| "k".to_owned()),
        }
    }

    #[test]
    fn the_stable_prefix_is_marked_in_three_places() {
        let body = wire("m", 10, &request(true));
        let mark = json!({"type": "ephemeral"});
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "You are terse.", "cache_control": mark}])
        );
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"], mark);
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap()["content"].as_array().unwrap();
        assert_eq!(last.last().unwrap()["cache_control"], mark);
        assert_eq!(body.to_string().matches("cache_control").count(), 3);
        let plain = wire("m", 10, &request(false));
        assert!(!plain.to_string().contains("cache_control"));
        assert_eq!(plain["system"], "You are terse.");
        // No tools (a group's minimal profile): no `tools` key at all.
        let mut bare = request(true);
        bare.tools.clear();
        let body = wire("m", 10, &bare);
        assert!(body.get("tools").is_none(), "{body:#}");
        assert_eq!(body.to_string().matches("cache_control").count(), 2);
    }
}
