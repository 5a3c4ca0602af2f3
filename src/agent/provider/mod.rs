//! Model providers: one streaming call each, behind the [`Provider`] trait.
//!
//! The OpenAI-compatible chat-completions and Anthropic Messages wire formats are two
//! implementations; `echo` exists only to check channel wiring and is never chosen implicitly.
//!
//! - [`settings`]: [`ProviderSettings`] (kind, base URL, key, model, timeouts) and [`build`].
//! - [`openai`]: OpenAI-compatible chat completions (OpenAI, Ollama, llama.cpp, vLLM, ...).
//! - [`responses`]: the OpenAI Responses API (reasoning models).
//! - [`anthropic`]: Anthropic Messages.
//! - [`body`]: the body a call sends: its fields, then the tools written from the shared specs.
//! - [`echo`]: answers `echo: <text>`; a wiring check only.
//! - `models`: the models a provider's server lists, for `/model`'s menu.
//! - [`retry`]: connection-level retries with backoff and `retry-after`.
//! - [`route`]: named providers, fallbacks, key rotation and rests: [`route::ModelRouter`],
//!   the provider an agent calls.
//! - [`with_idle_timeout`]: ends a stream that stays silent for too long.

pub mod anthropic;
mod anthropic_stream;
pub mod body;
mod build;
mod connection;
pub mod echo;
mod models;
pub mod openai;
mod openai_stream;
pub mod responses;
mod responses_stream;
pub mod retry;
pub mod route;
pub mod settings;
mod transport;

pub use build::build;
pub use settings::{ProviderKind, ProviderSettings};
pub use transport::with_idle_timeout;

use std::pin::Pin;
use std::sync::Arc;

use futures_util::Stream;
use serde_json::Value;

use crate::domain::message::{Message, StopReason, ToolCall, Usage};

/// A boxed future, as returned by [`Provider::stream`].
pub type BoxFuture<'a, T> = Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// The stream of events of one model call.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<ProviderEvent, ProviderError>> + Send>>;

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// One-paragraph description the model reads.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: Value,
}

/// Everything one model call needs.
#[derive(Debug, Clone)]
pub struct ProviderRequest {
    /// System prompt.
    pub system: String,
    /// Conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call: shared with the agent's specs, so a call copies no schema.
    pub tools: Vec<Arc<ToolSpec>>,
    /// Output token cap.
    pub max_tokens: u32,
    /// The model for this call (a session's `/model` choice); `None`: the provider's own.
    pub model: Option<String>,
    /// How much the model reasons first (a session's `/think`).
    pub thinking: Thinking,
    /// The chat shows the model's reasoning (`/reasoning on`): ask for a reasoning summary
    /// where the API makes one only on request (the Responses API; OpenAI refuses it to
    /// unverified organizations, so it is not asked for otherwise).
    pub show_reasoning: bool,
    /// Ask the provider to cache the request's stable prefix, under this key (the same for
    /// every call of one session; no session's key itself); `None`: no caching asked for.
    pub cache_key: Option<String>,
}

pub use crate::config::Thinking;

/// The tokens a thinking level may reason with: Anthropic's thinking budget, and what an
/// OpenAI call's token cap grows by (its reasoning counts in it); `None` when off.
pub fn thinking_budget(level: Thinking) -> Option<u32> {
    match level {
        Thinking::Off => None,
        Thinking::Minimal => Some(1024),
        Thinking::Low => Some(4096),
        Thinking::Medium => Some(10_000),
        Thinking::High => Some(24_000),
    }
}

/// Which model answers a call, and which were skipped before it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The provider's name.
    pub provider: String,
    /// The model.
    pub model: String,
    /// Each model skipped, with why (`openai/gpt-4.1: rate limited (429)`), in order.
    pub skipped: Vec<String>,
}

