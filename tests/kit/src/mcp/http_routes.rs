//! The routes of [`FakeMcpHttp`](super::FakeMcpHttp) on `/mcp`: POST one JSON-RPC message,
//! GET refused (no server-to-client stream), DELETE ends a session.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use super::handler::Reply;
use super::http_state::{HttpShared, McpHttpRequest, lock};
use super::jsonrpc::{self, Incoming, PARSE_ERROR};

/// The session header.
const SESSION: &str = "mcp-session-id";

type Shared = Arc<HttpShared>;

/// A refused request: its status and a short text.
type Refusal = (StatusCode, &'static str);

/// The router serving `/mcp`.
pub(crate) fn router(shared: Shared) -> axum::Router {
    axum::Router::new()
        .route(
            "/mcp",
            post(post_message).get(get_stream).delete(delete_session),
        )
        .with_state(shared)
}

async fn post_message(State(shared): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let message: Option<Value> = serde_json::from_slice(&body).ok();
    let method = message
        .as_ref()
        .and_then(|m| m.get("method"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    record(&shared, "POST", method.clone(), &headers);
    if let Err(refused) = admit(&shared, &headers) {
        return refused.into_response();
    }
    let Some(message) = message else {
        let error = jsonrpc::error(&Value::Null, PARSE_ERROR, "Parse error");
        return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
    };
    let initialize = method.as_deref() == Some("initialize");
    if !initialize && let Err(refused) = session(&shared, &headers) {
        return refused.into_response();
    }
    let streamed = streamed(&message);
    match Incoming::classify(message.clone()) {
        Incoming::Notification { .. } | Incoming::Response => {
            shared.handler.handle(message).await;
            StatusCode::ACCEPTED.into_response()
        }
        Incoming::Invalid { .. } => match shared.handler.handle(message).await {
            Reply::Answer(error) => (StatusCode::BAD_REQUEST, axum::Json(error)).into_response(),
            _ => StatusCode::BAD_REQUEST.into_response(),
        },
        Incoming::Request { .. } if streamed => {
            super::sse::answer(&shared, shared.handler.handle(message))
        }
        Incoming::Request { .. } => {
            let reply = shared.handler.handle(message).await;
            let mut response = json_answer(reply);
            if initialize {
                add_session(&shared, &mut response);
            }
            response
        }
    }
}

/// 503 while down, 406 without both accepted types, 415 unless the body is JSON.
fn admit(shared: &HttpShared, headers: &HeaderMap) -> Result<(), Refusal> {
    if shared.down.load(Ordering::SeqCst) {
        return Err((StatusCode::SERVICE_UNAVAILABLE, "fake MCP server is down"));
    }
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .collect();
    let accept = accept.join(",");
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        let message = "Accept must list application/json and text/event-stream";
        return Err((StatusCode::NOT_ACCEPTABLE, message));
    }
    let content_type = text(headers, header::CONTENT_TYPE.as_str()).unwrap_or_default();
    if !content_type.starts_with("application/json") {
        let message = "Content-Type must be application/json";
        return Err((StatusCode::UNSUPPORTED_MEDIA_TYPE, message));
    }
    Ok(())
}

/// 400 without a session header, 404 with an unknown one.
fn session(shared: &HttpShared, headers: &HeaderMap) -> Result<String, Refusal> {
    let Some(id) = text(headers, SESSION) else {
        return Err((StatusCode::BAD_REQUEST, "Mcp-Session-Id is missing"));
    };
    if !lock(&shared.sessions).contains(&id) {
        return Err((StatusCode::NOT_FOUND, "unknown session"));
    }
    Ok(id)
}

/// Whether a request is answered as an event stream: `tools/call` of `echo` or `sleep`.
fn streamed(message: &Value) -> bool {
    let tool = message.pointer("/params/name").and_then(Value::as_str);
    message.get("method").and_then(Value::as_str) == Some("tools/call")
        && matches!(tool, Some("echo" | "sleep"))
}

fn json_answer(reply: Reply) -> Response {
    match reply {
        Reply::Answer(answer) => axum::Json(answer).into_response(),
        // A request always gets an answer over HTTP, except when cancelled.
        Reply::Silent | Reply::Crash => StatusCode::ACCEPTED.into_response(),
    }
}

fn add_session(shared: &HttpShared, response: &mut Response) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(SESSION, value);
        lock(&shared.sessions).insert(id);
    }
}

async fn get_stream(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    record(&shared, "GET", None, &headers);
    let allow = [(header::ALLOW, "POST, DELETE")];
    (
        StatusCode::METHOD_NOT_ALLOWED,
        allow,
        "no server-to-client stream",
    )
        .into_response()
}

async fn delete_session(State(shared): State<Shared>, headers: HeaderMap) -> Response {
    record(&shared, "DELETE", None, &headers);
    match session(&shared, &headers) {
        Ok(id) => {
            lock(&shared.sessions).remove(&id);
            StatusCode::OK.into_response()
        }
        Err(refused) => refused.into_response(),
    }
}

fn record(shared: &HttpShared, http_method: &str, method: Option<String>, headers: &HeaderMap) {
    let headers = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let request = McpHttpRequest {
        http_method: http_method.to_owned(),
        method,
        headers,
    };
    lock(&shared.requests).push(request);
}

fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name)?.to_str().ok().map(str::to_owned)
}
