//! Request bodies: JSON, or `multipart/form-data` with a `payload_json` part and file parts
//! (how serenity uploads attachments).

use crate::form::{disposition_param, find, split};
use axum::http::HeaderMap;
use axum::http::header::CONTENT_TYPE;
use serde_json::Value;

use super::error::ApiError;

/// A parsed request body.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Body {
    /// The JSON (multipart: `payload_json`); `Null` when there was none.
    pub(crate) json: Value,
    /// Uploaded files: file name and size in bytes.
    pub(crate) files: Vec<(String, u64)>,
    /// The bytes of each of `files`, in the same order.
    pub(crate) contents: Vec<Vec<u8>>,
}

/// Parses a body by its content type; JSON that does not parse is 400 50109.
pub(crate) fn parse(headers: &HeaderMap, bytes: &[u8]) -> Result<Body, ApiError> {
    let content_type = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Some(boundary) = boundary(content_type) {
        return multipart(bytes, &boundary);
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Body::default());
    }
    match serde_json::from_slice(bytes) {
        Ok(json) => Ok(Body {
            json,
            ..Body::default()
        }),
        Err(_) => Err(ApiError::invalid_json()),
    }
}

/// The boundary of a `multipart/form-data` content type.
fn boundary(content_type: &str) -> Option<String> {
    let (kind, params) = content_type.split_once(';')?;
    if !kind.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    params.split(';').find_map(|p| {
        let (key, value) = p.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("boundary")
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

/// Splits a multipart body into `payload_json` and files.
fn multipart(bytes: &[u8], boundary: &str) -> Result<Body, ApiError> {
    let delimiter = format!("--{boundary}");
    let mut body = Body::default();
    for part in split(bytes, delimiter.as_bytes()).into_iter().skip(1) {
        if part.starts_with(b"--") {
            break;
        }
        let part = part.strip_prefix(b"\r\n").unwrap_or(part);
        let Some(split_at) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..split_at]);
        let mut content = &part[split_at + 4..];
        content = content.strip_suffix(b"\r\n").unwrap_or(content);
        let name = disposition_param(&head, "name");
        let filename = disposition_param(&head, "filename");
        match (name.as_deref(), filename) {
            (_, Some(filename)) => {
                body.files
                    .push((filename, u64::try_from(content.len()).unwrap_or(u64::MAX)));
                body.contents.push(content.to_vec());
            }
            (Some("payload_json"), None) => {
                body.json =
                    serde_json::from_slice(content).map_err(|_| ApiError::invalid_json())?;
            }
            _ => {}
        }
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn multipart_gives_payload_json_and_files() {
        let raw = "--XYZ\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n{\"content\":\"hi\"}\r\n--XYZ\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\r\nhello\r\n--XYZ--\r\n";
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("multipart/form-data; boundary=XYZ"),
        );
        let body = parse(&headers, raw.as_bytes()).unwrap();
        assert_eq!(body.json["content"], "hi");
        assert_eq!(body.files, vec![("a.txt".to_owned(), 5)]);
    }

    #[test]
    fn bad_json_is_50109() {
        let err = parse(&HeaderMap::new(), b"{nope").unwrap_err();
        assert_eq!(err, ApiError::invalid_json());
        assert_eq!(parse(&HeaderMap::new(), b"").unwrap().json, Value::Null);
    }
}
