//! The HTTP side: the routes of the fake, and the Web API at `/api/{method}` with call
//! recording, the token check, injected 429s and the method table. Errors are HTTP 200
//! `{"ok":false,"error":".."}`, as on Slack.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::header::{AUTHORIZATION, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{any, get, post};
use serde_json::{Value, json};

use super::json::{APP_TOKEN, BOT_TOKEN};
use super::params::{self, Params};
use super::state::Shared;
use super::types::RecordedCall;
use super::{chat, directory, files, history, interactive, marks, socket};

/// What a method answers: the fields besides `"ok": true`, or Slack's error code.
pub(crate) type ApiResult = Result<Value, &'static str>;

/// A Web API method.
type Handler = fn(&Shared, &Params) -> ApiResult;

/// The token a method needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    /// The app-level token (`xapp-`).
    App,
    /// The bot token (`xoxb-`).
    Bot,
}

/// The routes of the fake Slack.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/{method}", any(api))
        .route("/socket", get(socket::upgrade))
        .route("/upload/{file_id}", post(files::upload))
        .route("/files/{id}/{name}", get(files::download))
        .route("/respond/{n}", post(interactive::respond))
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

/// The method table.
fn handler(method: &str) -> Option<(Needs, Handler)> {
    use Needs::{App, Bot};
    let entry: (Needs, Handler) = match method {
        "apps.connections.open" => (App, socket::connections_open),
        "auth.test" => (Bot, directory::auth_test),
        "chat.postMessage" => (Bot, chat::post_message),
        "chat.update" => (Bot, chat::update),
        "chat.delete" => (Bot, chat::delete),
        "chat.postEphemeral" => (Bot, chat::post_ephemeral),
        "reactions.add" => (Bot, marks::reaction_add),
        "reactions.remove" => (Bot, marks::reaction_remove),
        "pins.add" => (Bot, marks::pin_add),
        "pins.remove" => (Bot, marks::pin_remove),
        "conversations.history" => (Bot, history::history),
        "conversations.replies" => (Bot, history::replies),
        "conversations.open" => (Bot, directory::conversations_open),
        "conversations.info" => (Bot, directory::conversations_info),
        "users.info" => (Bot, directory::users_info),
        "files.getUploadURLExternal" => (Bot, files::get_upload_url),
        "files.completeUploadExternal" => (Bot, files::complete_upload),
        _ => return None,
    };
    Some(entry)
}

/// `{"ok":false,"error":error}` with `status`.
pub(crate) fn error_response(status: StatusCode, error: &str) -> Response {
    (status, Json(json!({ "ok": false, "error": error }))).into_response()
}

/// The token of `Authorization: Bearer <token>`, if any.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_owned())
        .filter(|t| !t.is_empty())
}

/// Checks the token against what the method needs: none is `not_authed`, the other known
/// token `not_allowed_token_type`, anything else `invalid_auth`.
fn check_token(needs: Needs, token: Option<&str>) -> Result<(), &'static str> {
    let (wanted, other) = match needs {
        Needs::App => (APP_TOKEN, BOT_TOKEN),
        Needs::Bot => (BOT_TOKEN, APP_TOKEN),
    };
    match token {
        None => Err("not_authed"),
        Some(token) if token == wanted => Ok(()),
        Some(token) if token == other => Err("not_allowed_token_type"),
        Some(_) => Err("invalid_auth"),
    }
}

/// Uses up one injected 429 of `method`; its `Retry-After` seconds if there was one.
fn take_429(shared: &Shared, method: &str) -> Option<u64> {
    let mut state = shared.lock();
    let (left, retry_after) = state.limits.get_mut(method)?;
    if *left == 0 {
        return None;
    }
    *left -= 1;
    let retry_after = *retry_after;
    state.rate_limited += 1;
    Some(retry_after)
}

/// `/api/{method}`: GET or POST, arguments in the query and/or the body.
async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let params = params::collect(uri.query(), &headers, &body);
    shared.lock().calls.push(RecordedCall {
        method: method.clone(),
        params: params.to_value(),
    });
    shared.touch();
    let Some((needs, handler)) = handler(&method) else {
        return error_response(StatusCode::NOT_FOUND, "unknown_method");
    };
    let token = bearer(&headers).or_else(|| params.nonempty("token"));
    if let Err(error) = check_token(needs, token.as_deref()) {
        return error_response(StatusCode::OK, error);
    }
    if let Some(retry_after) = take_429(&shared, &method) {
        shared.touch();
        let mut response = error_response(StatusCode::TOO_MANY_REQUESTS, "ratelimited");
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(retry_after));
        return response;
    }
    let result = handler(&shared, &params);
    shared.touch();
    match result {
        Ok(mut fields) => {
            if let Some(map) = fields.as_object_mut() {
                map.insert("ok".to_owned(), Value::Bool(true));
            }
            Json(fields).into_response()
        }
        Err(error) => error_response(StatusCode::OK, error),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn tokens_are_checked_by_kind() {
        assert_eq!(check_token(Needs::Bot, None), Err("not_authed"));
        assert_eq!(check_token(Needs::Bot, Some("xoxb-test")), Ok(()));
        assert_eq!(
            check_token(Needs::Bot, Some("xapp-test")),
            Err("not_allowed_token_type")
        );
        assert_eq!(check_token(Needs::App, Some("nope")), Err("invalid_auth"));
        assert!(handler("chat.nope").is_none());
    }
}
