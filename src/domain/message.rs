//! The conversation model shared by providers, the agent loop and transcripts.
//!
//! The serde shape follows the OpenClaw/pi transcript schema (version 4): messages carry a
//! `role` tag (`user`, `assistant`, `toolResult`), camelCase fields and `content` blocks
//! (`text`, `thinking`, `toolCall`). A transcript `message` entry stores one of these as is.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One message of a conversation, tagged by role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// What a person (or a queued batch of people) said.
    User(UserMessage),
    /// What the model answered: text, thinking and tool calls.
    Assistant(AssistantMessage),
    /// The result of one tool call, paired with it by `tool_call_id`.
    ToolResult(ToolResultMessage),
}

/// A user turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// Content blocks; chela writes a single text block.
    pub content: Vec<ContentBlock>,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
}

/// A model turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Text, thinking and tool-call blocks in the order the model produced them.
    pub content: Vec<ContentBlock>,
    /// Provider name (`openai`, `anthropic`, `echo`).
    pub provider: String,
    /// Model name as configured.
    pub model: String,
    /// Token usage reported by the provider (zeros when unknown).
    pub usage: Usage,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// Set when `stop_reason` is `error`: a short human-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The id of the tool call this answers.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// Content blocks; chela writes a single text block.
    pub content: Vec<ContentBlock>,
    /// True when the tool failed or refused.
    pub is_error: bool,
    /// Milliseconds since the Unix epoch.
    pub timestamp: u64,
}

/// One block of message content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning, kept for the transcript, shown in a chat only when it asks
    /// (`/reasoning on`).
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The provider's signature of it (Anthropic), sent back with it while a tool loop
        /// goes on; for a redacted block, its opaque data (pi's `thinkingSignature`).
        #[serde(
            default,
            rename = "thinkingSignature",
            skip_serializing_if = "Option::is_none"
        )]
        signature: Option<String>,
        /// The provider redacted the reasoning; `signature` holds what it sent instead.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        redacted: bool,
    },
    /// A request to run a tool.
    ToolCall(ToolCall),
    /// A picture. pi writes the bytes (`data`, base64); chela writes the file's path in the
    /// workspace instead (`path`, a chela extension of the block) and reads the file when
    /// it calls the model, so the transcript stays small.
    Image(ImageBlock),
}

/// An image content block (pi's `{"type":"image","data":...,"mimeType":...}`, or chela's
/// `{"type":"image","mimeType":...,"path":...}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageBlock {
    /// The image bytes in base64; empty when the block names a file instead.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data: String,
    /// MIME type (`image/jpeg`, `image/png`, ...).
    pub mime_type: String,
    /// The image file, relative to the workspace (chela's blocks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id, echoed back in the result.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON object.
    pub arguments: Value,
}

/// Why a model turn ended (pi's vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// The model finished its answer.
    #[default]
    Stop,
    /// The output hit the token limit.
    Length,
    /// The model wants tool results before it goes on.
    ToolUse,
    /// The call failed.
    Error,
    /// The run was cancelled.
    Aborted,
}

/// Token counts for one model call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Prompt tokens.
    pub input: u64,
    /// Completion tokens.
    pub output: u64,
    /// Prompt tokens read from the provider's cache.
    pub cache_read: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_write: u64,
    /// Sum of the above.
    pub total_tokens: u64,
}

impl ContentBlock {
    /// A thinking block of `thinking` with no signature.
    pub fn thinking(thinking: impl Into<String>) -> Self {
        ContentBlock::Thinking {
            thinking: thinking.into(),
            signature: None,
            redacted: false,
        }
    }

    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }
}

impl Message {
    /// A user message with one text block, stamped now.
    pub fn user(text: impl Into<String>) -> Self {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(text)],
            timestamp: now_ms(),
        })
    }

    /// A tool result with one text block, stamped now.
    pub fn tool_result(call: &ToolCall, text: impl Into<String>, is_error: bool) -> Self {
        Message::tool_result_with_images(call, text, is_error, &[])
    }

    /// A tool result with images (PNG or JPEG files relative to the workspace, by their
    /// extension) after its text.
    pub fn tool_result_with_images(
        call: &ToolCall,
        text: impl Into<String>,
        is_error: bool,
        images: &[String],
    ) -> Self {
        let mut content = vec![ContentBlock::text(text)];
        content.extend(images.iter().map(|path| {
            ContentBlock::Image(ImageBlock {
                data: String::new(),
                mime_type: if path.ends_with(".png") {
                    "image/png"
                } else {
                    "image/jpeg"
                }
                .into(),
                path: Some(path.clone()),
            })
        }));
        Message::ToolResult(ToolResultMessage {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content,
            is_error,
            timestamp: now_ms(),
        })
    }
}

/// Concatenates the text blocks of `content` (thinking and tool calls left out).
pub fn text_of(content: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in content {
        if let ContentBlock::Text { text } = block {
            out.push_str(text);
        }
    }
    out
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_blocks_read_pi_data_and_write_chela_paths() {
        let pi = r#"{"type":"image","data":"aGk=","mimeType":"image/png"}"#;
        let block: ContentBlock = serde_json::from_str(pi).unwrap();
        assert_eq!(serde_json::to_string(&block).unwrap(), pi);
        let ours = ContentBlock::Image(ImageBlock {
            data: String::new(),
            mime_type: "image/jpeg".into(),
            path: Some("media/k/1-0-image.jpg".into()),
        });
        assert_eq!(
            serde_json::to_string(&ours).unwrap(),
            r#"{"type":"image","mimeType":"image/jpeg","path":"media/k/1-0-image.jpg"}"#
        );
    }

    #[test]
    fn assistant_message_uses_pi_field_names() {
        let msg = Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::text("hi"),
                ContentBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "ls".into(),
                    arguments: serde_json::json!({"path": "."}),
                }),
            ],
            provider: "openai".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            timestamp: 1,
        });
        let json = serde_json::to_value(&msg).unwrap();
        assert_eq!(json["role"], "assistant");
        assert_eq!(json["stopReason"], "toolUse");
        assert_eq!(json["content"][1]["type"], "toolCall");
        assert_eq!(json["usage"]["totalTokens"], 0);
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, msg);
    }
}
