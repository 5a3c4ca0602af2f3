//! Request parameters: JSON bodies, `application/x-www-form-urlencoded` bodies and query
//! strings all become one JSON object; typed getters accept numbers given as strings and JSON
//! given as a string (as form-encoded clients send them).

use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use serde_json::{Map, Value};

use super::reply::ApiError;

/// The parameters of one call.
pub(crate) type Params = Map<String, Value>;

/// One file part of a `multipart/form-data` body.
#[derive(Debug, Clone)]
pub(crate) struct FilePart {
    /// The form field (`photo`, `document`, `voice`, `files[0]`).
    pub(crate) field: String,
    /// The file name the client gave.
    pub(crate) file_name: String,
    /// The part's `Content-Type`, if any.
    pub(crate) mime_type: Option<String>,
    /// The bytes.
    pub(crate) bytes: Vec<u8>,
}

/// Parses the query and body into parameters; body fields win over query fields. Bodies that
/// are not a JSON object answer 400. File parts of a multipart body come back apart.
pub(crate) fn parse(
    headers: &HeaderMap,
    query: Option<&str>,
    bytes: &Bytes,
) -> Result<(Params, Vec<FilePart>), ApiError> {
    let mut params = query.map(form).unwrap_or_default();
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut files = Vec::new();
    let body = if bytes.iter().all(u8::is_ascii_whitespace) {
        Params::new()
    } else if content_type.starts_with("multipart/form-data") {
        let (fields, parts) = multipart(&content_type, bytes)?;
        files = parts;
        fields
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        form(&String::from_utf8_lossy(bytes))
    } else {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(map)) => map,
            _ => return Err(ApiError::bad_request("request body is not a JSON object")),
        }
    };
    params.extend(body);
    Ok((params, files))
}

/// The text fields and the file parts of a `multipart/form-data` body (split on bytes, so
/// binary files arrive whole).
pub(crate) fn multipart(
    content_type: &str,
    bytes: &[u8],
) -> Result<(Params, Vec<FilePart>), ApiError> {
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))
        .map(|b| b.trim_matches('"').to_string())
        .ok_or_else(|| ApiError::bad_request("multipart body without a boundary"))?;
    let delimiter = format!("--{boundary}");
    let mut params = Params::new();
    let mut files = Vec::new();
    for part in split_on(bytes, delimiter.as_bytes()) {
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let Some(at) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..at]).into_owned();
        let value = &part[at + 4..];
        let value = value.strip_suffix(b"\r\n").unwrap_or(value);
        let disposition = |key: &str| {
            head.split([';', '\n'])
                .find_map(|p| p.trim().strip_prefix(&format!("{key}=")))
                .map(|v| v.trim().trim_matches('"').to_string())
        };
        let Some(name) = disposition("name") else {
            continue;
        };
        match disposition("filename") {
            Some(file_name) => {
                let mime_type = head.lines().find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.trim()
                        .eq_ignore_ascii_case("content-type")
                        .then(|| v.trim().to_owned())
                });
                files.push(FilePart {
                    field: name,
                    file_name,
                    mime_type,
                    bytes: value.to_vec(),
                });
            }
            None => {
                let text = String::from_utf8_lossy(value).into_owned();
                params.insert(name, Value::String(text));
            }
        }
    }
    Ok((params, files))
}

/// The pieces of `bytes` between occurrences of `delimiter`.
fn split_on<'a>(bytes: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut pieces = Vec::new();
    let mut rest = bytes;
    while let Some(at) = find(rest, delimiter) {
        pieces.push(&rest[..at]);
        rest = &rest[at + delimiter.len()..];
    }
    pieces.push(rest);
    pieces
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
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
