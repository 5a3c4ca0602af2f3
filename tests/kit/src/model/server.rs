//! The HTTP side: routes, request recording, and dispatch to the wire formats.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::RecordedRequest;
use super::script::{Failure, Reply, Script};
use super::stream::{self, Ctx, Usage};
use super::{anthropic, openai_chat, openai_responses};

/// The one model `GET /v1/models` lists and answers default to.
pub(crate) const MODEL: &str = "fake-model";

/// State shared by the handlers and the [`FakeModel`](super::FakeModel) handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) requests: Mutex<Vec<RecordedRequest>>,
    /// A failure of every model call, set by the test.
    pub(crate) outage: Mutex<Option<super::Outage>>,
    /// Which keys are refused or rate limited.
    pub(crate) keys: Mutex<KeyRules>,
    /// The simulated prompt cache.
    cache: super::cache::PromptCache,
    script: Script,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    /// State whose streams end when `shutdown` turns true or its sender is dropped.
    pub(crate) fn new(shutdown: watch::Receiver<bool>) -> Shared {
        Shared {
            requests: Mutex::default(),
            outage: Mutex::default(),
            keys: Mutex::default(),
            cache: super::cache::PromptCache::default(),
            script: Script::default(),
            shutdown,
        }
    }

    /// Records a POST; returns its 1-based number and the body parsed as JSON.
    fn record(&self, path: &str, headers: &HeaderMap, bytes: &Bytes) -> (usize, Option<Value>) {
        let parsed = serde_json::from_slice::<Value>(bytes).ok();
        let body = parsed
            .clone()
            .unwrap_or_else(|| Value::String(String::from_utf8_lossy(bytes).into_owned()));
        let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
        requests.push(RecordedRequest {
            path: path.to_owned(),
            body,
            key: key_of(headers),
        });
        (requests.len(), parsed)
    }

    /// The failure the test set for a call with `key`, if any: the outage, a refused key
    /// (401), a rate-limited one (429).
    async fn refusal(&self, key: Option<String>, format: Format) -> Option<Response> {
        let outage = *self.outage.lock().unwrap_or_else(PoisonError::into_inner);
        match outage {
            Some(super::Outage::Status(code)) => {
                let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
                return Some(error(format, status, &format!("fake outage {code}")));
            }
            Some(super::Outage::Silent) => {
                let mut shutdown = self.shutdown.clone();
                let _ = shutdown.wait_for(|stop| *stop).await;
                return Some(error(
                    format,
                    StatusCode::SERVICE_UNAVAILABLE,
                    "shutting down",
                ));
            }
            None => {}
        }
        let rules = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let key = key.unwrap_or_default();
        if rules
            .accepted
            .as_ref()
            .is_some_and(|keys| !keys.contains(&key))
        {
            return Some(error(format, StatusCode::UNAUTHORIZED, "invalid api key"));
        }
        if rules.limited.contains(&key) {
            return Some(error(
                format,
                StatusCode::TOO_MANY_REQUESTS,
                "rate limit reached for this key",
            ));
        }
        None
    }
}

/// Which API keys the server refuses or rate limits.
#[derive(Debug, Default)]
pub(crate) struct KeyRules {
    /// `Some`: only these are accepted.
    pub(crate) accepted: Option<Vec<String>>,
    /// These are answered 429.
    pub(crate) limited: Vec<String>,
}

/// The API key of a request: `authorization: Bearer KEY` or `x-api-key: KEY`.
fn key_of(headers: &HeaderMap) -> Option<String> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let api_key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    bearer.or(api_key).map(str::to_owned)
}

type AppState = State<Arc<Shared>>;

/// The routes of the fake model server.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/responses", post(responses))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/models", get(models))
        .fallback(not_found)
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

/// The wire format of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Chat,
    Responses,
    Anthropic,
}

async fn chat(state: AppState, uri: Uri, headers: HeaderMap, bytes: Bytes) -> Response {
    generate(state, uri, headers, bytes, Format::Chat).await
}

async fn responses(state: AppState, uri: Uri, headers: HeaderMap, bytes: Bytes) -> Response {
    generate(state, uri, headers, bytes, Format::Responses).await
}

async fn messages(state: AppState, uri: Uri, headers: HeaderMap, bytes: Bytes) -> Response {
    generate(state, uri, headers, bytes, Format::Anthropic).await
}

