//! Request parameters: JSON bodies, `application/x-www-form-urlencoded` bodies and query
//! strings all become one JSON object; typed getters accept numbers given as strings and JSON
//! given as a string (as form-encoded clients send them).

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use serde_json::{Map, Value};

use super::reply::ApiError;

/// The parameters of one call.
pub(crate) type Params = Map<String, Value>;

/// Parses the query and body into parameters; body fields win over query fields. File
/// uploads and bodies that are not a JSON object answer 400.
pub(crate) fn parse(
    headers: &HeaderMap,
    query: Option<&str>,
    bytes: &Bytes,
) -> Result<Params, ApiError> {
    let mut params = query.map(form).unwrap_or_default();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        Params::new()
    } else if content_type.starts_with("multipart/form-data") {
        multipart(&content_type, bytes)?
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        form(&String::from_utf8_lossy(bytes))
    } else {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(map)) => map,
            _ => return Err(ApiError::bad_request("request body is not a JSON object")),
        }
    };
    params.extend(body);
    Ok(params)
}

/// Text fields of a `multipart/form-data` body (teloxide sends `setWebhook` this way); file
/// parts are refused.
fn multipart(content_type: &str, bytes: &Bytes) -> Result<Params, ApiError> {
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .map(|b| b.trim_matches('"').to_string())
        .ok_or_else(|| ApiError::bad_request("multipart body without a boundary"))?;
    let text = String::from_utf8_lossy(bytes);
    let mut params = Params::new();
    for part in text.split(&format!("--{boundary}")) {
        let part = part.trim_start_matches("\r\n");
        let Some((head, value)) = part.split_once("\r\n\r\n") else {
            continue;
        };
        if head.to_ascii_lowercase().contains("filename=") {
            return Err(ApiError::bad_request(
                "file uploads are not supported by the fake",
            ));
        }
        let Some(name) = head
            .split(';')
            .find_map(|p| p.trim().strip_prefix("name="))
            .map(|n| n.lines().next().unwrap_or(n).trim_matches('"').to_string())
        else {
            continue;
        };
        let value = value.strip_suffix("\r\n").unwrap_or(value);
        params.insert(name, Value::String(value.to_string()));
    }
    Ok(params)
}

/// Decodes `a=1&b=x%20y` into string values.
fn form(text: &str) -> Params {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(key), Value::String(percent_decode(value)))
        })
        .collect()
}

/// `+` to space and `%XX` to bytes; malformed escapes are kept as they are.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = text
                    .get(i + 1..i + 3)
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(byte) = hex {
                    out.push(byte);
                    i += 2;
                } else {
                    out.push(b'%');
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An integer parameter (a JSON number or a numeric string); `null` counts as absent.
pub(crate) fn int(params: &Params, key: &str) -> Result<Option<i64>, ApiError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::bad_request(&format!("invalid {key} specified"))),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(&format!("invalid {key} specified"))),
        Some(_) => Err(ApiError::bad_request(&format!("invalid {key} specified"))),
    }
}

/// A boolean parameter (`true`/`false` or the strings `true`/`false`/`1`/`0`).
pub(crate) fn boolean(params: &Params, key: &str) -> bool {
    match params.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => matches!(s.as_str(), "true" | "True" | "1"),
        Some(Value::Number(n)) => n.as_i64().is_some_and(|n| n != 0),
        _ => false,
    }
}

/// A string parameter; numbers are turned into their text.
pub(crate) fn string(params: &Params, key: &str) -> Option<String> {
    match params.get(key) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// A JSON object or array parameter, also when given as a string holding JSON.
pub(crate) fn json(params: &Params, key: &str) -> Option<Value> {
    match params.get(key) {
        Some(v @ (Value::Object(_) | Value::Array(_))) => Some(v.clone()),
        Some(Value::String(s)) => serde_json::from_str::<Value>(s)
            .ok()
            .filter(|v| v.is_object() || v.is_array()),
        _ => None,
    }
}

/// The `chat_id`: missing -> `chat_id is empty`; an `@username` (the fake knows no chat
/// usernames) or garbage -> `chat not found`.
pub(crate) fn chat_id(params: &Params) -> Result<i64, ApiError> {
    match params.get("chat_id") {
        None | Some(Value::Null) => Err(ApiError::bad_request("chat_id is empty")),
        Some(Value::String(s)) if s.is_empty() => Err(ApiError::bad_request("chat_id is empty")),
        _ => int(params, "chat_id")
            .ok()
            .flatten()
            .ok_or_else(ApiError::chat_not_found),
    }
}

/// The `message_id` (required): missing -> `message identifier is not specified`.
pub(crate) fn message_id(params: &Params) -> Result<i64, ApiError> {
    int(params, "message_id")?
        .ok_or_else(|| ApiError::bad_request("message identifier is not specified"))
}