/// One event of a streaming model call.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// Which model answers (first, from a [`route::ModelRouter`]; a single provider sends
    /// none).
    Answered(Answered),
    /// A piece of answer text.
    TextDelta(String),
    /// A piece of reasoning text.
    ThinkingDelta(String),
    /// The reasoning so far ends here as one block (Anthropic): with its `signature`, or,
    /// `redacted`, a block whose text the provider withheld and `signature` is its data.
    ThinkingSealed {
        /// The block's signature, or a redacted block's data.
        signature: String,
        /// Whether the block was redacted.
        redacted: bool,
    },
    /// A complete tool call (arguments fully assembled and parsed).
    ToolCall(ToolCall),
    /// The call ended; always the last event of a successful stream.
    Done {
        /// Why the model stopped.
        stop_reason: StopReason,
        /// Token usage, zeros when the provider did not say.
        usage: Usage,
    },
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The server could not be reached.
    #[error("cannot reach the model server at {url}: {reason}")]
    Connect {
        /// Base URL tried.
        url: String,
        /// Underlying error, short.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("the model server answered {status}: {message}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// Error message from the body, short.
        message: String,
        /// Seconds to wait, from a `retry-after` header.
        retry_after: Option<u64>,
    },
    /// No event arrived within the idle timeout.
    #[error("the model sent nothing for {0} s")]
    IdleTimeout(u64),
    /// The stream broke or carried something unparseable.
    #[error("the model stream broke: {0}")]
    Stream(String),
    /// No provider is configured.
    #[error("{0}")]
    NotConfigured(String),
}

impl ProviderError {
    /// True for failures worth retrying: connect errors, 429 and 5xx.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Connect { .. } => true,
            ProviderError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

/// A model backend.
pub trait Provider: Send + Sync {
    /// Provider name for transcripts (`openai`, `anthropic`, `echo`).
    fn name(&self) -> &str;
    /// Model name for transcripts and `/status`.
    fn model(&self) -> &str;
    /// Starts one streaming call. Connection-level retries happen inside, before the
    /// stream is returned; the returned stream ends with [`ProviderEvent::Done`] or an error.
    fn stream(&self, request: ProviderRequest)
    -> BoxFuture<'_, Result<EventStream, ProviderError>>;
    /// The models the provider's server lists (for `/model`'s menu); none by default.
    fn models(&self) -> BoxFuture<'_, Result<Vec<String>, ProviderError>> {
        Box::pin(async { Ok(Vec::new()) })
    }
    /// The provider and the model a model name (a session's `/model`) names here; by
    /// default this provider and the name.
    fn resolve(&self, model: &str) -> (String, String) {
        (self.name().to_owned(), model.to_owned())
    }
    /// Why model name `model` cannot be used here (its provider is named but not set up),
    /// if it cannot; none by default.
    fn unusable(&self, model: &str) -> Option<String> {
        let _ = model;
        None
    }
    /// Lines for `/status` about the fallbacks and what of them rests, for a session that
    /// chose `choice` (`/model`); none by default.
    fn route_lines(&self, choice: Option<&str>) -> Vec<String> {
        let _ = choice;
        Vec::new()
    }
}

/// Fixtures shared by the providers' tests.
#[cfg(test)]
mod tests_support {
    use crate::domain::message::{ContentBlock, ImageBlock, Message, UserMessage};

    /// A user message "what is this?" with a PNG image whose base64 bytes are `data`.
    pub(super) fn with_image(data: &str) -> Message {
        Message::User(UserMessage {
            content: vec![
                ContentBlock::text("what is this?"),
                ContentBlock::Image(ImageBlock {
                    data: data.into(),
                    mime_type: "image/png".into(),
                    path: Some("media/k/a.png".into()),
                }),
            ],
            timestamp: 1,
        })
    }

    /// A `browser` call and its result: a text and a screenshot (with its bytes `QUJD`, as a
    /// vision model gets it).
    pub(super) fn shot_result() -> (crate::domain::message::ToolCall, Message) {
        let call = crate::domain::message::ToolCall {
            id: "call_9".into(),
            name: "browser".into(),
            arguments: serde_json::json!({}),
        };
        let mut result =
            Message::tool_result_with_images(&call, "saved", false, &["browser/a.png".into()]);
        if let Message::ToolResult(r) = &mut result
            && let ContentBlock::Image(image) = &mut r.content[1]
        {
            image.data = "QUJD".into();
        }
        (call, result)
    }

    /// An environment lookup answering `pairs` only.
    pub(super) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }
}