async fn generate(
    State(shared): AppState,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
    format: Format,
) -> Response {
    let (request, body) = shared.record(uri.path(), &headers, &bytes);
    if let Some(refusal) = shared.refusal(key_of(&headers), format).await {
        return refusal;
    }
    let Some(body) = body else {
        return error(format, StatusCode::BAD_REQUEST, "request body is not JSON");
    };
    let refusal = match format {
        Format::Anthropic => anthropic::refusal(&body),
        Format::Responses => openai_responses::refusal(&body),
        Format::Chat => None,
    };
    if let Some(refusal) = refusal {
        return error(format, StatusCode::BAD_REQUEST, &refusal);
    }
    let conversation = match format {
        Format::Chat => openai_chat::conversation(&body),
        Format::Responses => openai_responses::conversation(&body),
        Format::Anthropic => anthropic::conversation(&body),
    };
    let answer = match shared.script.reply(&conversation, request) {
        Reply::Answer(answer) => answer,
        Reply::Fail(Failure { status, message }) => return error(format, status, &message),
    };
    let cached = match format {
        Format::Anthropic => shared.cache.explicit(&body),
        Format::Chat | Format::Responses => shared.cache.automatic(&body),
    };
    let ctx = Ctx {
        request,
        model: body["model"].as_str().unwrap_or(MODEL).to_owned(),
        usage: Usage {
            input: tokens(bytes.len()),
            output: tokens(answer.output_chars()),
            cache_read: (cached.read / 4) as u64,
            cache_write: (cached.written / 4) as u64,
        },
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    };
    let shutdown = shared.shutdown.clone();
    if body["stream"].as_bool().unwrap_or(false) {
        return match format {
            Format::Chat => {
                let wire = openai_chat::ChatWire::new(ctx, openai_chat::include_usage(&body));
                stream::sse(wire, answer, shutdown)
            }
            Format::Responses => {
                stream::sse(openai_responses::ResponsesWire::new(ctx), answer, shutdown)
            }
            Format::Anthropic => stream::sse(anthropic::AnthropicWire::new(ctx), answer, shutdown),
        };
    }
    if !stream::settle(&answer, shutdown).await {
        return error(
            format,
            StatusCode::SERVICE_UNAVAILABLE,
            "fake model shutting down",
        );
    }
    Json(match format {
        Format::Chat => openai_chat::completion(&ctx, &answer),
        Format::Responses => openai_responses::whole(&ctx, &answer),
        Format::Anthropic => anthropic::message(&ctx, &answer),
    })
    .into_response()
}

/// Characters / 4, at least 1.
fn tokens(chars: usize) -> u64 {
    u64::try_from(chars / 4).unwrap_or(u64::MAX).max(1)
}

async fn count_tokens(
    State(shared): AppState,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let (_, body) = shared.record(uri.path(), &headers, &bytes);
    if body.is_none() {
        return error(
            Format::Anthropic,
            StatusCode::BAD_REQUEST,
            "request body is not JSON",
        );
    }
    Json(json!({ "input_tokens": tokens(bytes.len()) })).into_response()
}

async fn models() -> Json<Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": MODEL,
            "object": "model",
            "type": "model",
            "display_name": "Fake Model",
            "created": 0,
            "created_at": "2025-01-01T00:00:00Z",
            "owned_by": "chela-testkit",
        }],
        "has_more": false,
        "first_id": MODEL,
        "last_id": MODEL,
    }))
}

async fn not_found(
    State(shared): AppState,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    if method == Method::POST {
        shared.record(uri.path(), &headers, &bytes);
    }
    let message = format!("no route for {method} {}", uri.path());
    let body = json!({
        "type": "error",
        "error": { "type": "not_found_error", "code": "not_found", "message": message },
    });
    (StatusCode::NOT_FOUND, Json(body)).into_response()
}

/// An error response in `format`'s shape; 429 carries `retry-after: 1`.
fn error(format: Format, status: StatusCode, message: &str) -> Response {
    let kind = error_type(status);
    let body = match format {
        Format::Chat | Format::Responses => json!({
            "error": { "message": message, "type": kind, "param": null, "code": kind },
        }),
        Format::Anthropic => json!({
            "type": "error",
            "error": { "type": kind, "message": message },
        }),
    };
    let mut response = (status, Json(body)).into_response();
    if status == StatusCode::TOO_MANY_REQUESTS {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ if status.is_client_error() => "invalid_request_error",
        _ => "api_error",
    }
}
