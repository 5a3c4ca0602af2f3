//! Bot API answers: `{"ok":true,"result":...}` and the error shape
//! `{"ok":false,"error_code":N,"description":"...","parameters":{"retry_after":S}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use serde_json::{Value, json};

/// The description of the 409 a second concurrent `getUpdates` gets.
pub(crate) const CONFLICT_POLLER: &str = "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running";

/// A failed call: HTTP status = `error_code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) code: u16,
    pub(crate) description: String,
    pub(crate) retry_after: Option<u64>,
}

impl ApiError {
    /// An error with `code` and the exact `description`.
    pub(crate) fn new(code: u16, description: impl Into<String>) -> ApiError {
        ApiError {
            code,
            description: description.into(),
            retry_after: None,
        }
    }

    /// 400 `Bad Request: {what}`.
    pub(crate) fn bad_request(what: &str) -> ApiError {
        ApiError::new(400, format!("Bad Request: {what}"))
    }

    /// 401 `Unauthorized`.
    pub(crate) fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized")
    }

    /// 404 `Not Found` (unknown method or path).
    pub(crate) fn not_found() -> ApiError {
        ApiError::new(404, "Not Found")
    }

    /// 409 `Conflict: {what}`.
    pub(crate) fn conflict(what: &str) -> ApiError {
        ApiError::new(409, format!("Conflict: {what}"))
    }

    /// 429 `Too Many Requests: retry after {seconds}` with `parameters.retry_after`.
    pub(crate) fn too_many_requests(seconds: u64) -> ApiError {
        ApiError {
            retry_after: Some(seconds),
            ..ApiError::new(429, format!("Too Many Requests: retry after {seconds}"))
        }
    }

    /// 400 `Bad Request: chat not found`.
    pub(crate) fn chat_not_found() -> ApiError {
        ApiError::bad_request("chat not found")
    }

    /// 400 `Bad Request: message thread not found`.
    pub(crate) fn thread_not_found() -> ApiError {
        ApiError::bad_request("message thread not found")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "ok": false,
            "error_code": self.code,
            "description": self.description,
        });
        if let Some(seconds) = self.retry_after {
            body["parameters"] = json!({ "retry_after": seconds });
        }
        let status = StatusCode::from_u16(self.code).unwrap_or(StatusCode::BAD_REQUEST);
        (status, Json(body)).into_response()
    }
}

/// `{"ok":true,"result":result}` with HTTP 200.
pub(crate) fn ok(result: Value) -> Response {
    Json(json!({ "ok": true, "result": result })).into_response()
}

/// Like [`ok`], with each placeholder text replaced by its raw JSON string content (which
/// may be JSON no decoder accepts, e.g. a lone surrogate `\ud800`).
pub(crate) fn ok_raw(result: Value, raw_texts: &[(String, String)]) -> Response {
    let mut text = json!({ "ok": true, "result": result }).to_string();
    for (placeholder, raw) in raw_texts {
        text = text.replace(placeholder.as_str(), raw);
    }
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

/// The result of a Bot API method.
pub(crate) type ApiResult = Result<Value, ApiError>;
