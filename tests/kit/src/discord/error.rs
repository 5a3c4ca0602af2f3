//! REST answers: JSON with a status, 204 No Content, Discord's error shape
//! `{"code":N,"message":"..."}` and the 429 shape
//! `{"message":"You are being rate limited.","retry_after":S,"global":false}`.

use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Json, Response};
use serde_json::{Value, json};

use super::json::now_ms;
use super::limits::Quota;

/// What a route answers when it succeeds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// 200 with a JSON body.
    Json(Value),
    /// 201 with a JSON body (Discord's answer to a newly created command).
    Created(Value),
    /// 204 No Content.
    NoContent,
    /// 200 with a JSON body and the channel's `x-ratelimit-*` headers.
    Limited(Value, Quota),
}

impl IntoResponse for Reply {
    fn into_response(self) -> Response {
        match self {
            Reply::Json(value) => Json(value).into_response(),
            Reply::Created(value) => (StatusCode::CREATED, Json(value)).into_response(),
            Reply::NoContent => StatusCode::NO_CONTENT.into_response(),
            Reply::Limited(value, quota) => {
                let mut response = Json(value).into_response();
                let reset = now_ms() as f64 / 1000.0 + quota.reset_after;
                insert_headers(
                    &mut response,
                    [
                        ("x-ratelimit-limit", quota.limit.to_string()),
                        ("x-ratelimit-remaining", quota.remaining.to_string()),
                        ("x-ratelimit-reset", format!("{reset:.3}")),
                        (
                            "x-ratelimit-reset-after",
                            format!("{:.3}", quota.reset_after),
                        ),
                        ("x-ratelimit-bucket", "fake-channel-messages".to_owned()),
                    ],
                );
                response
            }
        }
    }
}

/// A failed call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ApiError {
    /// HTTP `status` with `{"code":code,"message":message}` plus `errors` if given.
    Discord {
        status: u16,
        code: u64,
        message: String,
        errors: Option<Value>,
    },
    /// 429 with `retry_after` seconds and rate-limit headers.
    RateLimited { retry_after: f64, limit: u32 },
}

impl ApiError {
    /// `status` with Discord error `code` and `message`.
    pub(crate) fn new(status: u16, code: u64, message: &str) -> ApiError {
        ApiError::Discord {
            status,
            code,
            message: message.to_owned(),
            errors: None,
        }
    }

    /// 401 `{"code":0,"message":"401: Unauthorized"}`.
    pub(crate) fn unauthorized() -> ApiError {
        ApiError::new(401, 0, "401: Unauthorized")
    }

    /// 404 `{"code":0,"message":"404: Not Found"}` (unknown route).
    pub(crate) fn not_found() -> ApiError {
        ApiError::new(404, 0, "404: Not Found")
    }

    /// 405 `{"code":0,"message":"405: Method Not Allowed"}`.
    pub(crate) fn method_not_allowed() -> ApiError {
        ApiError::new(405, 0, "405: Method Not Allowed")
    }

    /// 404 `{"code":10003,"message":"Unknown Channel"}`.
    pub(crate) fn unknown_channel() -> ApiError {
        ApiError::new(404, 10003, "Unknown Channel")
    }

    /// 404 `{"code":10008,"message":"Unknown Message"}`.
    pub(crate) fn unknown_message() -> ApiError {
        ApiError::new(404, 10008, "Unknown Message")
    }

    /// 400 `{"code":50006,"message":"Cannot send an empty message"}`.
    pub(crate) fn empty_message() -> ApiError {
        ApiError::new(400, 50006, "Cannot send an empty message")
    }

    /// 400 `{"code":50109,"message":"The request body contains invalid JSON."}`.
    pub(crate) fn invalid_json() -> ApiError {
        ApiError::new(400, 50109, "The request body contains invalid JSON.")
    }

    /// 400 `{"code":50024,"message":"Cannot execute action on this channel type"}`.
    pub(crate) fn wrong_channel_type() -> ApiError {
        ApiError::new(400, 50024, "Cannot execute action on this channel type")
    }

    /// 400 `{"code":50035,"message":"Invalid Form Body","errors":{field:{"_errors":[{code,
    /// message}]}}}`, Discord's validation error.
    pub(crate) fn invalid_form(field: &str, code: &str, message: &str) -> ApiError {
        let mut errors = json!({});
        errors[field] = json!({ "_errors": [{ "code": code, "message": message }] });
        ApiError::Discord {
            status: 400,
            code: 50035,
            message: "Invalid Form Body".to_owned(),
            errors: Some(errors),
        }
    }

    /// The 50035 of content over 2000 characters.
    pub(crate) fn content_too_long() -> ApiError {
        ApiError::invalid_form(
            "content",
            "BASE_TYPE_MAX_LENGTH",
            "Must be 2000 or fewer in length.",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Discord {
                status,
                code,
                message,
                errors,
            } => {
                let mut body = json!({ "code": code, "message": message });
                if let Some(errors) = errors {
                    body["errors"] = errors;
                }
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
                (status, Json(body)).into_response()
            }
            ApiError::RateLimited { retry_after, limit } => {
                let body = json!({
                    "message": "You are being rate limited.",
                    "retry_after": retry_after,
                    "global": false,
                });
                let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
                let reset = now_ms() as f64 / 1000.0 + retry_after;
                let headers = [
                    ("retry-after", format!("{}", retry_after.ceil() as u64)),
                    ("x-ratelimit-limit", limit.to_string()),
                    ("x-ratelimit-remaining", "0".to_owned()),
                    ("x-ratelimit-reset", format!("{reset:.3}")),
                    ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
                    ("x-ratelimit-bucket", "fake-channel-messages".to_owned()),
                    ("x-ratelimit-scope", "user".to_owned()),
                ];
                insert_headers(&mut response, headers);
                response
            }
        }
    }
}

/// Adds `headers` to `response`.
fn insert_headers<const N: usize>(response: &mut Response, headers: [(&'static str, String); N]) {
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(HeaderName::from_static(name), value);
        }
    }
}

/// The result of a REST route.
pub(crate) type ApiResult = Result<Reply, ApiError>;
