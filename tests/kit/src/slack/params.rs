//! Web API arguments: the query string and the body (`application/json`,
//! `application/x-www-form-urlencoded` or `multipart/form-data`) merged into one JSON object,
//! read leniently as Slack does (numbers and booleans may come as strings, JSON arguments as
//! JSON or as JSON-encoded strings).

use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use serde_json::{Map, Value};

use super::multipart;

/// The merged arguments of one call.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Params(pub(crate) Map<String, Value>);

/// Merges `query` and `body` (body fields win) by the body's content type.
pub(crate) fn collect(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> Params {
    let mut map = Map::new();
    for (key, value) in form_pairs(query.unwrap_or("")) {
        map.insert(key, Value::String(value));
    }
    let raw_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let content_type = raw_type.to_ascii_lowercase();
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Params(map);
    }
    if let Some(parts) = multipart::parse(raw_type, body) {
        for part in parts.into_iter().filter(|p| p.filename.is_none()) {
            let value = String::from_utf8_lossy(&part.content).into_owned();
            map.insert(part.name, Value::String(value));
        }
    } else if content_type.starts_with("application/json")
        || (content_type.is_empty() && trimmed.starts_with('{'))
    {
        if let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(body) {
            map.extend(fields);
        }
    } else {
        for (key, value) in form_pairs(&text) {
            map.insert(key, Value::String(value));
        }
    }
    Params(map)
}

/// `key=value&...` pairs, `+` and `%XX` decoded.
fn form_pairs(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

/// Decodes `+` and `%XX` escapes.
pub(crate) fn decode(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| raw.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (escaped, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 2;
            }
            (None, b'+') => out.push(b' '),
            (None, byte) => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Params {
    /// The argument as text: strings as they are, numbers and booleans written out.
    pub(crate) fn str(&self, key: &str) -> Option<String> {
        match self.0.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    /// The argument as non-empty text.
    pub(crate) fn nonempty(&self, key: &str) -> Option<String> {
        self.str(key).filter(|s| !s.is_empty())
    }

    /// The argument as text, `""` when absent.
    pub(crate) fn text(&self, key: &str) -> String {
        self.str(key).unwrap_or_default()
    }

    /// The argument as a whole number (`5` or `"5"`).
    pub(crate) fn u64(&self, key: &str) -> Option<u64> {
        match self.0.get(key)? {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    /// The argument as a flag (`true`, `"true"`, `1`, `"1"`); false when absent.
    pub(crate) fn bool(&self, key: &str) -> bool {
        match self.0.get(key) {
            Some(Value::Bool(b)) => *b,
            Some(Value::Number(n)) => n.as_u64() == Some(1),
            Some(Value::String(s)) => matches!(s.trim(), "true" | "1"),
            _ => false,
        }
    }

    /// A JSON argument given as JSON or as a JSON-encoded string; `None` when absent, null,
    /// empty or not JSON.
    pub(crate) fn json(&self, key: &str) -> Option<Value> {
        match self.0.get(key)? {
            Value::Null => None,
            Value::String(s) if s.trim().is_empty() => None,
            Value::String(s) => serde_json::from_str(s).ok(),
            other => Some(other.clone()),
        }
    }

    /// The arguments as one JSON object (what calls are recorded with).
    pub(crate) fn to_value(&self) -> Value {
        Value::Object(self.0.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use axum::http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn headers(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    #[test]
    fn form_and_query_merge() {
        let body = b"text=a+b%21&limit=5&blocks=%5B%7B%22type%22%3A%22divider%22%7D%5D";
        let params = collect(
            Some("channel=C1&limit=9"),
            &headers("application/x-www-form-urlencoded"),
            body,
        );
        assert_eq!(params.text("channel"), "C1");
        assert_eq!(params.text("text"), "a b!");
        assert_eq!(params.u64("limit"), Some(5));
        assert_eq!(params.json("blocks"), Some(json!([{"type": "divider"}])));
    }

    #[test]
    fn json_bodies_keep_types() {
        let body = br#"{"channel":"C1","limit":3,"inclusive":true,"files":[{"id":"F1"}]}"#;
        let params = collect(None, &headers("application/json; charset=utf-8"), body);
        assert_eq!(params.u64("limit"), Some(3));
        assert!(params.bool("inclusive"));
        assert_eq!(params.json("files"), Some(json!([{"id": "F1"}])));
        assert_eq!(params.str("limit").as_deref(), Some("3"));
        assert_eq!(decode("%E2%9C%93"), "✓");
    }
}
